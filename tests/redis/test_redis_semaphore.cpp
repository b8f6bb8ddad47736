// The Redis semaphore (redis_semaphore) against a real redis-server: at most max_leases leases held
// at once across clients and tasks, acquire(n) all or nothing and in arrival order (no herd on a
// release), two acquire(2) on 3 leases never deadlock, rising fencing tokens, a crashed holder's
// leases back after its TTL (its client closed, or its process SIGKILLed), several holds of one
// object renewed side by side, a cut subscription taken up again, the lost signal,
// deadline and cancellation leave nothing, bad input writes nothing, a max_leases mismatch is
// refused, and no key is left but the fencing counter.
#include <zkcoro/redis_semaphore.hpp>

#include "redis_test_util.hpp"

#include <algorithm>
#include <csignal>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace rt;
using zkcoro::error_code;
using zkcoro::redis_errc;

namespace {

// The semaphore's keys of `key` (no hash tag in the test keys: the prefix is "{key}").
struct sem_names {
    explicit sem_names(std::string k)
        : key(std::move(k)), fencing("{" + key + "}:fencing"), leases("{" + key + "}:leases"),
          queue("{" + key + "}:queue"), timeouts("{" + key + "}:timeouts"), max("{" + key + "}:max")
    {
    }
    std::string key, fencing, leases, queue, timeouts, max;
};

// The keys that exist among the semaphore's.
std::vector<std::string> existing(const zktest::redis_server& srv, const sem_names& n)
{
    std::vector<std::string> out;
    for (const auto& k : {n.key, n.fencing, n.leases, n.queue, n.timeouts, n.max})
        if (count_of(srv, cmd("EXISTS", k)) == 1)
            out.push_back(k);
    return out;
}

// Waits (at most `limit`, asking every 5 ms) until the queue has `n` waiters.
asio::awaitable<bool> queued(const zktest::redis_server& srv, const sem_names& names, std::int64_t n,
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

// Waits (at most `limit`) until only the fencing counter is left.
asio::awaitable<bool> only_counter_left(const zktest::redis_server& srv, const sem_names& names,
                                        std::chrono::milliseconds limit = 1000ms)
{
    const auto until = std::chrono::steady_clock::now() + limit;
    for (;;) {
        if (existing(srv, names) == std::vector<std::string>{names.fencing})
            co_return true;
        if (std::chrono::steady_clock::now() >= until)
            co_return false;
        co_await pause(10ms);
    }
}

zkcoro::redis_semaphore_options sem_opts(std::chrono::milliseconds ttl, std::chrono::milliseconds waiter = 0ms)
{
    zkcoro::redis_semaphore_options o;
    o.ttl = ttl;
    o.waiter_timeout = waiter;
    return o;
}

asio::awaitable<error_code> code_of(zkcoro::redis_semaphore& s, int n, std::chrono::milliseconds limit = 1000ms)
{
    auto [ec, g] = co_await s.async_acquire(n, limit, asio::as_tuple(asio::use_awaitable));
    if (g)
        co_await g->release();
    co_return ec;
}

}  // namespace

// Tasks of three clients, three each, take 1 or 2 leases of 3 over and over: the leases held at
// once (summed in memory at each grant and release) never pass 3, and reach it; every grant has a
// token of its own; afterwards only the fencing counter is left.
TEST_CASE("semaphore: at most max_leases held at once across clients and tasks")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const sem_names n(unique_key("max"));
        constexpr int max = 3, tasks = 9, rounds = 4;
        std::vector<std::unique_ptr<zkcoro::redis_client>> clients;
        std::vector<std::unique_ptr<zkcoro::redis_semaphore>> sems;
        for (int i = 0; i < 3; ++i) {
            clients.push_back(std::make_unique<zkcoro::redis_client>(ex, srv.url()));
            sems.push_back(std::make_unique<zkcoro::redis_semaphore>(*clients.back(), n.key, max, sem_opts(3000ms)));
        }
        int inside = 0, most_inside = 0, done = 0, grants = 0, failures = 0;
        std::vector<std::int64_t> tokens;
        event all_done(ex);
        for (int i = 0; i < tasks; ++i) {
            auto* s = sems[i % 3].get();
            const int want = i < 6 ? 1 : 2;
            asio::co_spawn(ex, [&, s, want]() -> asio::awaitable<void> {
                for (int r = 0; r < rounds; ++r) {
                    auto g = co_await s->acquire(want, 10s);
                    if (!g) {
                        ++failures;
                        break;
                    }
                    ++grants;
                    inside += want;
                    most_inside = std::max(most_inside, inside);
                    tokens.push_back(g->fencing_token());
                    co_await pause(5ms);
                    inside -= want;
                    co_await g->release();
                }
                if (++done == tasks)
                    all_done.fire();
            }, asio::detached);
        }
        const bool finished = co_await all_done.wait(15s);
        REQUIRE(finished);
        MESSAGE(grants << " grants, at most " << most_inside << " leases held at once");
        CHECK(failures == 0);
        CHECK(grants == tasks * rounds);
        CHECK(most_inside <= max);
        CHECK(most_inside >= 2);
        std::sort(tokens.begin(), tokens.end());
        CHECK(std::adjacent_find(tokens.begin(), tokens.end()) == tokens.end());
        const bool clean = co_await only_counter_left(srv, n);
        CHECK_MESSAGE(clean, "keys left: " << existing(srv, n).size());
    });
}

