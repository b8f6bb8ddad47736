// The fair Redis lock (redis_fair_mutex) against a real redis-server: grants in arrival order
// across clients and tasks, mutual exclusion, rising fencing tokens, reentrancy, exclusion with a
// redis_mutex on the same key, cancellation and deadline leave no queue entry, a crashed waiter
// is skipped once its timeout has passed, a crashed holder's key expires and the head gets it,
// the lost signal, a hash-tagged key, bad input, and no key left but the fencing counter. A
// crashed waiter: its client closed, or its process (a forked child) killed with SIGKILL.
#include <zkcoro/redis_fair_mutex.hpp>

#include "redis_test_util.hpp"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

using namespace rt;
using zkcoro::error_code;
using zkcoro::redis_errc;

namespace {

// The fair lock's keys of `key` (no hash tag in the test keys: the prefix is "{key}").
struct fair_names {
    explicit fair_names(std::string k)
        : key(std::move(k)), fencing("{" + key + "}:fencing"), queue("{" + key + "}:queue"),
          timeouts("{" + key + "}:timeouts")
    {
    }
    std::string key, fencing, queue, timeouts;
};

// The keys that exist among the lock's (KEYS would match the test's other keys by pattern).
std::vector<std::string> existing(const zktest::redis_server& srv, const fair_names& n)
{
    std::vector<std::string> out;
    for (const auto& k : {n.key, n.fencing, n.queue, n.timeouts})
        if (count_of(srv, cmd("EXISTS", k)) == 1)
            out.push_back(k);
    return out;
}

// Waits (at most `limit`, asking every 5 ms) until the queue has `n` waiters.
asio::awaitable<bool> queued(const zktest::redis_server& srv, const fair_names& names, std::int64_t n,
                             std::chrono::milliseconds limit = 3000ms)
{
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
        if (count_of(srv, cmd("LLEN", names.queue)) == n && count_of(srv, cmd("ZCARD", names.timeouts)) == n)
            co_return true;
        co_await pause(5ms);
    }
    co_return false;
}

zkcoro::redis_fair_mutex_options fair_opts(std::chrono::milliseconds ttl, std::chrono::milliseconds waiter = 0ms)
{
    zkcoro::redis_fair_mutex_options o;
    o.ttl = ttl;
    o.waiter_timeout = waiter;
    return o;
}

}  // namespace

// Waiters of three clients and of several tasks on one client are granted in the order they
// queued, one at a time, with rising fencing tokens; afterwards only the fencing counter is left.
TEST_CASE("fair lock: grants in arrival order across clients and tasks, one holder at a time")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const fair_names n(unique_key("fifo"));
        std::vector<std::unique_ptr<zkcoro::redis_client>> clients;
        std::vector<std::unique_ptr<zkcoro::redis_fair_mutex>> locks;
        for (int i = 0; i < 3; ++i) {
            clients.push_back(std::make_unique<zkcoro::redis_client>(ex, srv.url()));
            locks.push_back(std::make_unique<zkcoro::redis_fair_mutex>(*clients.back(), n.key, fair_opts(5000ms)));
        }
        auto first = co_await locks[0]->acquire(2s);
        REQUIRE(first);
        std::vector<int> order;
        std::vector<std::int64_t> tokens{first->fencing_token()};
        int inside = 0, most_inside = 0, done = 0;
        constexpr int waiters = 7;
        event all_done(ex);
        // Waiter i on client i % 3 (so tasks of one client are interleaved with other clients'),
        // each started once the previous one is queued.
        for (int i = 0; i < waiters; ++i) {
            auto* m = locks[i % 3].get();
            asio::co_spawn(ex, [&, i, m]() -> asio::awaitable<void> {
                auto g = co_await m->acquire(10s);
                if (g) {
                    most_inside = std::max(most_inside, ++inside);
                    order.push_back(i);
                    tokens.push_back(g->fencing_token());
                    co_await pause(10ms);
                    --inside;
                    co_await g->release();
                }
                if (++done == waiters)
                    all_done.fire();
            }, asio::detached);
            const bool in_queue = co_await queued(srv, n, i + 1);
            REQUIRE_MESSAGE(in_queue, "waiter " << i << " did not queue");
        }
        // async_participants: the holder, then the queue in order.
        auto ps = co_await locks[1]->async_participants(asio::use_awaitable);
        REQUIRE(ps.size() == static_cast<std::size_t>(waiters + 1));
        CHECK(ps[0].holds);
        CHECK(ps[0].data == srv.command(cmd("GET", n.key)));
        CHECK(std::none_of(ps.begin() + 1, ps.end(), [](const auto& p) { return p.holds; }));
        CHECK(ps[1].data == srv.command(cmd("LINDEX", n.queue, "0")));
        // Script runs from here on: each release tells one waiter, which tries once (no herd:
        // a release that woke every waiter would cost 7 + 6 + ... + 1 = 28 attempts).
        auto scripts = [&] { return srv.command_calls("evalsha") + srv.command_calls("eval"); };
        const auto scripts_before = scripts();
        co_await first->release();
        const bool finished = co_await all_done.wait(5s);
        CHECK(finished);
        CHECK(order == std::vector<int>{0, 1, 2, 3, 4, 5, 6});
        const auto script_runs = scripts() - scripts_before;
        MESSAGE(waiters << " grants after the first release took " << script_runs << " script runs");
        CHECK(script_runs <= 2 * waiters + 2);  // each waiter's granting attempt and release, the first release
        CHECK(most_inside == 1);
        CHECK(std::is_sorted(tokens.begin(), tokens.end()));
        CHECK(std::adjacent_find(tokens.begin(), tokens.end()) == tokens.end());  // strictly
        CHECK(existing(srv, n) == std::vector<std::string>{n.fencing});
    });
}

