// The Redis connection and lock against a real redis-server (started by the test on a free
// loopback port): commands, URLs and bad input, acquire/release/reentrancy/timeout/cancellation/
// try_acquire, the 100-task demo, expiry after a holder process is killed, the server killed
// with and without persistence, and a frozen holder stopped by fencing.
#include <zkcoro/multi_lock.hpp>
#include <zkcoro/redis_mutex.hpp>

#include "../integration/any_backend.hpp"
#include "../integration/common.hpp"
#include "../unit/slack.hpp"
#include "forked_holder.hpp"
#include "redis_test_util.hpp"

#include <fence_store.hpp>
#include <redis_server.hpp>
#include <tcp_proxy.hpp>

#include <boost/asio.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using zkcoro::error_code;
using zkcoro::redis_errc;

namespace {

using rt::cmd;
using rt::pause;
using rt::shared_redis;
using rt::unique_key;
using zktest::run_bounded;

// Waits (at most `limit`, asking every 5 ms) until someone is subscribed to `channel`: a waiter
// that waits for a release's notification.
asio::awaitable<bool> wait_subscribed(zktest::redis_server& srv, const std::string& channel,
                                      std::chrono::milliseconds limit = 5000ms)
{
    const auto until = std::chrono::steady_clock::now() + limit;
    do {
        // "CHANNEL\nCOUNT"
        const auto r = srv.command({"PUBSUB", "NUMSUB", channel});
        if (std::atoi(r.c_str() + r.rfind('\n') + 1) > 0)
            co_return true;
        co_await pause(5ms);
    } while (std::chrono::steady_clock::now() < until);
    FAIL_CHECK("nobody subscribed to " << channel << " within " << limit.count() << " ms");
    co_return false;
}

// Calls per command so far (INFO commandstats: "cmdstat_evalsha" -> "calls=3,usec=...").
std::map<std::string, std::int64_t> command_counts(const zktest::redis_server& srv)
{
    std::map<std::string, std::int64_t> out;
    for (const auto& [field, value] : srv.info("commandstats"))
        if (field.starts_with("cmdstat_") && value.starts_with("calls="))
            out[field.substr(8)] = std::atoll(value.c_str() + 6);
    return out;
}

zkcoro::redis_options quick_connect()
{
    zkcoro::redis_options o;
    o.connect_timeout = 2000ms;
    return o;
}

zkcoro::redis_options fast_reconnect()
{
    zkcoro::redis_options o;
    o.reconnect_min = 20ms;
    o.reconnect_max = 100ms;
    return o;
}

zkcoro::redis_mutex_options short_ttl(std::chrono::milliseconds ttl = 600ms)
{
    zkcoro::redis_mutex_options o;
    o.ttl = ttl;
    return o;
}

}  // namespace

TEST_CASE("redis URLs are parsed and checked, with the reason")
{
    error_code ec;
    std::string why;
    auto u = zkcoro::parse_redis_url("redis://secret@127.0.0.1:6380/3", ec, &why);
    CHECK_FALSE(ec);
    CHECK(u.host == "127.0.0.1");
    CHECK(u.port == 6380);
    CHECK(u.password == "secret");
    CHECK(u.db == 3);
    u = zkcoro::parse_redis_url("redis://:pw@[::1]:7000", ec, &why);
    CHECK_FALSE(ec);
    CHECK(u.host == "::1");
    CHECK(u.password == "pw");
    u = zkcoro::parse_redis_url("redis://localhost", ec, &why);
    CHECK_FALSE(ec);
    CHECK(u.port == 6379);
    // Issue 32 item 13: a database above 15 is the server's to refuse (its `databases` setting).
    u = zkcoro::parse_redis_url("redis://localhost/16", ec, &why);
    CHECK_FALSE(ec);
    CHECK(u.db == 16);
    u = zkcoro::parse_redis_url("redis+sentinel://localhost/m/2147483647", ec, &why);
    CHECK_FALSE(ec);
    CHECK(u.db == 2147483647);
    why.clear();
    zkcoro::parse_redis_url("redis://localhost/2147483648", ec, &why);
    CHECK(ec == redis_errc::bad_url);
    CHECK(why.find("the database '2147483648' is not a whole number from 0 to 2147483647") != std::string::npos);
    u = zkcoro::parse_redis_url("redis://user:pw@127.0.0.1:6379", ec, &why);  // an ACL user (issue 22)
    CHECK_FALSE(ec);
    CHECK(u.user == "user");
    CHECK(u.password == "pw");
    for (const char* bad : {"http://127.0.0.1:6379", "redis://", "redis://127.0.0.1:0", "redis://127.0.0.1:70000",
                            "redis://127.0.0.1:12ab", "redis://127.0.0.1:6379/-1", "redis://@127.0.0.1:6379",
                            "redis://[::1:6379", "redis://127.0.0.1:6379/x"}) {
        CAPTURE(bad);
        why.clear();
        zkcoro::parse_redis_url(bad, ec, &why);
        CHECK(ec == redis_errc::bad_url);
        CHECK(why.find(bad) != std::string::npos);
    }
}