// acquire(n) takes its n leases at once or waits holding none; a later acquire(1) does not pass
// an earlier acquire(2) (FIFO); tokens rise with each grant; the listing shows holders, then
// waiters.
TEST_CASE("semaphore: acquire(n) all or nothing, in arrival order, tokens rising")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const sem_names n(unique_key("all"));
        zkcoro::redis_client a(ex, srv.url()), b(ex, srv.url());
        zkcoro::redis_semaphore sa(a, n.key, 3, sem_opts(3000ms));
        zkcoro::redis_semaphore sb(b, n.key, 3, sem_opts(3000ms));
        auto two = co_await sa.acquire(2, 1s);
        REQUIRE(two);
        CHECK(count_of(srv, cmd("ZCARD", n.leases)) == 1);
        CHECK(srv.command(cmd("GET", n.max)) == "3");
        // B asks for 2 of the 1 left: it waits, holding nothing.
        std::optional<zkcoro::guard> b_guard;
        event b_granted(ex);
        asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
            b_guard = co_await sb.acquire(2, 5s);
            b_granted.fire();
        }, asio::detached);
        const bool b_queued = co_await queued(srv, n, 1);
        REQUIRE(b_queued);
        CHECK(count_of(srv, cmd("ZCARD", n.leases)) == 1);  // A's only: B holds no part
        // A later acquire(1) does not pass B, though one lease is free.
        auto passed = co_await sa.try_acquire(1);
        CHECK_FALSE(passed);
        auto ps = co_await sa.async_participants(asio::use_awaitable);
        REQUIRE(ps.size() == 2);
        CHECK(ps[0].holds);
        CHECK(ps[0].path == n.leases);
        CHECK(ps[0].data.ends_with(":s2"));
        CHECK_FALSE(ps[1].holds);
        CHECK(ps[1].path == n.queue);
        // C asks for 1 behind B.
        std::optional<zkcoro::guard> c_guard;
        event c_granted(ex);
        asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
            c_guard = co_await sa.acquire(1, 5s);
            c_granted.fire();
        }, asio::detached);
        const bool c_queued = co_await queued(srv, n, 2);
        REQUIRE(c_queued);
        const auto t0 = std::chrono::steady_clock::now();
        co_await two->release();
        const bool got_b = co_await b_granted.wait(2s);
        REQUIRE(got_b);
        REQUIRE(b_guard);
        const bool got_c = co_await c_granted.wait(2s);
        REQUIRE(got_c);
        REQUIRE(c_guard);
        MESSAGE("after the release of 2: acquire(2) and acquire(1) behind it granted within " << ms_since(t0) << " ms");
        CHECK(ms_since(t0) < 500);  // told by the release, not by a poll (every 1 s)
        CHECK(b_guard->fencing_token() > two->fencing_token());
        CHECK(c_guard->fencing_token() > b_guard->fencing_token());
        CHECK(count_of(srv, cmd("ZCARD", n.leases)) == 2);
        co_await b_guard->release();
        co_await c_guard->release();
        const bool clean = co_await only_counter_left(srv, n);
        CHECK(clean);
    });
}