// Reentrancy is per task; a redis_mutex on the same key is excluded both ways.
TEST_CASE("fair lock: reentrant per task, and excludes a redis_mutex on the same key")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const fair_names n(unique_key("reenter"));
        zkcoro::redis_client rc(ex, srv.url());
        zkcoro::redis_fair_mutex fair(rc, n.key, fair_opts(3000ms));
        zkcoro::redis_mutex plain(rc, n.key, ttl(3000ms));
        auto g1 = co_await fair.acquire(1s);
        REQUIRE(g1);
        auto g2 = co_await fair.acquire(1s);  // the same task: held twice
        REQUIRE(g2);
        CHECK(g2->fencing_token() == g1->fencing_token());
        const auto me = co_await zkcoro::this_task::id();
        CHECK(fair.hold_count(me) == 2);
        // Another task (spawned: another owner) does not get it, nor does a redis_mutex.
        auto other = co_await asio::co_spawn(ex, [&]() -> asio::awaitable<bool> {
            auto g = co_await fair.try_acquire();
            co_return g.has_value();
        }, asio::use_awaitable);
        CHECK_FALSE(other);
        auto by_plain = co_await asio::co_spawn(ex, [&]() -> asio::awaitable<bool> {
            auto g = co_await plain.try_acquire();
            co_return g.has_value();
        }, asio::use_awaitable);
        CHECK_FALSE(by_plain);
        co_await g2->release();
        CHECK(count_of(srv, cmd("EXISTS", n.key)) == 1);  // one hold left
        co_await g1->release();
        CHECK(count_of(srv, cmd("EXISTS", n.key)) == 0);
        // A redis_mutex holding the key keeps the fair lock out, and its release (which tells
        // the fair queue nothing) is found by the fair head's polling.
        auto p = co_await plain.acquire(1s);
        REQUIRE(p);
        auto t0 = std::chrono::steady_clock::now();
        asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
            co_await pause(200ms);
            co_await p->release();
        }, asio::detached);
        auto g3 = co_await asio::co_spawn(ex, [&]() -> asio::awaitable<std::optional<zkcoro::guard>> {
            co_return co_await fair.acquire(2s);
        }, asio::use_awaitable);
        REQUIRE(g3);
        CHECK(ms_since(t0) < 600);
        CHECK(g3->fencing_token() > g1->fencing_token());
        co_await g3->release();
        CHECK(existing(srv, n) == std::vector<std::string>{n.fencing});
    });
}