TEST_CASE("commands run on a connection driven by the executor; bad servers give clear errors")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_client rc(ex, srv.url());
        co_await rc.async_connect();
        CHECK(rc.state() == zkcoro::redis_state::connected);
        auto key = unique_key("cmd");
        auto r = co_await rc.async_exec(cmd("SET", key, std::string("a\0b", 3)));
        CHECK(r.str == "OK");
        r = co_await rc.async_exec(cmd("GET", key));
        CHECK(r.str == std::string("a\0b", 3));
        auto [ec, er] = co_await rc.async_exec(cmd("NOSUCHCOMMAND"), asio::as_tuple(asio::use_awaitable));
        CHECK(ec == redis_errc::error_reply);
        CHECK(er.str.find("unknown command") != std::string::npos);
        co_await rc.async_exec(cmd("DEL", key));

        // A refused connection (a port nobody listens on: bound, never listening).
        asio::ip::tcp::acceptor closed(ex, {asio::ip::make_address("127.0.0.1"), 0});
        auto closed_port = closed.local_endpoint().port();
        closed.close();
        zkcoro::redis_client nobody(ex, fmt::format("redis://127.0.0.1:{}", closed_port), quick_connect());
        auto [cec] = co_await nobody.async_connect(asio::as_tuple(asio::use_awaitable));
        CHECK(cec == redis_errc::connect_failed);
        CHECK(nobody.state() == zkcoro::redis_state::closed);
        CHECK(nobody.last_error().find(std::to_string(closed_port)) != std::string::npos);
        auto [xec, xr] = co_await nobody.async_exec(cmd("PING"), asio::as_tuple(asio::use_awaitable));
        CHECK(xec == redis_errc::connect_failed);

        // A peer that is not Redis: it answers like a web server.
        asio::ip::tcp::acceptor web(ex, {asio::ip::make_address("127.0.0.1"), 0});
        auto web_port = web.local_endpoint().port();
        asio::co_spawn(ex, [&web]() -> asio::awaitable<void> {
            auto sock = co_await web.async_accept(asio::use_awaitable);
            char buf[256];
            co_await sock.async_read_some(asio::buffer(buf), asio::use_awaitable);
            co_await asio::async_write(sock, asio::buffer(std::string_view("HTTP/1.1 400 Bad Request\r\n\r\n")),
                                       asio::use_awaitable);
            co_await pause(200ms);
        }, asio::detached);
        zkcoro::redis_client http(ex, fmt::format("redis://127.0.0.1:{}", web_port), quick_connect());
        auto [hec] = co_await http.async_connect(asio::as_tuple(asio::use_awaitable));
        CHECK(hec == redis_errc::not_redis);
        MESSAGE("not Redis: " << http.last_error());

        // A bad URL: every operation says so.
        zkcoro::redis_client bad(ex, "redis://127.0.0.1:99999");
        auto [bec] = co_await bad.async_connect(asio::as_tuple(asio::use_awaitable));
        CHECK(bec == redis_errc::bad_url);
        CHECK(bad.last_error().find("65535") != std::string::npos);
    });
}

TEST_CASE("a wrong or missing password is refused with auth_failed")
{
    zktest::redis_server srv({.password = "right-one"});
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_client wrong(ex, fmt::format("redis://wrong@127.0.0.1:{}", srv.port()));
        auto [ec] = co_await wrong.async_connect(asio::as_tuple(asio::use_awaitable));
        CHECK(ec == redis_errc::auth_failed);
        CHECK(wrong.last_error().find("AUTH") != std::string::npos);
        zkcoro::redis_client none(ex, fmt::format("redis://127.0.0.1:{}", srv.port()));
        auto [ec2] = co_await none.async_connect(asio::as_tuple(asio::use_awaitable));
        CHECK(ec2 == redis_errc::auth_failed);
        zkcoro::redis_client right(ex, srv.url());
        co_await right.async_connect();
        zkcoro::redis_mutex m(right, unique_key("pw"));
        auto g = co_await m.acquire(1s);
        CHECK(g.has_value());
    });
}

TEST_CASE("acquire, reentrancy, try_acquire, timeout and release; fencing tokens increase")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_client a(ex, srv.url()), b(ex, srv.url());
        auto key = unique_key("basic");
        zkcoro::redis_mutex ma(a, key, short_ttl()), mb(b, key, short_ttl());
        auto g1 = co_await ma.acquire(2s);
        REQUIRE(g1);
        CHECK(g1->node_path() == key);
        auto g2 = co_await ma.acquire(2s);  // the same task: reentrant, the same lease
        REQUIRE(g2);
        CHECK(g2->fencing_token() == g1->fencing_token());
        auto me = co_await zkcoro::this_task::id();
        CHECK(ma.hold_count(me) == 2);
        CHECK_FALSE(co_await mb.try_acquire());
        auto t0 = std::chrono::steady_clock::now();
        CHECK_FALSE(co_await mb.acquire(300ms));
        CHECK(std::chrono::steady_clock::now() - t0 >= 300ms);
        // Held past several TTLs: the renewal keeps it.
        co_await pause(1500ms);
        CHECK_FALSE(g1->lost());
        CHECK(srv.command(cmd("EXISTS", key)) == "1");
        co_await g2->release();
        CHECK(srv.command(cmd("EXISTS", key)) == "1");
        auto first = g1->fencing_token();
        co_await g1->release();
        CHECK(srv.command(cmd("EXISTS", key)) == "0");
        auto g3 = co_await mb.try_acquire();
        REQUIRE(g3);
        CHECK(g3->fencing_token() > first);
        co_await g3->release();
        CHECK(srv.command(cmd("EXISTS", key)) == "0");
    });
}