// Two tasks on two clients each take 2 of 3 leases, 15 times: neither ever holds part of what
// it needs, so they never wait for each other; they are never inside together.
TEST_CASE("semaphore: two acquire(2) on 3 leases do not deadlock")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const sem_names n(unique_key("pairs"));
        zkcoro::redis_client a(ex, srv.url()), b(ex, srv.url());
        zkcoro::redis_semaphore sa(a, n.key, 3, sem_opts(2000ms));
        zkcoro::redis_semaphore sb(b, n.key, 3, sem_opts(2000ms));
        int inside = 0, together = 0, done = 0, grants = 0;
        event both_done(ex);
        for (auto* s : {&sa, &sb})
            asio::co_spawn(ex, [&, s]() -> asio::awaitable<void> {
                for (int r = 0; r < 15; ++r) {
                    auto g = co_await s->acquire(2, 3s);
                    if (!g)
                        break;
                    ++grants;
                    if (++inside > 1)
                        ++together;
                    co_await pause(2ms);
                    --inside;
                    co_await g->release();
                }
                if (++done == 2)
                    both_done.fire();
            }, asio::detached);
        const bool finished = co_await both_done.wait(10s);
        REQUIRE(finished);
        CHECK(grants == 30);
        CHECK(together == 0);
        const bool clean = co_await only_counter_left(srv, n);
        CHECK(clean);
    });
}

// Three tasks of one client hold a lease each, at once, for more than two TTLs: each hold is
// renewed on its own (the object's renewal timer serves them all), none is lost. A TTL of 600 ms
// (renewed every 200 ms): with 300 ms, a fresh root under the sanitizers, four tests at a time,
// lost two of the three holds (a stall of over 200 ms of the test process).
TEST_CASE("semaphore: several holds of one object are each renewed")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const sem_names n(unique_key("renew"));
        zkcoro::redis_client rc(ex, srv.url());
        zkcoro::redis_semaphore s(rc, n.key, 3, sem_opts(600ms));
        std::vector<zkcoro::guard> held;
        for (int i = 0; i < 3; ++i) {
            auto g = co_await asio::co_spawn(ex, [&]() -> asio::awaitable<std::optional<zkcoro::guard>> {
                co_return co_await s.acquire(1, 1s);
            }, asio::use_awaitable);
            REQUIRE(g);
            held.push_back(std::move(*g));
        }
        co_await pause(1500ms);
        for (auto& g : held)
            CHECK_FALSE(g.lost());
        CHECK(count_of(srv, cmd("ZCARD", n.leases)) == 3);
        auto more = co_await s.try_acquire(1);
        CHECK_FALSE(more);
        for (auto& g : held)
            co_await g.release();
        const bool clean = co_await only_counter_left(srv, n);
        CHECK(clean);
    });
}

// Six waiters of two clients, each for the one lease, are granted in the order they queued; each
// release tells the next one only (no herd: a release that woke every waiter would cost 6 + 5 +
// ... + 1 = 21 attempts).
TEST_CASE("semaphore: one lease, six waiters: FIFO and no herd")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const sem_names n(unique_key("herd"));
        zkcoro::redis_client a(ex, srv.url()), b(ex, srv.url());
        zkcoro::redis_semaphore sa(a, n.key, 1, sem_opts(3000ms));
        zkcoro::redis_semaphore sb(b, n.key, 1, sem_opts(3000ms));
        auto first = co_await sa.acquire(1, 1s);
        REQUIRE(first);
        constexpr int waiters = 6;
        std::vector<int> order;
        int done = 0;
        event all_done(ex);
        for (int i = 0; i < waiters; ++i) {
            auto* s = i % 2 ? &sb : &sa;
            asio::co_spawn(ex, [&, i, s]() -> asio::awaitable<void> {
                auto g = co_await s->acquire(1, 10s);
                if (g) {
                    order.push_back(i);
                    co_await g->release();
                }
                if (++done == waiters)
                    all_done.fire();
            }, asio::detached);
            const bool in_queue = co_await queued(srv, n, i + 1);
            REQUIRE_MESSAGE(in_queue, "waiter " << i << " did not queue");
        }
        auto scripts = [&] { return srv.command_calls("evalsha") + srv.command_calls("eval"); };
        const auto before = scripts();
        co_await first->release();
        const bool finished = co_await all_done.wait(5s);
        REQUIRE(finished);
        CHECK(order == std::vector<int>{0, 1, 2, 3, 4, 5});
        const auto runs = scripts() - before;
        MESSAGE(waiters << " grants after the first release took " << runs << " script runs");
        // 12 at best (a grant and a release each), 27 with a herd (6 + 5 + ... + 1 attempts and
        // the releases); a fresh root under the sanitizers, busy, saw 16 (waiters' polls).
        CHECK(runs <= 2 * waiters + 6);
        const bool clean = co_await only_counter_left(srv, n);
        CHECK(clean);
    });
}