// A waiter that times out, and one that is cancelled, leave the queue; the next waiter is told
// at once when a leaver was at the head; nothing but the counter remains.
TEST_CASE("fair lock: deadline and cancellation leave no queue entry")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const fair_names n(unique_key("leave"));
        zkcoro::redis_client rc(ex, srv.url());
        zkcoro::redis_fair_mutex m(rc, n.key, fair_opts(3000ms));
        auto held = co_await m.acquire(1s);
        REQUIRE(held);
        // The deadline.
        auto timed_out = co_await asio::co_spawn(ex, [&]() -> asio::awaitable<bool> {
            auto g = co_await m.acquire(300ms);
            co_return !g.has_value();
        }, asio::use_awaitable);
        CHECK(timed_out);
        bool empty = co_await queued(srv, n, 0);
        CHECK_MESSAGE(empty, "a timed-out waiter stayed in the queue");
        // Cancellation, of a waiter at the head with another behind it.
        asio::cancellation_signal stop;
        error_code cancelled_ec;
        bool cancelled_done = false;
        asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
            auto me = co_await zkcoro::this_task::id();
            auto [ec, g] = co_await m.async_acquire(
                me, 10s, asio::bind_cancellation_slot(stop.slot(), asio::as_tuple(asio::use_awaitable)));
            cancelled_ec = ec;
            cancelled_done = true;
        }, asio::detached);
        bool one = co_await queued(srv, n, 1);
        REQUIRE(one);
        std::optional<std::int64_t> waited_ms;
        std::chrono::steady_clock::time_point released_at;
        event granted(ex);
        asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
            auto g = co_await m.acquire(10s);
            if (g) {
                waited_ms = ms_since(released_at);
                co_await g->release();
            }
            granted.fire();
        }, asio::detached);
        bool two = co_await queued(srv, n, 2);
        REQUIRE(two);
        // Released while the head is being cancelled: the leaver tells the one behind it.
        released_at = std::chrono::steady_clock::now();
        stop.emit(asio::cancellation_type::terminal);
        co_await held->release();
        bool got = co_await granted.wait(3s);
        CHECK(got);
        CHECK(cancelled_done);
        CHECK(cancelled_ec == asio::error::operation_aborted);
        REQUIRE(waited_ms);
        // Well below the waiter's refresh time (1 s: a third of the waiter timeout, the TTL).
        CHECK_MESSAGE(*waited_ms < 500, "granted " << *waited_ms << " ms after the release");
        MESSAGE("the waiter behind a cancelled head was granted " << *waited_ms << " ms after the release");
        empty = co_await queued(srv, n, 0);
        CHECK(empty);
        CHECK(existing(srv, n) == std::vector<std::string>{n.fencing});
    });
}

// A waiter whose client is gone (closed: no renewal of its place, no leaving) stays queued until
// its timeout passes; the waiter behind it is granted then, not before the holder's release.
TEST_CASE("fair lock: a crashed waiter at the head is skipped once its timeout has passed")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const fair_names n(unique_key("crashed-waiter"));
        constexpr auto waiter_timeout = 600ms;
        zkcoro::redis_client a(ex, srv.url()), b(ex, srv.url()), crashing(ex, srv.url());
        zkcoro::redis_fair_mutex ma(a, n.key, fair_opts(3000ms, waiter_timeout));
        zkcoro::redis_fair_mutex mb(b, n.key, fair_opts(3000ms, waiter_timeout));
        zkcoro::redis_fair_mutex mc(crashing, n.key, fair_opts(3000ms, waiter_timeout));
        auto held = co_await ma.acquire(1s);
        REQUIRE(held);
        error_code crashed_ec;
        asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
            auto me = co_await zkcoro::this_task::id();
            auto [ec, g] = co_await mc.async_acquire(me, 10s, asio::as_tuple(asio::use_awaitable));
            crashed_ec = ec;
        }, asio::detached);
        bool one = co_await queued(srv, n, 1);
        REQUIRE(one);
        std::optional<std::int64_t> granted_ms;
        auto t0 = std::chrono::steady_clock::now();
        event granted(ex);
        asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
            auto g = co_await mb.acquire(10s);
            if (g) {
                granted_ms = ms_since(t0);
                co_await g->release();
            }
            granted.fire();
        }, asio::detached);
        bool two = co_await queued(srv, n, 2);
        REQUIRE(two);
        crashing.close();  // the head's client is gone: its entry stays until its timeout
        co_await pause(50ms);
        CHECK(crashed_ec == redis_errc::closed);
        CHECK(count_of(srv, cmd("LLEN", n.queue)) == 2);
        co_await held->release();
        const auto released_ms = ms_since(t0);
        bool got = co_await granted.wait(3s);
        REQUIRE(got);
        REQUIRE(granted_ms);
        MESSAGE("behind a crashed head (waiter timeout " << waiter_timeout.count() << " ms): released at "
                << released_ms << " ms, granted at " << *granted_ms << " ms");
        CHECK(*granted_ms >= released_ms);
        CHECK(*granted_ms < waiter_timeout.count() + 600);
        bool empty = co_await queued(srv, n, 0);
        CHECK(empty);
        CHECK(existing(srv, n) == std::vector<std::string>{n.fencing});
    });
}

