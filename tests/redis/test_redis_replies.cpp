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

// Issue 39: READONLY is transient (a failover demotes the master under us): an acquisition with
// time left tries again with backoff and fails with read_only and the server's text only at its
// deadline; the log says so once at warn level (a redis:// URL pointed at a replica by mistake
// waits, but not silently), then at debug level.
TEST_CASE("READONLY is waited through until the deadline (issue 39): read_only at the deadline, one warning")
{
    auto& master = shared_redis();
    zktest::redis_server replica({.extra_args = {"--replicaof", "127.0.0.1", std::to_string(master.port())}});
    asio::io_context ioc;
    std::vector<std::pair<zkcoro::log_level, std::string>> lines;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_options o;
        o.log = [&lines](zkcoro::log_level l, std::string_view m) { lines.emplace_back(l, std::string(m)); };
        zkcoro::redis_client rc(ex, replica.url(), o);
        zkcoro::redis_mutex m(rc, unique_key("replica-wait"));
        const auto t0 = std::chrono::steady_clock::now();
        auto [ec, g] = co_await m.async_acquire(1, 700ms, asio::as_tuple(asio::use_awaitable));
        const auto ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
        MESSAGE("read_only after " << ms << " ms");
        CHECK(ec == redis_errc::read_only);
        CHECK(ms >= 650);
        CHECK(ms < 2000);
    }, 20s);
    int warn = 0, retries = 0;
    for (const auto& [level, text] : lines) {
        if (text.find("trying again within the acquisition's deadline") == std::string::npos)
            continue;
        ++retries;
        if (level == zkcoro::log_level::warn) {
            ++warn;
            MESSAGE(text);
            CHECK(text.find("the server said: READONLY You can't write against a read only replica") != std::string::npos);
        }
    }
    CHECK(warn == 1);
    CHECK(retries >= 2);
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

// Issue 32: the server's refusals keep their text and their own code. An ACL user is made on the
// server with password "pw" and these rules (ACL SETUSER ... reset on >pw RULES); its URL.
namespace {

std::string acl_user(const zktest::redis_server& srv, const std::string& name, const std::vector<std::string>& rules)
{
    std::vector<std::string> args{"ACL", "SETUSER", name, "reset", "on", ">pw"};
    args.insert(args.end(), rules.begin(), rules.end());
    srv.command(args);
    return fmt::format("redis://{}:pw@127.0.0.1:{}", name, srv.port());
}

bool has(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("ACL: a user without EVAL, and one limited to other keys: no_permission (permanent), NOPERM's text")
{
    auto& srv = shared_redis();
    const auto noeval = acl_user(srv, "i32-noeval", {"~*", "&*", "+@all", "-eval", "-evalsha"});
    const auto otherkeys = acl_user(srv, "i32-otherkeys", {"~other:*", "&*", "+@all"});
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        for (const auto& [url, said] : {std::pair{noeval, "NOPERM this user has no permissions to run the 'eval"},
                                        std::pair{otherkeys, "NOPERM this user has no permissions to access one of "
                                                             "the keys"}}) {
            CAPTURE(url);
            zkcoro::redis_client rc(ex, url);
            auto key = unique_key("acl");
            auto ec = co_await acquire_code(rc, key);
            CHECK(ec == redis_errc::no_permission);
            CHECK(zkcoro::classify(ec) == zkcoro::error_kind::permanent);
            auto what = co_await refusal(rc, key);
            MESSAGE(what);
            CHECK(has(what, said));
            CHECK(has(what, "ACL"));
            CHECK(srv.command(cmd("EXISTS", key)) == "0");
        }
    });
}

TEST_CASE("min-replicas-to-write not met: no_replicas (retriable), NOREPLICAS' text; nothing written")
{
    zktest::redis_server srv({.extra_args = {"--min-replicas-to-write", "1"}});
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_client rc(ex, srv.url());
        auto key = unique_key("noreplicas");
        auto ec = co_await acquire_code(rc, key);
        CHECK(ec == redis_errc::no_replicas);
        CHECK(zkcoro::classify(ec) == zkcoro::error_kind::retriable);
        auto what = co_await refusal(rc, key);
        MESSAGE(what);
        CHECK(has(what, "NOREPLICAS Not enough good replicas to write"));
        CHECK(srv.command(cmd("EXISTS", key)) == "0");
    }, 20s);
}

// Item 7: WAIT refused is a permission refusal, not replicas too slow; the grant is given back.
TEST_CASE("replica_acks, an ACL user without WAIT: no_permission with WAIT's NOPERM, not not_replicated; key given back")
{
    auto& srv = shared_redis();
    const auto nowait = acl_user(srv, "i32-nowait", {"~*", "&*", "+@all", "-wait"});
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_options o;
        o.replica_acks = 1;
        zkcoro::redis_client rc(ex, nowait, o);
        auto key = unique_key("nowait");
        auto ec = co_await acquire_code(rc, key);
        CHECK(ec == redis_errc::no_permission);
        auto what = co_await refusal(rc, key);
        MESSAGE(what);
        CHECK(has(what, "NOPERM this user has no permissions to run the 'wait' command"));
        CHECK_FALSE(has(what, "replicas in time"));
        // The give-back went before the answer, on the same connection: a PING behind it.
        co_await rc.async_exec(cmd("PING"), asio::use_awaitable);
        CHECK(srv.command(cmd("EXISTS", key)) == "0");
    });
}