// The waiter's subscription is cut (CLIENT KILL TYPE pubsub, as a dropped connection would): it
// subscribes again, and the release is still told to it, sooner than its own refresh (every 2 s).
TEST_CASE("semaphore: a waiter whose subscription was cut is still told of the release")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const sem_names n(unique_key("resub"));
        zkcoro::redis_client a(ex, srv.url()), b(ex, srv.url());
        zkcoro::redis_semaphore sa(a, n.key, 1, sem_opts(3000ms));
        zkcoro::redis_semaphore sb(b, n.key, 1, sem_opts(3000ms, 6000ms));
        auto held = co_await sa.acquire(1, 1s);
        REQUIRE(held);
        std::optional<zkcoro::guard> got;
        std::chrono::steady_clock::time_point granted_at;
        event granted(ex);
        asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
            got = co_await sb.acquire(1, 5s);
            granted_at = std::chrono::steady_clock::now();
            granted.fire();
        }, asio::detached);
        const bool waiting = co_await queued(srv, n, 1);
        REQUIRE(waiting);
        co_await pause(50ms);  // subscribed by now (its confirmation made it try again)
        const auto killed = count_of(srv, cmd("CLIENT", "KILL", "TYPE", "pubsub"));
        CHECK(killed >= 1);
        // Until it is subscribed again (CLIENT LIST shows a subscriber), at most 2 s.
        bool again = false;
        for (int i = 0; i < 200 && !again; ++i) {
            again = srv.command(cmd("CLIENT", "LIST", "TYPE", "pubsub")).find("sub=1") != std::string::npos;
            if (!again)
                co_await pause(10ms);
        }
        REQUIRE_MESSAGE(again, "the waiter did not subscribe again within 2 s");
        const auto released_at = std::chrono::steady_clock::now();
        co_await held->release();
        const bool told = co_await granted.wait(3s);
        REQUIRE(told);
        REQUIRE(got);
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(granted_at - released_at).count();
        MESSAGE("granted " << ms << " ms after the release, behind a cut subscription");
        CHECK(ms < 500);
        co_await got->release();
        const bool clean = co_await only_counter_left(srv, n);
        CHECK(clean);
    });
}

// A holder whose client is closed renews no more: its leases come back after its TTL, to a waiter
// for all of them, with a higher token. And with nobody left, every key but the counter expires
// by itself (a second after the last lease).
TEST_CASE("semaphore: a crashed holder's leases come back after its TTL")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const sem_names n(unique_key("crashed"));
        constexpr auto lease_ttl = 500ms;
        zkcoro::redis_client a(ex, srv.url()), b(ex, srv.url());
        zkcoro::redis_semaphore sa(a, n.key, 3, sem_opts(lease_ttl));
        zkcoro::redis_semaphore sb(b, n.key, 3, sem_opts(lease_ttl, 3000ms));
        std::int64_t crashed_token = 0;
        {
            auto held = co_await sa.acquire(3, 1s);
            REQUIRE(held);
            crashed_token = held->fencing_token();
            a.close();  // no renewal, no release
        }
        const auto t0 = std::chrono::steady_clock::now();
        auto g = co_await sb.acquire(3, 3s);
        REQUIRE(g);
        const auto took = ms_since(t0);
        MESSAGE("3 leases granted " << took << " ms after their holder's client closed (TTL " << lease_ttl.count()
                                    << " ms)");
        CHECK(took < lease_ttl.count() + 400);
        CHECK(g->fencing_token() > crashed_token);
        // Now b crashes too: nobody is left to clean up; the keys expire by themselves.
        b.close();
        const auto t1 = std::chrono::steady_clock::now();
        const bool gone = co_await only_counter_left(srv, n, lease_ttl + 2000ms);
        CHECK_MESSAGE(gone, "keys left after the holders crashed: " << existing(srv, n).size());
        MESSAGE("every key but the counter gone " << ms_since(t1) << " ms after the last holder's client closed");
    });
}