// A waiter whose client closes while it waits (as a crashed one: no leave) and nobody coming to
// the lock again: its queue entry must not stay for ever. The queue and the timeouts expire 1 ms
// after the latest timeout (found by the simulation, tests/sim: the clients closed with waiters
// queued left both keys without a TTL).
TEST_CASE("fair lock: a waiter gone for good leaves no queue key once its timeout has passed")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const fair_names n(unique_key("gone-waiter"));
        constexpr auto waiter_timeout = 300ms;
        zkcoro::redis_client a(ex, srv.url()), gone(ex, srv.url());
        zkcoro::redis_fair_mutex ma(a, n.key, fair_opts(3000ms, waiter_timeout));
        zkcoro::redis_fair_mutex mg(gone, n.key, fair_opts(3000ms, waiter_timeout));
        auto held = co_await ma.acquire(1s);
        REQUIRE(held);
        asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
            auto me = co_await zkcoro::this_task::id();
            auto [ec, g] = co_await mg.async_acquire(me, 10s, asio::as_tuple(asio::use_awaitable));
        }, asio::detached);
        bool one = co_await queued(srv, n, 1);
        REQUIRE(one);
        const auto ttl = count_of(srv, cmd("PTTL", n.queue));
        CHECK(ttl > 0);
        CHECK(ttl <= waiter_timeout.count() + 1);
        // Both keys expire together: their TTLs read in one script (one instant on the server;
        // read one after the other they were 100 ms apart in a loaded sanitizer run).
        CHECK(count_of(srv, cmd("PTTL", n.timeouts)) > 0);
        // (Offset by a million, so that an error reply, read as 0, fails too.)
        const auto apart = count_of(srv, cmd("EVAL",
                                             "local q, t = redis.call('PTTL', KEYS[1]), redis.call('PTTL', KEYS[2]) "
                                             "if q <= 0 or t <= 0 then return 0 end return 1000000 + q - t",
                                             "2", n.queue, n.timeouts)) - 1000000;
        CHECK_MESSAGE(std::abs(apart) <= 1, "the queue's TTL and the timeouts' differ by " << apart << " ms");
        gone.close();
        co_await held->release();  // tells the head, which is gone; nobody runs a script after it
        const auto t0 = std::chrono::steady_clock::now();
        bool clean = false;
        while (!clean && ms_since(t0) < waiter_timeout.count() + 1000) {
            clean = existing(srv, n) == std::vector<std::string>{n.fencing};
            if (!clean)
                co_await pause(10ms);
        }
        CHECK_MESSAGE(clean, "left " << existing(srv, n).size() << " keys " << waiter_timeout.count() + 1000
                                     << " ms after the release");
    });
}