// What this asserts, precisely: a waiter behind a holder that publishes its release (a zkcoro
// holder: the release script PUBLISHes on KEY:released) is woken by that notification.
// 1. Quiet while waiting: once the waiter is subscribed (PUBSUB NUMSUB, polled by the test), the
//    server receives at most `protocol_commands` = 1 command from the clients in the next second
//    (the waiter's one attempt right after subscribing, when it lands late): no polling loop.
//    Counted by the clients (redis_client::commands_sent), not by the server: INFO commandstats
//    also counts the calls a script makes, so the one late attempt, an EVALSHA whose script calls
//    GET twice and PTTL, counted 4 there (the ASan build on a loaded machine, where the attempt
//    landed after the test saw the subscription). What the server ran is shown on a failure. The
//    case has a server of its own with a password, so that no client of another test program
//    (one that dials a port this server was given) is listed there.
//    A waiter that also retried on a timer would need this limit raised to the number of retries
//    its backoff allows in that second (issue 20 plans such a retry for holders that publish
//    nothing); the limit is explicit so that such a change is a decision, not an accident.
// 2. Prompt: in 10 rounds, released 7 ms later each round after the waiter subscribed (round 0
//    after the 1 s of 1.), the waiter is granted within 15 ms of the release in at least 8 of
//    them. The notification takes well under 3 ms here. A waiter that only finds out by retrying
//    every P ms meets the releases at spread phases of its period: with retries timed from the
//    subscription it passes 0 rounds for P = 100 ms, 2 for 50 ms, 6 for 20 ms (seen with a
//    100 ms poll: 37-98 ms); one retrying faster fails 1. instead. The bound is not relaxed
//    under the sanitizers: relaxed, it would no longer tell a notification from a retry on a
//    50-100 ms backoff.
TEST_CASE("a waiter is woken by the release's notification, not by polling; cancellation leaves nothing")
{
    zktest::redis_server srv({.password = fmt::format("notify-{}", ::getpid())});
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_client a(ex, srv.url()), b(ex, srv.url());
        auto key = unique_key("notify");
        zkcoro::redis_mutex ma(a, key, short_ttl(10000ms)), mb(b, key, short_ttl(10000ms));
        std::vector<std::chrono::microseconds> latencies;
        for (int round = 0; round < 10; ++round) {
            CAPTURE(round);
            auto g = co_await ma.acquire();
            std::optional<zkcoro::guard> got;
            std::optional<std::chrono::steady_clock::time_point> granted;
            asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
                got = co_await mb.acquire(8s);
                granted = std::chrono::steady_clock::now();
            }, asio::detached);
            REQUIRE(co_await wait_subscribed(srv, key + ":released"));
            if (round == 0) {
                constexpr std::uint64_t protocol_commands = 1;  // see 1. above
                const auto before = command_counts(srv);
                const auto sent_before = a.commands_sent() + b.commands_sent();
                co_await pause(1000ms);
                const auto sent = a.commands_sent() + b.commands_sent() - sent_before;
                std::string which;
                for (const auto& [name, calls] : command_counts(srv)) {
                    // Less the test's own: the second query's AUTH and INFO.
                    const auto n = calls - (before.contains(name) ? before.at(name) : 0) - (name == "auth" ? 1 : 0);
                    if (n != 0 && name != "info")
                        which += fmt::format(" {} x{}", name, n);
                }
                CHECK_MESSAGE(sent <= protocol_commands, "the clients sent " << sent << " command(s) in 1 s of waiting; "
                                                                             << "the server ran (script calls included):"
                                                                             << which << "; connections:\n"
                                                                             << srv.command(cmd("CLIENT", "LIST")));
            } else {
                co_await pause(std::chrono::milliseconds(7 * round));  // the release at a different point each round
            }
            auto t0 = std::chrono::steady_clock::now();
            co_await g.release();
            for (int i = 0; i < 400 && !granted; ++i)
                co_await pause(5ms);
            REQUIRE_MESSAGE(granted, "the waiter was not granted within 2 s of the release");
            REQUIRE(got);
            latencies.push_back(std::chrono::duration_cast<std::chrono::microseconds>(*granted - t0));
            co_await got->release();
        }
        auto sorted = latencies;
        std::sort(sorted.begin(), sorted.end());
        std::string shown;
        for (auto l : latencies)
            shown += fmt::format(" {:.1f}", static_cast<double>(l.count()) / 1000.0);
        MESSAGE("release -> grant, ms:" << shown);
        CHECK_MESSAGE(sorted[7] < 15ms, "fewer than 8 of 10 grants within 15 ms of the release (ms:" << shown << ")");

        // Cancellation of a waiting acquisition: operation_aborted, the holder keeps the key.
        auto h = co_await ma.acquire();
        asio::cancellation_signal sig;
        error_code cec;
        bool cdone = false;
        auto me = co_await zkcoro::this_task::id();
        mb.async_acquire(me, 5s, asio::bind_cancellation_slot(sig.slot(), [&](error_code e, std::optional<zkcoro::guard>) {
            cec = e;
            cdone = true;
        }));
        REQUIRE(co_await wait_subscribed(srv, key + ":released"));  // it waits
        sig.emit(asio::cancellation_type::terminal);
        for (int i = 0; i < 100 && !cdone; ++i)
            co_await pause(5ms);
        CHECK(cdone);
        CHECK(cec == asio::error::operation_aborted);
        CHECK_FALSE(h.lost());
        co_await h.release();
        CHECK(srv.command(cmd("EXISTS", key)) == "0");
    });
}

