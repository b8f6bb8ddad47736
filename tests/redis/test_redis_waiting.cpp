// Waiting for a Redis lock, against a real redis-server: close() ends every pending acquisition at
// once (quietly), a waiter behind a holder that publishes nothing on release (redis-py's Lock: a
// plain DEL) is granted within 150 ms of the release, and a cancelled waiter leaves no key.
#include "redis_test_util.hpp"

#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

using namespace rt;
using zkcoro::error_code;
using zkcoro::redis_errc;

namespace {

// A redis-py-like holder: SET NX PX with a token of its own form, released by a plain DEL.
void foreign_hold(const zktest::redis_server& srv, const std::string& key, std::chrono::milliseconds t = 30000ms)
{
    REQUIRE(srv.command(cmd("SET", key, "b9c3a0f2d41e4c5f9d0e7a6b5c4d3e2f", "NX", "PX", std::to_string(t.count()))) ==
            "OK");
}

}  // namespace

TEST_CASE("close() completes 100 pending acquisitions with closed at once, logging no warning per acquisition")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_client holder(ex, srv.url());
        struct lines {
            std::mutex m;
            int total = 0, warn_or_worse = 0;
        };
        auto log = std::make_shared<lines>();
        zkcoro::redis_options o;
        o.log = [log](zkcoro::log_level l, std::string_view) {
            std::lock_guard lk(log->m);
            ++log->total;
            if (l <= zkcoro::log_level::warn)
                ++log->warn_or_worse;
        };
        zkcoro::redis_client rc(ex, srv.url(), o);
        // 20 keys held elsewhere with a 30 s TTL, 5 waiting tasks on each (one asks Redis, four
        // queue in memory behind it).
        std::vector<std::string> keys;
        std::vector<std::unique_ptr<zkcoro::redis_mutex>> held, waiting;
        std::vector<zkcoro::guard> guards;
        for (int i = 0; i < 20; ++i) {
            keys.push_back(unique_key("close"));
            held.push_back(std::make_unique<zkcoro::redis_mutex>(holder, keys.back(), ttl(30000ms)));
            guards.push_back(co_await held.back()->acquire());
            waiting.push_back(std::make_unique<zkcoro::redis_mutex>(rc, keys.back(), ttl(30000ms)));
        }
        int completed = 0, closed = 0;
        event all_done(ex);
        for (int i = 0; i < 100; ++i)
            asio::co_spawn(ex, [&, m = waiting[i % 20].get()]() -> asio::awaitable<void> {
                auto me = co_await zkcoro::this_task::id();
                auto [ec, g] = co_await m->async_acquire(me, 25s, asio::as_tuple(asio::use_awaitable));
                closed += ec == redis_errc::closed;
                if (++completed == 100)
                    all_done.fire();
            }, asio::detached);
        co_await pause(500ms);  // all of them waiting
        CHECK(completed == 0);
        auto t0 = std::chrono::steady_clock::now();
        rc.close();
        bool done = co_await all_done.wait(2s);
        auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
        CHECK_MESSAGE(done, completed << " of 100 pending acquisitions completed within 2 s of close()");
        MESSAGE("100 pending acquisitions completed " << took.count() << " ms after close()");
        CHECK(closed == 100);
        std::lock_guard lk(log->m);
        MESSAGE("log lines: " << log->total << ", at warn or error: " << log->warn_or_worse);
        CHECK(log->warn_or_worse <= 1);
        CHECK(log->total <= 101);
        for (auto& g : guards)
            co_await g.release();
    });
}

