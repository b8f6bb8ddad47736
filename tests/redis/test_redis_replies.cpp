// What the Redis lock does when the server refuses or forgets, against real redis-servers: error
// replies keep their text and get a hint (READONLY from a replica, OOM at maxmemory, WRONGTYPE), a
// failing acquire script leaves the key as it was, and fencing tokens keep increasing across a
// restart that lost the data.
#include "redis_test_util.hpp"

#include <boost/system/system_error.hpp>

#include <optional>
#include <string>

using namespace rt;
using zkcoro::error_code;
using zkcoro::redis_errc;

namespace {

// Acquires `key` through `rc` with the throwing form; returns what() (or "" when granted).
asio::awaitable<std::string> refusal(zkcoro::redis_client& rc, const std::string& key)
{
    zkcoro::redis_mutex m(rc, key);
    try {
        auto g = co_await m.acquire(2s);
        co_return std::string();
    } catch (const boost::system::system_error& e) {
        co_return std::string(e.what());
    }
}

asio::awaitable<error_code> acquire_code(zkcoro::redis_client& rc, const std::string& key)
{
    zkcoro::redis_mutex m(rc, key);
    auto me = co_await zkcoro::this_task::id();
    auto [ec, g] = co_await m.async_acquire(me, 2s, asio::as_tuple(asio::use_awaitable));
    co_return ec;
}

}  // namespace

TEST_CASE("READONLY from a replica: read_only, the server's text and 'point at the master'")
{
    auto& master = shared_redis();
    zktest::redis_server replica({.extra_args = {"--replicaof", "127.0.0.1", std::to_string(master.port())}});
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_client rc(ex, replica.url());
        auto key = unique_key("replica");
        CHECK(co_await acquire_code(rc, key) == redis_errc::read_only);
        auto what = co_await refusal(rc, key);
        MESSAGE(what);
        CHECK(what.find("connected to a replica: point at the master") != std::string::npos);
        CHECK(what.find("READONLY You can't write against a read only replica") != std::string::npos);
        CHECK(replica.command(cmd("EXISTS", key)) == "0");
    }, 20s);
}

TEST_CASE("OOM at maxmemory: out_of_memory, the server's text and 'maxmemory reached'; nothing written")
{
    zktest::redis_server srv;
    srv.command(cmd("SET", "filler", std::string(4096, 'x')));
    srv.command(cmd("CONFIG", "SET", "maxmemory-policy", "noeviction"));
    srv.command(cmd("CONFIG", "SET", "maxmemory", "1"));
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_client rc(ex, srv.url());
        auto key = unique_key("oom");
        CHECK(co_await acquire_code(rc, key) == redis_errc::out_of_memory);
        auto what = co_await refusal(rc, key);
        MESSAGE(what);
        CHECK(what.find("maxmemory reached") != std::string::npos);
        CHECK(what.find("OOM command not allowed") != std::string::npos);
        CHECK(srv.command(cmd("EXISTS", key)) == "0");
        CHECK(srv.command(cmd("EXISTS", key + ":fencing")) == "0");
    }, 20s);
}

TEST_CASE("WRONGTYPE: wrong_type with the server's text, for the key and for its fencing counter")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_client rc(ex, srv.url());
        auto key = unique_key("type");
        srv.command(cmd("LPUSH", key, "a list"));
        CHECK(co_await acquire_code(rc, key) == redis_errc::wrong_type);
        auto what = co_await refusal(rc, key);
        MESSAGE(what);
        CHECK(what.find("WRONGTYPE Operation against a key holding the wrong kind of value") != std::string::npos);
        CHECK(srv.command(cmd("TYPE", key)) == "list");
        auto key2 = unique_key("type");
        srv.command(cmd("HSET", key2 + ":fencing", "f", "v"));
        CHECK(co_await acquire_code(rc, key2) == redis_errc::wrong_type);
        CHECK(srv.command(cmd("EXISTS", key2)) == "0");
    });
}

TEST_CASE("no partial acquisition: a fencing counter that is not an integer leaves the key unset")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_client rc(ex, srv.url());
        for (std::string bad : {"abc", "", "-5", "12.5", "99999999999999999999"}) {
            CAPTURE(bad);
            auto key = unique_key("partial");
            srv.command(cmd("SET", key + ":fencing", bad));
            CHECK(co_await acquire_code(rc, key) == redis_errc::bad_fencing_counter);
            CHECK(srv.command(cmd("EXISTS", key)) == "0");
            CHECK(srv.command(cmd("GET", key + ":fencing")) == bad);
        }
        auto key = unique_key("partial");
        srv.command(cmd("SET", key + ":fencing", "abc"));
        auto what = co_await refusal(rc, key);
        MESSAGE(what);
        CHECK(what.find(key + ":fencing") != std::string::npos);
        CHECK(what.find("not a fencing counter") != std::string::npos);
    });
}