// A waiter in a child process killed with SIGKILL (no leaving, no renewal of its place) is
// skipped once its timeout has passed: the same as above with a real crash.
TEST_CASE("fair lock: a waiter process killed with SIGKILL is skipped after its timeout")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const fair_names n(unique_key("killed-waiter"));
        constexpr auto waiter_timeout = 600ms;
        zkcoro::redis_client a(ex, srv.url()), b(ex, srv.url());
        zkcoro::redis_fair_mutex ma(a, n.key, fair_opts(3000ms, waiter_timeout));
        zkcoro::redis_fair_mutex mb(b, n.key, fair_opts(3000ms, waiter_timeout));
        auto held = co_await ma.acquire(1s);
        REQUIRE(held);
        const pid_t child = ::fork();
        if (child == 0) {
            // The child waits for the lock until it is killed (bounded: 15 s), and never returns
            // into the test runner.
            try {
                asio::io_context cio;
                zkcoro::redis_client rc(cio.get_executor(), srv.url());
                zkcoro::redis_fair_mutex m(rc, n.key, fair_opts(3000ms, waiter_timeout));
                asio::co_spawn(cio, [&]() -> asio::awaitable<void> { (void)co_await m.acquire(10s); }, asio::detached);
                cio.run_for(15s);
            } catch (...) {
            }
            std::_Exit(0);
        }
        REQUIRE(child > 0);
        struct reap {
            pid_t pid;
            ~reap()
            {
                ::kill(pid, SIGKILL);
                ::waitpid(pid, nullptr, 0);
            }
        } reaper{child};
        bool one = co_await queued(srv, n, 1);
        REQUIRE(one);
        std::optional<std::int64_t> granted_ms;
        auto t0 = std::chrono::steady_clock::now();
        event granted(ex);
        asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
            auto g = co_await mb.acquire(10s);
            if (g) {
                granted_ms = ms_since(t0);
                co_await g->release();
            }
            granted.fire();
        }, asio::detached);
        bool two = co_await queued(srv, n, 2);
        REQUIRE(two);
        ::kill(child, SIGKILL);
        co_await held->release();
        const auto released_ms = ms_since(t0);
        bool got = co_await granted.wait(3s);
        REQUIRE(got);
        REQUIRE(granted_ms);
        MESSAGE("behind a SIGKILLed head (waiter timeout " << waiter_timeout.count() << " ms): released at "
                << released_ms << " ms, granted at " << *granted_ms << " ms");
        CHECK(*granted_ms < waiter_timeout.count() + 600);
        bool empty = co_await queued(srv, n, 0);
        CHECK(empty);
        CHECK(existing(srv, n) == std::vector<std::string>{n.fencing});
    });
}

// A holder whose client is gone stops renewing; its key expires after the TTL and the head of
// the queue is granted then, with a higher token.
TEST_CASE("fair lock: a crashed holder's key expires and the next waiter is granted")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const fair_names n(unique_key("crashed-holder"));
        constexpr auto key_ttl = 500ms;
        zkcoro::redis_client a(ex, srv.url()), b(ex, srv.url());
        zkcoro::redis_fair_mutex ma(a, n.key, fair_opts(key_ttl));
        zkcoro::redis_fair_mutex mb(b, n.key, fair_opts(key_ttl, 3000ms));
        std::int64_t crashed_token = 0;
        {
            auto held = co_await ma.acquire(1s);
            REQUIRE(held);
            crashed_token = held->fencing_token();
            a.close();  // no renewal, no release: the key expires within its TTL
        }
        auto t0 = std::chrono::steady_clock::now();
        auto g = co_await mb.acquire(3s);
        REQUIRE(g);
        const auto took = ms_since(t0);
        MESSAGE("granted " << took << " ms after the holder's client closed (TTL " << key_ttl.count() << " ms)");
        CHECK(took < key_ttl.count() + 400);
        CHECK(g->fencing_token() > crashed_token);
        co_await g->release();
        CHECK(existing(srv, n) == std::vector<std::string>{n.fencing});
    });
}