// A holder in a child process killed with SIGKILL: its 2 leases (of 2) come back after its TTL.
TEST_CASE("semaphore: a holder process killed with SIGKILL gives its leases back after its TTL")
{
    auto& srv = shared_redis();
    const sem_names n(unique_key("killed"));
    constexpr auto lease_ttl = 600ms;
    int report[2];
    REQUIRE(::pipe(report) == 0);
    const pid_t child = ::fork();
    if (child == 0) {
        // The child takes both leases, reports its token and waits to be killed (at most 15 s);
        // it never returns into the test runner.
        ::close(report[0]);
        try {
            asio::io_context cio;
            zkcoro::redis_client rc(cio.get_executor(), srv.url());
            zkcoro::redis_semaphore s(rc, n.key, 2, sem_opts(lease_ttl));
            asio::co_spawn(cio, [&]() -> asio::awaitable<void> {
                auto g = co_await s.acquire(2, 5s);
                if (!g)
                    std::_Exit(1);
                const std::int64_t token = g->fencing_token();
                (void)!::write(report[1], &token, sizeof token);
                asio::steady_timer t(co_await asio::this_coro::executor, 15s);
                co_await t.async_wait(asio::use_awaitable);
            }, asio::detached);
            cio.run_for(16s);
        } catch (...) {
        }
        std::_Exit(0);
    }
    ::close(report[1]);
    REQUIRE(child > 0);
    struct reap {
        pid_t pid;
        int fd;
        ~reap()
        {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
            ::close(fd);
        }
    } reaper{child, report[0]};
    pollfd p{report[0], POLLIN, 0};
    REQUIRE_MESSAGE(::poll(&p, 1, 10000) == 1, "the child reported no grant within 10 s");
    std::int64_t child_token = 0;
    REQUIRE(::read(report[0], &child_token, sizeof child_token) == sizeof child_token);
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_client rc(ex, srv.url());
        zkcoro::redis_semaphore s(rc, n.key, 2, sem_opts(lease_ttl));
        auto none = co_await s.try_acquire(1);
        CHECK_FALSE(none);
        ::kill(child, SIGKILL);
        const auto t0 = std::chrono::steady_clock::now();
        auto g = co_await s.acquire(2, 3s);
        REQUIRE(g);
        const auto took = ms_since(t0);
        MESSAGE("2 leases granted " << took << " ms after their holder was SIGKILLed (TTL " << lease_ttl.count()
                                    << " ms)");
        CHECK(took < lease_ttl.count() + 500);
        CHECK(g->fencing_token() > child_token);
        co_await g->release();
        const bool clean = co_await only_counter_left(srv, n);
        CHECK(clean);
    });
}

// The holders' key deleted under a holder (an operator, a FLUSHDB) is found by its next renewal:
// the guard reports the loss.
TEST_CASE("semaphore: a holder whose leases are deleted under it is told by its lost signal")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const sem_names n(unique_key("lost"));
        zkcoro::redis_client rc(ex, srv.url());
        zkcoro::redis_semaphore s(rc, n.key, 2, sem_opts(600ms));
        auto g = co_await s.acquire(2, 1s);
        REQUIRE(g);
        CHECK_FALSE(g->lost());
        srv.command(cmd("DEL", n.leases));
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
        co_await g->release();
        const bool clean = co_await only_counter_left(srv, n);
        CHECK(clean);
    });
}

// A waiter that times out, and one that is cancelled, leave the queue; a cancelled head's leaving
// tells the waiter behind it; nothing but the counter remains.
TEST_CASE("semaphore: deadline and cancellation leave nothing behind")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const sem_names n(unique_key("leave"));
        zkcoro::redis_client rc(ex, srv.url());
        zkcoro::redis_semaphore s(rc, n.key, 2, sem_opts(3000ms));
        auto held = co_await s.acquire(1, 1s);
        REQUIRE(held);
        // The deadline: 2 leases asked, 1 free.
        const auto t0 = std::chrono::steady_clock::now();
        auto timed_out = co_await s.acquire(2, 300ms);
        CHECK_FALSE(timed_out);
        CHECK(ms_since(t0) >= 290);
        bool empty = co_await queued(srv, n, 0);
        CHECK_MESSAGE(empty, "a timed-out waiter stayed in the queue");
        CHECK(count_of(srv, cmd("ZCARD", n.leases)) == 1);
        // Cancellation of the head (2 leases), with a waiter for 1 behind it: its leaving lets
        // the one behind in at once (1 lease is free).
        asio::cancellation_signal stop;
        error_code cancelled_ec;
        bool cancelled_done = false;
        asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
            auto [ec, g] = co_await s.async_acquire(
                2, 10s, asio::bind_cancellation_slot(stop.slot(), asio::as_tuple(asio::use_awaitable)));
            cancelled_ec = ec;
            cancelled_done = true;
        }, asio::detached);
        bool one = co_await queued(srv, n, 1);
        REQUIRE(one);
        std::optional<zkcoro::guard> behind;
        event granted(ex);
        asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
            behind = co_await s.acquire(1, 10s);
            granted.fire();
        }, asio::detached);
        bool two = co_await queued(srv, n, 2);
        REQUIRE(two);
        const auto t1 = std::chrono::steady_clock::now();
        stop.emit(asio::cancellation_type::terminal);
        const bool got = co_await granted.wait(3s);
        REQUIRE(got);
        REQUIRE(behind);
        MESSAGE("the waiter behind a cancelled head was granted " << ms_since(t1) << " ms after the cancellation");
        CHECK(ms_since(t1) < 500);
        CHECK(cancelled_done);
        CHECK(cancelled_ec == asio::error::operation_aborted);
        empty = co_await queued(srv, n, 0);
        CHECK(empty);
        co_await behind->release();
        co_await held->release();
        const bool clean = co_await only_counter_left(srv, n);
        CHECK(clean);
    });
}