TEST_CASE("fencing tokens increase across a restart that lost the data (no persistence)")
{
    zktest::redis_server srv;  // persistence none: a restart forgets <key>:fencing
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_options fast;
        fast.reconnect_min = 20ms;
        fast.reconnect_max = 100ms;
        zkcoro::redis_client rc(ex, srv.url(), fast);
        auto key = unique_key("fence");
        zkcoro::redis_mutex m(rc, key, ttl(1000ms));
        std::int64_t last = 0;
        for (int round = 0; round < 3; ++round) {
            CAPTURE(round);
            auto g1 = co_await m.acquire(5s);
            REQUIRE(g1);
            CHECK(g1->fencing_token() > last);
            auto g2_token = g1->fencing_token();
            co_await g1->release();
            srv.kill9();
            srv.restart();
            CHECK(srv.command(cmd("EXISTS", key + ":fencing")) == "0");
            auto g2 = co_await m.acquire(5s);
            REQUIRE(g2);
            MESSAGE("token before the restart " << g2_token << ", after " << g2->fencing_token());
            CHECK(g2->fencing_token() > g2_token);
            last = g2->fencing_token();
            co_await g2->release();
        }
        // A counter above the clock (set by hand, or by a clock that went back) still wins.
        // (The token is the counter times 64 plus the in-process handoffs.)
        auto ahead = std::to_string(last / 64 + 1000000000000);
        srv.command(cmd("SET", key + ":fencing", ahead));
        auto g = co_await m.acquire(5s);
        REQUIRE(g);
        CHECK(g->fencing_token() > last);
        CHECK(srv.command(cmd("GET", key + ":fencing")) == std::to_string(std::stoll(ahead) + 1));
        co_await g->release();
    }, 60s);
}

TEST_CASE("a second release of a Redis guard fails as a ZooKeeper guard's does: empty_guard, saying so")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_client rc(ex, srv.url());
        zkcoro::redis_mutex m(rc, unique_key("twice"));
        auto g = co_await m.acquire(2s);
        REQUIRE(g);
        co_await g->release();
        auto [ec] = co_await g->async_release(asio::as_tuple(asio::use_awaitable));
        CHECK(ec == zkcoro::client_errc::empty_guard);
        CHECK(ec.message().find("released already") != std::string::npos);
    });
}

// Issue 21: classify() called every Redis error permanent, so a retry loop written against it
// gave up on a dropped connection or a failover's READONLY.
TEST_CASE("classify() knows Redis' codes: transient ones are retriable, a closed client or refused credentials end it")
{
    using zkcoro::error_kind;
    for (auto e : {redis_errc::connect_failed, redis_errc::connection_lost, redis_errc::read_only,
                   redis_errc::out_of_memory, redis_errc::no_sentinel, redis_errc::not_master,
                   redis_errc::not_replicated}) {
        CAPTURE(error_code(e).message());
        CHECK(zkcoro::classify(e) == error_kind::retriable);
    }
    for (auto e : {redis_errc::closed, redis_errc::auth_failed})
        CHECK(zkcoro::classify(e) == error_kind::session_lost);
    for (auto e : {redis_errc::bad_url, redis_errc::error_reply, redis_errc::wrong_type, redis_errc::bad_key,
                   redis_errc::bad_fencing_counter, redis_errc::unknown_master})
        CHECK(zkcoro::classify(e) == error_kind::permanent);
    CHECK(zkcoro::classify(zkcoro::redis_error_code("READONLY You can't write against a read only replica.")) ==
          error_kind::retriable);
}

// The holds of one lock share one renewal timer, left armed when a hold ends (issue 21): after
// many short holds (each wanting a later renewal than the timer is armed for), a long hold is
// still renewed past its TTL, and when its key is deleted behind its back the next renewal
// reports it lost, within the TTL.
TEST_CASE("after short holds, a long hold is renewed past its TTL and lost within the TTL once its key is deleted")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_client rc(ex, srv.url());
        const auto key = unique_key("renewal");
        zkcoro::redis_mutex m(rc, key, ttl(600ms));  // renewed every 200 ms
        for (int i = 0; i < 50; ++i) {
            auto g = co_await m.acquire(2s);
            REQUIRE(g);
            co_await g->release();
        }
        auto g = co_await m.acquire(2s);
        REQUIRE(g);
        co_await pause(1500ms);  // 2.5 TTLs
        CHECK_FALSE(g->lost());
        CHECK(srv.command(cmd("EXISTS", key)) == "1");
        CHECK(srv.command(cmd("DEL", key)) == "1");
        const auto deleted = std::chrono::steady_clock::now();
        auto [ec] = co_await g->async_wait_lost(asio::as_tuple(asio::use_awaitable));
        CHECK(ec == zkcoro::client_errc::lock_lost);
        CHECK(g->lost());
        CHECK(std::chrono::steady_clock::now() - deleted < 600ms);
        co_await g->release();
    });
}