// A key with a hash tag keeps it: the other keys are the key itself plus a suffix (all on the
// tag's slot); the fencing counter is then redis_mutex's K:fencing.
TEST_CASE("fair lock: a key with a hash tag names the other keys after itself")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const std::string key = "job:{" + unique_key("tag") + "}:lock";
        zkcoro::redis_client rc(ex, srv.url());
        zkcoro::redis_fair_mutex m(rc, key, fair_opts(3000ms));
        auto held = co_await m.acquire(1s);
        REQUIRE(held);
        event done(ex);
        asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
            auto g = co_await m.acquire(5s);
            if (g)
                co_await g->release();
            done.fire();
        }, asio::detached);
        bool in_queue = false;
        for (int i = 0; i < 400 && !in_queue; ++i) {
            in_queue = count_of(srv, cmd("LLEN", key + ":queue")) == 1;
            if (!in_queue)
                co_await pause(5ms);
        }
        CHECK(in_queue);
        CHECK(count_of(srv, cmd("ZCARD", key + ":timeouts")) == 1);
        CHECK(count_of(srv, cmd("EXISTS", key + ":fencing")) == 1);
        CHECK(count_of(srv, cmd("EXISTS", "{" + key + "}:queue")) == 0);
        co_await held->release();
        bool finished = co_await done.wait(3s);
        CHECK(finished);
        CHECK(count_of(srv, cmd("EXISTS", key, key + ":queue", key + ":timeouts")) == 0);
    });
}

// The lost signal, as redis_mutex's: the key deleted under the holder (an operator, an expiry)
// is found by the next renewal (every third of the TTL), and the guard reports the loss.
TEST_CASE("fair lock: a holder whose key is deleted under it is told by its lost signal")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const fair_names n(unique_key("lost"));
        zkcoro::redis_client rc(ex, srv.url());
        zkcoro::redis_fair_mutex m(rc, n.key, fair_opts(600ms));
        auto g = co_await m.acquire(1s);
        REQUIRE(g);
        CHECK_FALSE(g->lost());
        srv.command(cmd("DEL", n.key));
        const auto t0 = std::chrono::steady_clock::now();
        event lost(ex);
        error_code lost_ec;
        g->async_wait_lost([&](error_code ec) {
            lost_ec = ec;
            lost.fire();
        });
        const bool told = co_await lost.wait(1500ms);
        REQUIRE(told);
        MESSAGE("the loss was signalled " << ms_since(t0) << " ms after the DEL (TTL 600 ms, renewed every 200 ms)");
        CHECK(lost_ec == zkcoro::client_errc::lock_lost);
        CHECK(g->lost());
        CHECK(ms_since(t0) < 600);
    });
}

// Bad keys and timeouts, and a queue key of another type, fail with a code that says which, and
// change nothing.
TEST_CASE("fair lock: bad input gets bad_key, bad_ttl or wrong_type")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_client rc(ex, srv.url());
        auto code_of = [&](zkcoro::redis_fair_mutex& m) -> asio::awaitable<error_code> {
            auto me = co_await zkcoro::this_task::id();
            auto [ec, g] = co_await m.async_acquire(me, 1s, asio::as_tuple(asio::use_awaitable));
            co_return ec;
        };
        // (Each result apart: no co_await inside a condition, see docs/building.md, Compilers.)
        zkcoro::redis_fair_mutex empty(rc, "", fair_opts(1000ms));
        const auto empty_ec = co_await code_of(empty);
        CHECK(empty_ec == redis_errc::bad_key);
        zkcoro::redis_fair_mutex short_wait(rc, unique_key("bad"), fair_opts(1000ms, 50ms));
        const auto short_ec = co_await code_of(short_wait);
        CHECK(short_ec == redis_errc::bad_ttl);
        const fair_names n(unique_key("wrongtype"));
        srv.command(cmd("SET", n.queue, "not a list"));
        zkcoro::redis_fair_mutex m(rc, n.key, fair_opts(1000ms));
        const auto type_ec = co_await code_of(m);
        CHECK(type_ec == redis_errc::wrong_type);
        CHECK(count_of(srv, cmd("EXISTS", n.key)) == 0);
        CHECK(count_of(srv, cmd("EXISTS", n.fencing)) == 0);
        srv.command(cmd("DEL", n.queue));
    });
}