// Runs a PING on `rc` until one is answered (at most 50 tries): every command sent on the
// connection before it has run by then. A PING may fail with connection_lost when the client
// drops its connection meanwhile.
asio::awaitable<bool> ping_through(zkcoro::redis_client& rc)
{
    for (int i = 0; i < 50; ++i) {
        auto [ec, r] = co_await rc.async_exec(cmd("PING"), asio::as_tuple(asio::use_awaitable));
        if (!ec)
            co_return true;
        co_await pause(20ms);
    }
    co_return false;
}

// Waits (at most 2 s, asking every millisecond) until `rc` has sent more than `n` commands: the
// test's only sign that a command has left the client.
asio::awaitable<bool> sent_more_than(const zkcoro::redis_client& rc, std::uint64_t n)
{
    for (int i = 0; i < 2000 && rc.commands_sent() <= n; ++i)
        co_await pause(1ms);
    co_return rc.commands_sent() > n;
}

// The script cache emptied (SCRIPT FLUSH) under a connection: an acquisition whose script the
// server no longer knows (NOSCRIPT) must not run after the take-back its cancellation sent, or
// the key would stay held, by nobody, until its TTL. Deterministic: the server is stopped
// (SIGSTOP) while the acquisition and its take-back are written, so both are pipelined. With
// `acks` replicas to confirm the grant (WAIT), and without; with a timeout (the acquisition runs
// as a coroutine) and without (its first attempt is a callback).
void flush_under_cancelled_acquisition(zktest::redis_server& srv, int acks, std::chrono::steady_clock::duration timeout)
{
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        auto o = fast_reconnect();
        o.replica_acks = acks;
        // This test is about the script cache, not the replica's speed: a loaded machine has
        // taken longer than the default 500 ms to acknowledge the first write after linking.
        o.replica_ack_timeout = 5000ms;
        zkcoro::redis_client rc(ex, srv.url(), o);
        const auto held_key = unique_key("flush-held"), key = unique_key("flush");
        zkcoro::redis_mutex held(rc, held_key, short_ttl(10000ms)), m(rc, key, short_ttl(10000ms));
        auto h = co_await held.acquire(10s);
        REQUIRE(h);
        REQUIRE(srv.command(cmd("SCRIPT", "FLUSH")) == "OK");
        // The release runs its script after the flush: the server knows that one again (as when
        // another process releases a lock), not the acquisition's.
        co_await h->release();
        CHECK(srv.command(cmd("EXISTS", held_key)) == "0");

        srv.pause();
        const auto before = rc.commands_sent();
        asio::cancellation_signal sig;
        bool done = false;
        error_code aec;
        auto me = co_await zkcoro::this_task::id();
        m.async_acquire(me, timeout, asio::bind_cancellation_slot(sig.slot(), [&](error_code e, std::optional<zkcoro::guard> g) {
            aec = e;
            done = true;
            CHECK_FALSE(g);
        }));
        const bool sent = co_await sent_more_than(rc, before);
        CHECK(sent);
        const auto after_attempt = rc.commands_sent();
        sig.emit(asio::cancellation_type::terminal);
        for (int i = 0; i < 400 && !done; ++i)
            co_await pause(5ms);
        CHECK(done);
        CHECK(aec == asio::error::operation_aborted);
        const bool took_back = co_await sent_more_than(rc, after_attempt);  // the take-back
        CHECK(took_back);
        srv.resume();
        // Three times: a command sent when an answer came runs before the next PING's answer (the
        // WAIT after a grant is sent from the grant's reply).
        for (int i = 0; i < 3; ++i)
            REQUIRE(co_await ping_through(rc));
        CHECK_MESSAGE(srv.command(cmd("EXISTS", key)) == "0", "a cancelled acquisition left " << key << " held");

        // Locks still work after the flush, on this client and on a new connection.
        auto g = co_await m.try_acquire();
        REQUIRE(g);
        co_await g->release();
        zkcoro::redis_client other(ex, srv.url(), o);
        zkcoro::redis_mutex m2(other, key, short_ttl(10000ms));
        auto g2 = co_await m2.try_acquire();
        CHECK(g2);
        if (g2)
            co_await g2->release();
        CHECK(srv.command(cmd("EXISTS", key)) == "0");
    });
}

TEST_CASE("a SCRIPT FLUSH under a cancelled acquisition leaves no key behind, and locks still work")
{
    zktest::redis_server srv;
    flush_under_cancelled_acquisition(srv, 0, 5s);
    flush_under_cancelled_acquisition(srv, 0, std::chrono::steady_clock::duration::max());
}

TEST_CASE("a SCRIPT FLUSH under a cancelled acquisition confirmed by a replica (WAIT) leaves no key behind")
{
    zktest::redis_server srv;
    zktest::redis_server replica({.extra_args = {"--replicaof", "127.0.0.1", std::to_string(srv.port())}});
    // The replica's first sync (a fork and an RDB transfer) took over 5 s on a loaded machine
    // (three copies of this test at once, beside builds): up to 30 s.
    bool linked = false;
    for (int i = 0; i < 1200 && !linked; ++i) {
        linked = srv.info("replication")["slave0"].find("state=online") != std::string::npos;
        if (!linked)
            std::this_thread::sleep_for(25ms);
    }
    INFO("the replica did not report state=online to its master within 30 s");
    REQUIRE(linked);
    flush_under_cancelled_acquisition(srv, 1, 5s);
    flush_under_cancelled_acquisition(srv, 1, std::chrono::steady_clock::duration::max());
}