// Bad keys, TTLs and counts, keys of another type, and a max_leases other than the one the
// holders use: each fails with a code that says which, and writes nothing.
TEST_CASE("semaphore: bad input gets a precise error and writes nothing")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_client rc(ex, srv.url());
        // (Each result apart: no co_await inside a condition, see docs/building.md, Compilers.)
        zkcoro::redis_semaphore empty(rc, "", 2, sem_opts(1000ms));
        const auto empty_ec = co_await code_of(empty, 1);
        CHECK(empty_ec == redis_errc::bad_key);
        zkcoro::redis_semaphore long_key(rc, std::string(1025, 'k'), 2, sem_opts(1000ms));
        const auto long_ec = co_await code_of(long_key, 1);
        CHECK(long_ec == redis_errc::bad_key);
        const sem_names n(unique_key("bad"));
        zkcoro::redis_semaphore short_ttl(rc, n.key, 2, sem_opts(50ms));
        const auto ttl_ec = co_await code_of(short_ttl, 1);
        CHECK(ttl_ec == redis_errc::bad_ttl);
        zkcoro::redis_semaphore short_wait(rc, n.key, 2, sem_opts(1000ms, 50ms));
        const auto wait_ec = co_await code_of(short_wait, 1);
        CHECK(wait_ec == redis_errc::bad_ttl);
        zkcoro::redis_semaphore none(rc, n.key, 0, sem_opts(1000ms));
        const auto none_ec = co_await code_of(none, 1);
        CHECK(none_ec == redis_errc::bad_leases);
        zkcoro::redis_semaphore two(rc, n.key, 2, sem_opts(1000ms));
        const auto zero_ec = co_await code_of(two, 0);
        CHECK(zero_ec == redis_errc::bad_leases);
        const auto three_ec = co_await code_of(two, 3);
        CHECK(three_ec == redis_errc::bad_leases);
        // The throwing acquire says the same.
        bool threw = false;
        try {
            (void)co_await two.acquire(3);
        } catch (const boost::system::system_error& e) {
            threw = e.code() == redis_errc::bad_leases;
        }
        CHECK(threw);
        CHECK(existing(srv, n).empty());
        // A key of another type.
        srv.command(cmd("SET", n.queue, "not a list"));
        const auto type_ec = co_await code_of(two, 1);
        CHECK(type_ec == redis_errc::wrong_type);
        CHECK(existing(srv, n) == std::vector<std::string>{n.queue});
        srv.command(cmd("DEL", n.queue));
        // Another max_leases than the holders': refused, with the server's text; the holder's
        // lease and the stored count untouched, nothing queued.
        auto held = co_await two.acquire(1, 1s);
        REQUIRE(held);
        zkcoro::redis_semaphore four(rc, n.key, 4, sem_opts(1000ms));
        const auto fencing_before = srv.command(cmd("GET", n.fencing));
        const auto mismatch_ec = co_await code_of(four, 1);
        CHECK(mismatch_ec == redis_errc::leases_mismatch);
        std::string what;
        try {
            (void)co_await four.acquire(1, 1s);
        } catch (const boost::system::system_error& e) {
            what = e.what();
        }
        MESSAGE("a mismatched max_leases: " << what);
        CHECK(what.find("ZKMAXLEASES") != std::string::npos);
        CHECK(srv.command(cmd("GET", n.max)) == "2");
        CHECK(srv.command(cmd("GET", n.fencing)) == fencing_before);
        CHECK(count_of(srv, cmd("ZCARD", n.leases)) == 1);
        CHECK(count_of(srv, cmd("EXISTS", n.queue)) == 0);
        co_await held->release();
        const bool clean = co_await only_counter_left(srv, n);
        CHECK(clean);
    });
}