// Item 8: the key deleted, the PUBLISH refused: a release that succeeded, and a warning.
TEST_CASE("an ACL user without PUBLISH: the release deletes the key and succeeds; the refused PUBLISH is a warning")
{
    auto& srv = shared_redis();
    const auto nopub = acl_user(srv, "i32-nopub", {"~*", "&*", "+@all", "-publish"});
    asio::io_context ioc;
    std::vector<std::pair<zkcoro::log_level, std::string>> lines;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_options o;
        o.log = [&lines](zkcoro::log_level l, std::string_view m) { lines.emplace_back(l, std::string(m)); };
        zkcoro::redis_client rc(ex, nopub, o);
        auto key = unique_key("nopub");
        zkcoro::redis_mutex m(rc, key);
        auto g = co_await m.acquire(2s);
        REQUIRE(g);
        auto [ec] = co_await g->async_release(asio::as_tuple(asio::use_awaitable));
        CHECK_MESSAGE(!ec, ec.message());
        CHECK(srv.command(cmd("EXISTS", key)) == "0");
        CHECK(m.metrics().release_failures == 0);
        bool warned = false;
        for (const auto& [level, text] : lines) {
            MESSAGE(text);
            CHECK(level != zkcoro::log_level::error);
            if (level == zkcoro::log_level::warn && has(text, key) && has(text, "PUBLISH") &&
                has(text, "can't run this command"))
                warned = true;
        }
        CHECK(warned);
    });
}

// A sentinel answers PING but runs no script: its text says so, and the message names the
// redis+sentinel:// form.
TEST_CASE("redis:// pointed at a sentinel's port: the server's text and a pointer to redis+sentinel://")
{
    auto& master = shared_redis();
    zktest::redis_server sentinel(
        {.extra_args = {"--sentinel"},
         .config_text = fmt::format("sentinel monitor i32 127.0.0.1 {} 1\n", master.port())});
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_client rc(ex, sentinel.url());
        auto key = unique_key("sentinel-port");
        auto ec = co_await acquire_code(rc, key);
        CHECK(ec == redis_errc::error_reply);
        auto what = co_await refusal(rc, key);
        MESSAGE(what);
        CHECK(has(what, "ERR unknown command 'EVAL"));
        CHECK(has(what, "redis+sentinel://"));
    }, 20s);
}

TEST_CASE("classify() of the server's refusals: NOPERM permanent; NOREPLICAS, LOADING, MASTERDOWN retriable")
{
    using zkcoro::error_kind;
    using zkcoro::redis_error_code;
    CHECK(redis_error_code("NOPERM this user has no permissions to run the 'eval' command") ==
          redis_errc::no_permission);
    CHECK(redis_error_code("ERR The user executing the script can't run this command or subcommand script: 6a6e, on "
                           "@user_script:1.") == redis_errc::no_permission);
    CHECK(redis_error_code("ERR The user executing the script can't access at least one of the keys mentioned in "
                           "the command arguments") == redis_errc::no_permission);
    CHECK(redis_error_code("NOREPLICAS Not enough good replicas to write.") == redis_errc::no_replicas);
    CHECK(redis_error_code("LOADING Redis is loading the dataset in memory") == redis_errc::loading);
    CHECK(redis_error_code("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.") ==
          redis_errc::master_down);
    CHECK(redis_error_code("TRYAGAIN Multiple keys request during rehashing of slot") == redis_errc::try_again);
    CHECK(redis_error_code("CLUSTERDOWN Hash slot not served") == redis_errc::cluster_down);
    CHECK(redis_error_code("CLUSTERDOWN The cluster is down") == redis_errc::cluster_down);
    CHECK(redis_error_code("ERR unknown command 'eval'") == redis_errc::error_reply);
    CHECK(zkcoro::classify(redis_errc::no_permission) == error_kind::permanent);
    for (auto e : {redis_errc::no_replicas, redis_errc::loading, redis_errc::master_down, redis_errc::try_again,
                   redis_errc::cluster_down}) {
        CAPTURE(error_code(e).message());
        CHECK(zkcoro::classify(e) == error_kind::retriable);
    }
    for (auto e : {redis_errc::no_permission, redis_errc::no_replicas, redis_errc::loading, redis_errc::master_down,
                   redis_errc::try_again, redis_errc::cluster_down})
        CHECK_FALSE(has(error_code(e).message(), "unknown"));
}

// A holder whose user loses EVAL while it holds: its renewals are refused; the loss's log line
// says why (the server's NOPERM), not only that no renewal was confirmed.
TEST_CASE("renewals refused (NOPERM) after the grant: the guard is lost and the log line has the server's text")
{
    auto& srv = shared_redis();
    const auto user = acl_user(srv, "i32-revoked", {"~*", "&*", "+@all"});
    asio::io_context ioc;
    std::vector<std::string> lines;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_options o;
        o.log = [&lines](zkcoro::log_level, std::string_view m) { lines.emplace_back(m); };
        zkcoro::redis_client rc(ex, user, o);
        auto key = unique_key("revoked");
        zkcoro::redis_mutex m(rc, key, ttl(600ms));
        auto g = co_await m.acquire(2s);
        REQUIRE(g);
        srv.command(cmd("ACL", "SETUSER", "i32-revoked", "-eval", "-evalsha"));
        auto [ec] = co_await g->async_wait_lost(asio::as_tuple(asio::use_awaitable));
        CHECK(ec == zkcoro::client_errc::lock_lost);
        bool said = false;
        for (const auto& text : lines) {
            MESSAGE(text);
            if (has(text, key + " lost") && has(text, "NOPERM this user has no permissions to run the 'eval"))
                said = true;
        }
        CHECK(said);
        co_await g->async_release(asio::as_tuple(asio::use_awaitable));
    });
}