// SCRIPT FLUSH again and again while tasks acquire and release: every cycle completes (the
// commands a flush makes fail are tried again), and no key is left behind.
TEST_CASE("acquisitions pipelined across repeated SCRIPT FLUSHes all complete and leave no key")
{
    zktest::redis_server srv;
    asio::io_context ioc;
    std::atomic<bool> stop{false};
    std::atomic<int> flushes{0};
    std::thread flusher([&] {
        for (int i = 0; i < 200 && !stop; ++i) {
            srv.command(cmd("SCRIPT", "FLUSH"));
            ++flushes;
            std::this_thread::sleep_for(3ms);  // pacing, not synchronisation
        }
    });
    int cycles = 0;
    const std::string prefix = unique_key("flushes");
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_client rc(ex, srv.url(), fast_reconnect());
        std::vector<std::unique_ptr<zkcoro::redis_mutex>> locks;
        for (int t = 0; t < 20; ++t)
            locks.push_back(std::make_unique<zkcoro::redis_mutex>(rc, fmt::format("{}:{}", prefix, t), short_ttl(10000ms)));
        int running = 0;
        rt::event all_done(ex);
        for (int t = 0; t < 20; ++t) {
            ++running;
            asio::co_spawn(ex, [&, t]() -> asio::awaitable<void> {
                for (int i = 0; i < 25; ++i) {
                    auto g = co_await locks[static_cast<std::size_t>(t)]->acquire(5s);
                    if (!g)
                        break;
                    ++cycles;
                    co_await g->release();
                }
                if (--running == 0)
                    all_done.fire();
            }, asio::detached);
        }
        CHECK(co_await all_done.wait(25s));
        stop = true;
        MESSAGE(rc.connects() << " connection(s): one more per NOSCRIPT met");
    }, 30s);
    stop = true;
    flusher.join();
    MESSAGE(cycles << " cycles, " << flushes.load() << " flushes");
    CHECK(cycles == 20 * 25);
    for (int t = 0; t < 20; ++t)
        CHECK(srv.command(cmd("EXISTS", fmt::format("{}:{}", prefix, t))) == "0");
}

// A new redis-server on the same port (restarted, empty script cache): the client reconnects and
// its acquisitions succeed.
TEST_CASE("after a redis-server restart, acquisitions succeed on the new server")
{
    zktest::redis_server srv;
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_client rc(ex, srv.url(), fast_reconnect());
        zkcoro::redis_mutex m(rc, unique_key("restart"), short_ttl(2000ms));
        auto g = co_await m.acquire(2s);
        REQUIRE(g);
        co_await g->release();
        srv.restart();
        for (int i = 0; i < 3; ++i) {
            auto g2 = co_await m.acquire(5s);
            REQUIRE(g2);
            CHECK(srv.command(cmd("EXISTS", m.key())) == "1");
            co_await g2->release();
            CHECK(srv.command(cmd("EXISTS", m.key())) == "0");
        }
    });
}

// The public lock surface is basic_mutex: redis_mutex is one (not an alias), as zkcoro::mutex is.
static_assert(std::is_base_of_v<zkcoro::basic_mutex<zkcoro::redis_lock_backend>, zkcoro::redis_mutex>);
static_assert(!std::is_same_v<zkcoro::basic_mutex<zkcoro::redis_lock_backend>, zkcoro::redis_mutex>);
static_assert(std::is_convertible_v<zkcoro::redis_mutex&, zkcoro::basic_mutex<zkcoro::redis_lock_backend>&>);
static_assert(std::is_same_v<zkcoro::redis_mutex::client_type, zkcoro::redis_client>);

// The function template over basic_mutex<Backend>& that tests/integration/test_mutex.cpp runs on
// ZooKeeper mutexes, here on a Redis key.
TEST_CASE("the common lock surface: a function template over basic_mutex<Backend>&")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_client a(ex, srv.url()), b(ex, srv.url());
        auto key = unique_key("surface");
        zkcoro::redis_mutex ma(a, key), mb(b, key);
        co_await zktest::exercise_lock(ma, mb);
        CHECK(srv.command(cmd("EXISTS", key)) == "0");
    });
}

TEST_CASE("a multi_lock takes Redis keys all or nothing; participants name the holder")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_client a(ex, srv.url()), b(ex, srv.url());
        auto k1 = unique_key("multi"), k2 = unique_key("multi");
        zkcoro::redis_mutex a1(a, k1), a2(a, k2), b2(b, k2);
        std::vector<zkcoro::lock_ref> refs{zkcoro::lock_ref(a1), zkcoro::lock_ref(a2)};
        zkcoro::multi_lock both(std::move(refs));
        auto all = co_await both.acquire(2s);
        REQUIRE(all);
        CHECK(all->guards().size() == 2);
        auto who = co_await b2.async_participants();
        REQUIRE(who.size() == 1);
        CHECK(who[0].holds);
        CHECK(who[0].data == srv.command(cmd("GET", k2)));
        co_await all->release();
        CHECK((co_await b2.async_participants()).empty());
        // k2 held elsewhere: the multi-lock times out and keeps nothing (k1 is given back).
        auto other = co_await b2.acquire(1s);
        REQUIRE(other);
        auto none = co_await both.acquire(300ms);
        CHECK_FALSE(none);
        CHECK(srv.command(cmd("EXISTS", k1)) == "0");
        co_await other->release();
    });
}