TEST_CASE("a waiter behind a holder that publishes nothing (a plain DEL) is granted within 150 ms (38 rounds of 40)")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_client rc(ex, srv.url());
        co_await rc.async_connect();
        std::vector<double> handoff_ms;
        std::minstd_rand rng(7);
        constexpr int rounds = 40;
        for (int i = 0; i < rounds; ++i) {
            auto key = unique_key("foreign");
            foreign_hold(srv, key);
            zkcoro::redis_mutex m(rc, key, ttl(30000ms));
            std::optional<zkcoro::guard> got;
            std::chrono::steady_clock::time_point granted;
            event done(ex);
            asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
                got = co_await m.acquire(10s);
                granted = std::chrono::steady_clock::now();
                done.fire();
            }, asio::detached);
            // Released after 10-310 ms of waiting: the waiter's backoff at any step.
            co_await pause(std::chrono::milliseconds(10 + rng() % 300));
            REQUIRE_FALSE(done.set);
            auto released = std::chrono::steady_clock::now();
            srv.command(cmd("DEL", key));  // what redis-py's release does: no PUBLISH
            REQUIRE_MESSAGE(co_await done.wait(1s), "no grant within 1 s of the holder's DEL (key TTL 30 s)");
            REQUIRE(got);
            handoff_ms.push_back(std::chrono::duration<double, std::milli>(granted - released).count());
            co_await got->release();
        }
        std::sort(handoff_ms.begin(), handoff_ms.end());
        auto p50 = handoff_ms[rounds / 2], p99 = handoff_ms[rounds * 99 / 100], max = handoff_ms.back();
        MESSAGE(fmt::format("handoff after a DEL without PUBLISH over {} rounds: p50 {:.1f} ms, p99 {:.1f} ms, "
                            "max {:.1f} ms",
                            rounds, p50, p99, max));
        // The polls are at most 62.5 ms apart (lock_scripts.hpp: next_poll), so a grant comes within
        // 150 ms of the DEL but for the machine's own delays: two rounds of the 40 may be later (fresh
        // roots' test runs saw one at 173 ms and one at 153 ms on 2 busy cores), none later than 1 s
        // (the REQUIRE above). Polls 200 ms apart would put a quarter of them past it, 300 ms apart half.
        const auto late = std::count_if(handoff_ms.begin(), handoff_ms.end(), [](double ms) { return ms >= 150.0; });
        CHECK_MESSAGE(late <= 2, late << " of " << rounds << " grants came 150 ms or more after the release (the "
                                      "slowest " << max << " ms)");
    }, 60s);
}

TEST_CASE("a cancelled waiting acquisition leaves no key, also when the client closes right after")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        std::minstd_rand rng(11);
        for (int i = 0; i < 12; ++i) {
            CAPTURE(i);
            auto key = unique_key("cancel");
            foreign_hold(srv, key, 1000ms);  // expires while the waiter polls
            auto rc = std::make_unique<zkcoro::redis_client>(ex, srv.url());
            co_await rc->async_connect();
            zkcoro::redis_mutex m(*rc, key, ttl(30000ms));
            asio::cancellation_signal sig;
            error_code ec;
            std::optional<zkcoro::guard> g;
            event done(ex);
            auto me = co_await zkcoro::this_task::id();
            auto on_done = [&](error_code e, std::optional<zkcoro::guard> r) {
                ec = e;
                g = std::move(r);
                done.fire();
            };
            m.async_acquire(me, 10s, asio::bind_cancellation_slot(sig.slot(), on_done));
            // Cancelled at any point of its polling, near the holder's expiry.
            co_await pause(std::chrono::milliseconds(900 + rng() % 200));
            sig.emit(asio::cancellation_type::terminal);
            REQUIRE(co_await done.wait(1s));
            if (g) {  // granted before the cancellation arrived: released
                co_await g->release();
                g.reset();
            } else {
                CHECK(ec == asio::error::operation_aborted);
            }
            if (i % 2)
                rc->close();  // as zklock does on SIGTERM
            co_await pause(1200ms - std::chrono::milliseconds(i % 2 ? 0 : 600));
            auto value = srv.command(cmd("GET", key));
            CHECK_MESSAGE(value == "(nil)", "the key holds '" << value << "' after the waiter was cancelled");
            srv.command(cmd("DEL", key));
        }
    }, 120s);
}

TEST_CASE("close() right after a command fails it with closed at once, yet the command still reaches the server")
{
    // What a cancelled acquisition's take-back relies on when the client closes next (zklock on
    // SIGTERM): a command handed over before close() is written out, not dropped.
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        for (int i = 0; i < 5; ++i) {
            zkcoro::redis_client rc(ex, srv.url());
            co_await rc.async_connect();
            auto key = unique_key("flush");
            error_code ec;
            event done(ex);
            rc.async_exec(cmd("SET", key, "written"), [&](error_code e, zkcoro::redis_reply) {
                ec = e;
                done.fire();
            });
            rc.close();
            REQUIRE(co_await done.wait(1s));
            CHECK(ec == redis_errc::closed);
            co_await pause(200ms);
            CHECK(srv.command(cmd("GET", key)) == "written");
        }
    });
}