// A key with RESP's own bytes in it ("$99999", CR LF) is a key like any other. The waiter's
// SUBSCRIBE is written where its attempt's command was, and ends inside that command's key:
// hiredis reads a SUBSCRIBE's channels up to a NUL, past the length it is given, so without a
// NUL after our command it read "$99999" as one more channel, 99999 bytes long, past the buffer
// (AddressSanitizer in the sanitizer build).
TEST_CASE("a key with RESP's bytes in it ($, CR LF) is locked, waited for and released like any other")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_client a(ex, srv.url()), b(ex, srv.url());
        // b's scripts loaded first: its attempt below goes as EVALSHA, its key near the start.
        {
            zkcoro::redis_mutex warm(b, unique_key("warm"), short_ttl(10000ms));
            auto g = co_await warm.acquire(5s);
            REQUIRE(g);
            co_await g->release();
        }
        const auto key = unique_key(std::string(30, 'x') + "$99999\r\n" + std::string(12, 'y'));
        zkcoro::redis_mutex ma(a, key, short_ttl(10000ms)), mb(b, key, short_ttl(10000ms));
        auto g = co_await ma.acquire(5s);
        REQUIRE(g);
        std::optional<zkcoro::guard> got;
        rt::event done(ex);
        asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
            got = co_await mb.acquire(8s);
            done.fire();
        }, asio::detached);
        REQUIRE(co_await wait_subscribed(srv, key + ":released"));
        CHECK(srv.command(cmd("GET", key)).find(':') != std::string::npos);
        co_await g->release();
        INFO("the waiter was not granted within 8 s of the release");
        REQUIRE(co_await done.wait(8s));
        REQUIRE(got);
        CHECK(got->fencing_token() > g->fencing_token());
        co_await got->release();
        CHECK(srv.command(cmd("EXISTS", key)) == "0");
    });
}

TEST_CASE("bad keys and TTLs are refused before anything is sent")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_client a(ex, srv.url());
        co_await a.async_connect();
        auto keys_before = srv.command(cmd("DBSIZE"));
        auto me = co_await zkcoro::this_task::id();
        std::vector<std::string> bad_keys{std::string(), std::string(1025, 'k')};
        for (const auto& key : bad_keys) {
            zkcoro::redis_mutex m(a, key);
            auto [ec, g] = co_await m.async_acquire(me, 1s, asio::as_tuple(asio::use_awaitable));
            CHECK(ec == redis_errc::bad_key);
            CHECK_FALSE(g);
        }
        std::vector<std::chrono::milliseconds> bad_ttls{10ms, 25h};
        for (auto ttl : bad_ttls) {
            zkcoro::redis_mutex m(a, unique_key("ttl"), short_ttl(ttl));
            auto [ec, g] = co_await m.async_acquire(me, 1s, asio::as_tuple(asio::use_awaitable));
            CHECK(ec == redis_errc::bad_ttl);
        }
        CHECK(srv.command(cmd("DBSIZE")) == keys_before);
        // The throwing form names the key.
        zkcoro::redis_mutex empty(a, "");
        CHECK_THROWS_WITH_AS(co_await empty.acquire(), doctest::Contains("redis lock"), boost::system::system_error);
    });
}

TEST_CASE("demo: 100 tasks of one process on one key count a shared counter down 100 -> 1")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_client rc(ex, srv.url());
        zkcoro::redis_mutex m(rc, unique_key("demo"));
        int counter = 100, inside = 0, overlaps = 0, finished = 0;
        std::vector<int> seen;
        for (int i = 0; i < 100; ++i)
            asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
                auto g = co_await m.acquire(20s);
                if (!g)
                    co_return;
                if (++inside != 1)
                    ++overlaps;
                seen.push_back(counter);
                co_await asio::post(asio::use_awaitable);  // yield inside the critical section
                --counter;
                --inside;
                co_await g->release();
                ++finished;
            }, asio::detached);
        for (int i = 0; i < 2000 && finished < 100; ++i)
            co_await pause(5ms);
        CHECK(finished == 100);
        CHECK(overlaps == 0);
        CHECK(counter == 0);
        REQUIRE(seen.size() == 100);
        for (int i = 0; i < 100; ++i)
            CHECK(seen[static_cast<std::size_t>(i)] == 100 - i);
        CHECK(m.local_handoffs() > 0);
    }, 60s);
}

// A value is "<process name>:<task>:<n>". A child forked after its parent wrote values draws a
// name of its own: with its parent's, the same task number and count give the same value, and
// either's compare-and-delete would remove the other's key.
TEST_CASE("a forked child's values carry a process name of its own")
{
    auto& srv = shared_redis();
    auto name_of = [](const std::string& value) { return value.substr(0, value.find(':')); };
    std::string ours;
    {
        asio::io_context ioc;
        run_bounded(ioc, [&]() -> asio::awaitable<void> {
            zkcoro::redis_client rc(co_await asio::this_coro::executor, srv.url());
            zkcoro::redis_mutex m(rc, unique_key("named"));
            auto g = co_await m.acquire(5s);
            REQUIRE(g);
            ours = name_of(srv.command(cmd("GET", m.key())));
            co_await g->release();
        });
    }
    REQUIRE(ours.size() == 36);
    auto key = unique_key("named");
    zktest::child_holder child(srv.url(), key, 10s);
    child.read_token();
    auto theirs = name_of(srv.command(cmd("GET", key)));
    CHECK(theirs.size() == 36);
    CHECK(theirs != ours);
    child.go();
    child.reap();
}

TEST_CASE("a holder killed with SIGKILL frees the key after its TTL; the waiter gets it without polling")
{
    auto& srv = shared_redis();
    auto key = unique_key("crash");
    const auto ttl = 1000ms;
    zktest::child_holder child(srv.url(), key, ttl);
    auto crashed_token = child.read_token();
    ::kill(child.pid(), SIGKILL);
    child.reap();
    auto killed_at = std::chrono::steady_clock::now();
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        zkcoro::redis_client rc(co_await asio::this_coro::executor, srv.url());
        co_await rc.async_connect();
        zkcoro::redis_mutex m(rc, key, short_ttl(ttl));
        auto attempts = [&] { return srv.command_calls("evalsha") + srv.command_calls("eval"); };
        auto before = attempts();
        auto g = co_await m.acquire(5s);
        auto took = std::chrono::steady_clock::now() - killed_at;
        auto tries = attempts() - before;
        REQUIRE(g);
        CHECK(g->fencing_token() > crashed_token);
        MESSAGE("got the crashed holder's key after "
                << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms (TTL 1000 ms), in "
                << tries << " attempts");
        CHECK(took <= ttl + zktest::relaxed(300ms));  // relaxed under the sanitizers (slack.hpp)
        // An attempt, one after subscribing, one when the TTL runs out (and one more should the
        // key outlive its TTL by a millisecond): no polling loop.
        CHECK(tries <= 4);
        co_await g->release();
    });
}

TEST_CASE("the server killed while a lock is held: without persistence the lease is lost, never later than the TTL")
{
    zktest::redis_server srv;
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_client rc(ex, srv.url(), fast_reconnect());
        const auto ttl = 900ms;
        zkcoro::redis_mutex m(rc, unique_key("gone"), short_ttl(ttl));
        auto g = co_await m.acquire(2s);
        REQUIRE(g);
        srv.kill9();
        auto killed = std::chrono::steady_clock::now();
        srv.restart();  // empty: the lock is forgotten
        using namespace asio::experimental::awaitable_operators;
        asio::steady_timer limit(ex, killed + ttl + 200ms);
        auto r = co_await (g->async_wait_lost(asio::as_tuple(asio::use_awaitable)) ||
                           limit.async_wait(asio::as_tuple(asio::use_awaitable)));
        CHECK(r.index() == 0);
        CHECK(g->lost());
        MESSAGE("lost " << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - killed).count()
                        << " ms after the kill (TTL 900 ms)");
        co_await g->release();  // a no-op on a lost guard
    });
}

// The simulation found it (tests/sim/README.md, the Redis bugs): a grant whose reply came after
// the hold's own loss bound (sent + TTL - safety margin) was handed to the caller as held, while
// the key could have expired on the way and another process could hold it with a higher token.
TEST_CASE("a grant whose reply comes later than the TTL less the safety margin is not handed on as held")
{
    auto& srv = shared_redis();
    zktest::tcp_proxy proxy("127.0.0.1", srv.port());
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        auto opts = fast_reconnect();
        std::vector<std::pair<zkcoro::log_level, std::string>> lines;
        opts.log = [&](zkcoro::log_level l, std::string_view text) {
            if (text.find("granted, but the reply came") != std::string_view::npos)
                lines.emplace_back(l, text);
        };
        zkcoro::redis_client rc(ex, "redis://" + proxy.address(), opts);
        co_await rc.async_exec(cmd("PING"));  // connected (and the handshake done) before any delay
        const auto key = unique_key("late");
        // TTL 600 ms, safety margin 120 ms (a fifth): a grant is sure until 480 ms after its request.
        zkcoro::redis_mutex m(rc, key, short_ttl(600ms));

        // 100 ms each way: the reply comes 200 ms after the request, in time.
        proxy.set_delay(100ms);
        auto g = co_await m.acquire(3s);
        REQUIRE(g);
        CHECK_FALSE(g->lost());
        co_await g->release();

        // 300 ms each way: every grant's reply comes 600 ms after its request. None is handed on;
        // the acquisition ends at its deadline, and the key it set goes with it.
        proxy.set_delay(300ms);
        const auto t0 = std::chrono::steady_clock::now();
        auto late = co_await m.acquire(2s);
        const auto took = std::chrono::steady_clock::now() - t0;
        const std::string state = late && late->lost() ? " (already lost)" : "";
        CHECK_MESSAGE(!late, "a guard was handed on from a reply later than the hold's loss bound" << state);
        CHECK(took >= 2s);
        // Said once as a warning, then as debug lines (a grant every 600 ms until the deadline).
        REQUIRE(lines.size() >= 2);
        CHECK(lines[0].first == zkcoro::log_level::warn);
        CHECK(std::all_of(lines.begin() + 1, lines.end(), [](const auto& l) { return l.first == zkcoro::log_level::debug; }));
        MESSAGE(lines[0].second);
        if (late)
            co_await late->release();
        proxy.set_delay(0ms);
        const auto until = std::chrono::steady_clock::now() + 3s;
        while (srv.command({"EXISTS", key}) != "0" && std::chrono::steady_clock::now() < until)
            co_await pause(5ms);
        CHECK_MESSAGE(srv.command({"EXISTS", key}) == "0", "the key of the late grants was not taken back within 3 s");

        // Nothing is left in the way: the next acquisition is granted at once.
        auto again = co_await m.acquire(1s);
        REQUIRE(again);
        co_await again->release();
    });
}

// The event loop blocked past the hold's loss bound (a handler that takes longer than the TTL: the
// fault injected here), so the renewal's timer has not run when the holder releases to a task
// waiting in memory. The hold is lost then, not handed over: the guard says lost() at once, and the
// waiter takes the key anew from the server (tests/sim: sim_redis's multi-lock seed 2028 was
// handed members past their bound). Before, the waiter was handed the expired key in memory.
TEST_CASE("a hold past its loss bound is not handed over in memory when the event loop ran late")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        std::vector<std::string> lines;
        auto opts = quick_connect();
        opts.log = [&](zkcoro::log_level, std::string_view text) {
            if (text.find("past its loss bound") != std::string_view::npos)
                lines.emplace_back(text);
        };
        zkcoro::redis_client rc(ex, srv.url(), opts);
        const auto key = unique_key("late-loop");
        zkcoro::redis_mutex m(rc, key, short_ttl(600ms));  // lost 480 ms after the last confirmed renewal
        auto g = co_await m.acquire(2s);
        REQUIRE(g);
        const auto first = g->fencing_token();
        std::optional<zkcoro::guard> second;
        bool done = false;
        asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
            second = co_await m.acquire(5s);
            done = true;
        }, asio::detached);
        for (int i = 0; i < 5; ++i)  // the other task runs up to its wait in memory
            co_await asio::post(ex, asio::use_awaitable);
        CHECK_FALSE(done);
        std::this_thread::sleep_for(700ms);  // the loop is blocked: no timer runs
        CHECK_MESSAGE(g->lost(), "a guard past its loss bound (480 ms after its grant, 700 ms ago) says it holds");
        co_await g->release();
        const auto until = std::chrono::steady_clock::now() + 5s;
        while (!done && std::chrono::steady_clock::now() < until)
            co_await pause(5ms);
        REQUIRE_MESSAGE(done, "the waiter was not served within 5 s");
        REQUIRE(second);
        CHECK_FALSE(second->lost());
        CHECK(m.metrics().local_handoffs == 0);
        CHECK(m.metrics().losses == 1);
        CHECK_MESSAGE(srv.command({"EXISTS", key}) == "1", "the waiter holds a key that is not on the server");
        CHECK(second->fencing_token() > first);
        CHECK(lines.size() == 1);
        co_await second->release();
        CHECK(srv.command({"EXISTS", key}) == "0");
    });
}

TEST_CASE("the server killed while a lock is held: with appendfsync always the lock survives the restart")
{
    zktest::redis_server srv({.persist = zktest::redis_options::persistence::aof});
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_client rc(ex, srv.url(), fast_reconnect());
        auto key = unique_key("aof");
        zkcoro::redis_mutex m(rc, key, short_ttl(3000ms));
        auto g = co_await m.acquire(2s);
        REQUIRE(g);
        srv.kill9();
        srv.restart();
        // The client notices the drop and reconnects (its states are observable).
        auto st = rc.state();
        for (int i = 0; i < 50 && (st != zkcoro::redis_state::connected || rc.connects() < 2); ++i) {
            using namespace asio::experimental::awaitable_operators;
            asio::steady_timer t(ex, 100ms);
            auto w = co_await (rc.async_wait_state(st, asio::as_tuple(asio::use_awaitable)) ||
                               t.async_wait(asio::as_tuple(asio::use_awaitable)));
            if (w.index() == 0)
                st = std::get<1>(std::get<0>(w));
            else
                st = rc.state();
        }
        CHECK(st == zkcoro::redis_state::connected);
        CHECK(rc.connects() >= 2);
        co_await pause(3500ms);  // longer than the TTL: renewals must have gone through
        CHECK_FALSE(g->lost());
        CHECK(srv.command(cmd("EXISTS", key)) == "1");
        co_await g->release();
        CHECK(srv.command(cmd("EXISTS", key)) == "0");
    });
}

TEST_CASE("a frozen holder's stale write is refused by a store that keeps the highest fencing token")
{
    auto& srv = shared_redis();
    for (bool check : {true, false}) {
        CAPTURE(check);
        auto key = unique_key("frozen");
        auto store = (std::filesystem::temp_directory_path() / fmt::format("zkcoro-fence-{}-{}", ::getpid(), key)).string();
        std::filesystem::remove(store);
        const auto ttl = 600ms;
        zktest::child_holder child(srv.url(), key, ttl, store, check);
        auto stale_token = child.read_token();
        ::kill(child.pid(), SIGSTOP);  // frozen past its TTL: no renewal
        asio::io_context ioc;
        run_bounded(ioc, [&]() -> asio::awaitable<void> {
            zkcoro::redis_client rc(co_await asio::this_coro::executor, srv.url());
            zkcoro::redis_mutex m(rc, key, short_ttl(ttl));
            auto g = co_await m.acquire(5s);
            REQUIRE(g);
            CHECK(g->fencing_token() > stale_token);
            zkfault::write_token(store, "fresh", g->fencing_token(), check);
            co_await g->release();
        });
        child.go();
        ::kill(child.pid(), SIGCONT);  // wakes up believing it holds the lock, and writes
        int status = child.reap();
        CHECK(WIFEXITED(status));
        auto audit = zkfault::audit_store(store);
        CHECK(audit.accepted + audit.rejected == 2);
        if (check) {
            CHECK(audit.rejected == 1);
            CHECK(audit.stale_accepted == 0);
        } else {
            // The negative control: without the check, the stale write lands (a lost update).
            CHECK(audit.stale_accepted == 1);
        }
        std::filesystem::remove(store);
    }
}
