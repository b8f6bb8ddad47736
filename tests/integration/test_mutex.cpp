// The reentrant mutex against a real ZooKeeper: exclusion, reentrancy per task, timeouts and
// cancellation without orphans, fencing, participants, the lost policies, no herd.
#include "any_backend.hpp"
#include "common.hpp"
#include "deleted_waiter.hpp"

#include <unistd.h>

#include <tcp_proxy.hpp>

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <thread>
#include <type_traits>

using namespace zktest;
using namespace zkcoro;
using asio::awaitable;

namespace {

mutex_options no_handoff()
{
    mutex_options o;
    o.local_handoff = false;
    return o;
}

// Watches the server holds ("Total watches:N" of the wchs four-letter word); -1 if unknown.
long server_watches()
{
    auto text = shared_server().four_letter("wchs");
    auto pos = text.find("Total watches:");
    return pos == std::string::npos ? -1 : std::stol(text.substr(pos + 14));
}

// A task of its own (co_spawn'd by the caller): writes its id, then acquires (wait) or tries.
awaitable<std::optional<guard>> in_child(mutex& m, owner_id* id, bool wait)
{
    *id = co_await this_task::id();
    if (wait)
        co_return co_await m.acquire();
    co_return co_await m.try_acquire();
}

}  // namespace

// One holder at a time, Curator's node name, and nothing left after release.
TEST_CASE("acquire and release")
{
    run_with_clients({.name = "mutex"}, [&](fixture& f) -> awaitable<void> {
        auto& c = f.client();
        auto path = f.path + "/deep/lock";
        mutex m(c, path);
        auto g = co_await m.acquire();
        CHECK(g.valid());
        CHECK(g.session_id() == c.session().id);
        CHECK(g.fencing_token() > 0);
        CHECK(g.node_path().rfind(path + "/_c_", 0) == 0);
        // _c_ + 36-character UUID + "-lock-" + 10 digits
        CHECK(node_name(g.node_path()).size() == 3 + 36 + 6 + 10);
        CHECK(node_name(g.node_path()).substr(39, 6) == "-lock-");
        auto d = co_await c.async_get_data(g.node_path());
        auto who = parse_holder_data(d.data);  // host=... pid=... program=...
        REQUIRE(who);
        CHECK(who->pid == ::getpid());
        CHECK(who->program == "integration_tests");  // this program (tests/meson.build)
        CHECK(who->label.empty());
        auto parts = co_await m.async_participants();
        REQUIRE(parts.size() == 1);
        CHECK(parts[0].path == g.node_path());
        CHECK(parts[0].session_id == c.session().id);
        co_await g.release();
        CHECK_FALSE(g.valid());
        CHECK((co_await children_of(c, path)).empty());
    });
}

// 20 tasks, 5 rounds each, one io_context: never two inside, every round done.
TEST_CASE("mutual exclusion among tasks of one process")
{
    run_with_clients({.name = "excl", .limit = 90s}, [&](fixture& f) -> awaitable<void> {
        auto& c = f.client();
        mutex m(c, f.path);
        int inside = 0, max_inside = 0, done = 0;
        std::int64_t last_token = 0;
        bool tokens_increase = true;
        auto ex = co_await asio::this_coro::executor;
        for (int t = 0; t < 20; ++t)
            asio::co_spawn(ex, [&]() -> awaitable<void> {
                for (int i = 0; i < 5; ++i) {
                    auto g = co_await m.acquire();
                    max_inside = std::max(max_inside, ++inside);
                    tokens_increase = tokens_increase && g.fencing_token() > last_token;
                    last_token = g.fencing_token();
                    asio::steady_timer pause(ex, 1ms);
                    co_await pause.async_wait(asio::use_awaitable);
                    --inside;
                    co_await g.release();
                    ++done;
                }
            }, asio::detached);
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return done == 100; }, 60000ms));
        CHECK(max_inside == 1);
        CHECK(tokens_increase);
    });
}

// The same task: one node, N acquisitions, N guards. Another task cannot take the lock while the
// first holds it (two tasks on one thread are different owners), but it may release one of the
// first task's guards: the guard is the ownership, and the count it belongs to goes down.
TEST_CASE("reentrancy is per task")
{
    run_with_clients({.name = "reent"}, [&](fixture& f) -> awaitable<void> {
        auto& c = f.client();
        auto& path = f.path;
        mutex m(c, path);
        auto me = co_await this_task::id();
        auto g1 = co_await m.acquire();
        auto g2 = co_await m.acquire();
        auto g3 = co_await m.acquire();
        CHECK(g1.node_path() == g2.node_path());
        CHECK(g2.node_path() == g3.node_path());
        CHECK(g1.fencing_token() == g3.fencing_token());
        CHECK(m.hold_count(me) == 3);
        CHECK((co_await children_of(c, path)).size() == 1);

        // Another task on the same thread: cannot acquire, can release a guard it was given.
        bool other_done = false;
        error_code other_release = make_error_code(client_errc::invalid_argument);
        bool other_got_it = true;
        asio::co_spawn(co_await asio::this_coro::executor, [&]() -> awaitable<void> {
            auto g = co_await m.try_acquire();
            other_got_it = g.has_value();
            auto [ec] = co_await g1.async_release(asio::as_tuple(asio::use_awaitable));
            other_release = ec;
            other_done = true;
        }, asio::detached);
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return other_done; }));
        CHECK_FALSE(other_got_it);
        CHECK_FALSE(other_release);
        CHECK_FALSE(g1.valid());
        CHECK(m.hold_count(me) == 2);
        CHECK((co_await children_of(c, path)).size() == 1);

        co_await g3.release();
        CHECK((co_await children_of(c, path)).size() == 1);
        co_await g2.release();
        CHECK(m.hold_count(me) == 0);
        CHECK((co_await children_of(c, path)).empty());
    });
}

// A guard kept after the task that acquired it ended (a child's guard its parent keeps) is no
// hold of any later task: later tasks get other ids and wait for it like anyone else. Found by the
// simulation: task ids were frame addresses, Asio gives a new task the frames of the one that just
// ended, and the new task was granted the held lock as a reentrant acquisition.
TEST_CASE("a guard kept after its task ended lends no hold to a later task")
{
    run_with_clients({.name = "ended"}, [&](fixture& f) -> awaitable<void> {
        auto& c = f.client();
        auto& path = f.path;
        mutex m(c, path);
        auto ex = co_await asio::this_coro::executor;
        owner_id child = 0;
        auto kept = co_await asio::co_spawn(ex, in_child(m, &child, true), asio::use_awaitable);
        REQUIRE(kept.has_value());
        CHECK(m.hold_count(child) == 1);
        CHECK(m.hold_count(co_await this_task::id()) == 0);
        int same_id = 0, granted = 0;
        for (int i = 0; i < 6; ++i) {
            owner_id later = 0;
            auto g = co_await asio::co_spawn(ex, in_child(m, &later, false), asio::use_awaitable);
            same_id += later == child ? 1 : 0;
            granted += g.has_value() ? 1 : 0;
        }
        CHECK(same_id == 0);
        CHECK(granted == 0);
        CHECK((co_await children_of(c, path)).size() == 1);
        co_await kept->release();
        CHECK((co_await children_of(c, path)).empty());
    });
}

// One task hopping between the threads of a 4-thread io_context stays one owner.
TEST_CASE("a task that moves between threads is one owner")
{
    asio::io_context ioc(4);
    asio::io_context setup;
    client c(ioc.get_executor(), test_config());
    auto path = unique_path("hop");
    mutex m(c, path);
    std::atomic<bool> finished{false};
    std::set<std::thread::id> threads;
    std::size_t nodes = 0, count = 0;
    asio::co_spawn(ioc, [&]() -> awaitable<void> {
        co_await c.async_connect();
        std::vector<guard> gs;
        for (int i = 0; i < 20; ++i) {
            gs.push_back(co_await m.acquire());
            threads.insert(std::this_thread::get_id());
            // A timer completes on whichever pool thread runs the reactor: a likely hop.
            asio::steady_timer hop(co_await asio::this_coro::executor, 2ms);
            co_await hop.async_wait(asio::use_awaitable);
        }
        nodes = (co_await children_of(c, path)).size();
        count = m.hold_count(co_await this_task::id());
        for (auto& g : gs)
            co_await g.release();
        finished = true;
    }, asio::detached);
    std::vector<std::thread> pool;
    for (int i = 0; i < 4; ++i)
        pool.emplace_back([&] {
            for (int k = 0; k < 3000 && !finished; ++k)
                ioc.run_for(10ms);
        });
    for (auto& t : pool)
        t.join();
    REQUIRE(finished);
    CHECK(nodes == 1);
    CHECK(count == 20);
    MESSAGE("the task ran on " << threads.size() << " threads");
    CHECK(threads.size() >= 2);
}

// Timeout and try_acquire give an empty result, leave no node, and do not disturb the holder.
TEST_CASE("timeout leaves no node")
{
    run_with_clients({.name = "timeout", .clients = 2}, [&](fixture& f) -> awaitable<void> {
        auto [a, b] = f.clients<2>();
        auto& path = f.path;
        mutex ma(a, path), mb(b, path);
        auto g = co_await ma.acquire();
        auto t0 = std::chrono::steady_clock::now();
        auto r = co_await mb.acquire(300ms);
        auto waited = std::chrono::steady_clock::now() - t0;
        CHECK_FALSE(r.has_value());
        CHECK(waited >= 300ms);
        CHECK_FALSE((co_await mb.try_acquire()).has_value());
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return (co_await children_of(a, path)).size() == 1; }));
        CHECK_FALSE(g.lost());
        co_await g.release();
        auto g2 = co_await mb.acquire(5s);
        CHECK(g2.has_value());
        auto mm = mb.metrics();
        CHECK(mm.timeouts == 2);
        CHECK(mm.acquires == 1);
        CHECK(mm.errors == 0);
        CHECK(mm.wait.count() == 1);
    });
}

// Cancelling a waiting acquire completes it with operation_aborted, leaves no node, and the
// next waiter behind it is not woken by mistake (it still waits for the real holder).
TEST_CASE("cancellation leaves no node and wakes nobody")
{
    run_with_clients({.name = "cancel", .clients = 3}, [&](fixture& f) -> awaitable<void> {
        auto [a, b, w] = f.clients<3>();
        auto& path = f.path;
        mutex ma(a, path), mb(b, path), mw(w, path);
        auto g = co_await ma.acquire();
        asio::cancellation_signal sig;
        error_code b_ec;
        bool b_done = false;
        mb.async_acquire(1, std::chrono::hours(1), asio::bind_cancellation_slot(sig.slot(), [&](error_code ec, std::optional<guard>) {
            b_ec = ec;
            b_done = true;
        }));
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return (co_await children_of(a, path)).size() == 2; }));
        bool w_done = false;
        std::optional<guard> w_guard;
        mw.async_acquire(2, std::chrono::hours(1), [&](error_code, std::optional<guard> r) {
            w_guard = std::move(r);
            w_done = true;
        });
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return (co_await children_of(a, path)).size() == 3; }));
        auto before = w.stats().watch_events;
        sig.emit(asio::cancellation_type::terminal);
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return b_done; }));
        CHECK(b_ec == asio::error::operation_aborted);
        CHECK(mb.metrics().cancellations == 1);
        CHECK(mb.metrics().acquires == 0);
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return (co_await children_of(a, path)).size() == 2; }));
        // The waiter behind b was woken by b's deletion (its predecessor) but must not hold.
        CHECK_FALSE(w_done);
        MESSAGE("watch events at w: " << (w.stats().watch_events - before));
        co_await g.release();
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return w_done; }));
        CHECK(w_guard.has_value());
    });
}

// Cancelled before the replies of its first round trip (our node's create and the listing) are
// in: the uncontended acquisition decides without a coroutine, a contended one goes on in the
// queue walk's; either way it completes with operation_aborted, its node goes, and the lock
// works on. The emission comes before this task yields, so before any reply.
TEST_CASE("cancellation within the first round trip")
{
    run_with_clients({.name = "cancelfirst", .clients = 2}, [&](fixture& f) -> awaitable<void> {
        auto [a, b] = f.clients<2>();
        auto& path = f.path;
        // The lock path exists from the start, and stays (a container could go between rounds):
        // the first round's create succeeds, so the uncontended acquisition decides on its own.
        co_await a.async_create(path, "", create_mode::persistent);
        mutex ma(a, path), mb(b, path);
        for (int contended = 0; contended < 2; ++contended) {
            std::optional<guard> held;
            if (contended)
                held = co_await ma.acquire();
            asio::cancellation_signal sig;
            error_code ec;
            bool done = false;
            std::optional<guard> got;
            mb.async_acquire(7, std::chrono::hours(1),
                             asio::bind_cancellation_slot(sig.slot(), [&](error_code e, std::optional<guard> r) {
                                 ec = e;
                                 got = std::move(r);
                                 done = true;
                             }));
            sig.emit(asio::cancellation_type::terminal);
            CHECK(co_await eventually([&]() -> awaitable<bool> { co_return done; }));
            CHECK(ec == asio::error::operation_aborted);
            CHECK_FALSE(got.has_value());
            const std::size_t left = contended ? 1 : 0;
            CHECK(co_await eventually([&]() -> awaitable<bool> { co_return (co_await children_of(a, path)).size() == left; }));
            if (held)
                co_await held->release();
            auto g = co_await mb.acquire(5s);
            REQUIRE(g.has_value());
            co_await g->release();
        }
        CHECK(mb.metrics().cancellations == 2);
        CHECK(mb.metrics().acquires == 2);
        co_await a.async_remove(path, -1);
    });
}

// Issue 20, item 11: parents made by an acquisition that then failed stayed for good (ZooKeeper
// removes an empty container only once it has had a child). Placed by events: the client goes
// through a proxy that holds every chunk back 150 ms; the acquisition is cancelled once an
// observer sees the lock path on the server, before the lock node's create can get there.
TEST_CASE("a failed acquisition leaves no parent it created")
{
    tcp_proxy proxy("127.0.0.1", shared_server().port());
    run_with_clients({.name = "parents", .session_timeout = 10000ms, .connect = proxy.address()},
                     [&](fixture& f) -> awaitable<void> {
        auto& c = f.client();
        client observer(co_await asio::this_coro::executor, test_config());
        co_await observer.async_connect();
        const std::string top = f.path + "/made", lock_path = top + "/by/us";
        co_await c.async_create(f.path, "", create_mode::persistent);
        proxy.set_delay(150ms);
        mutex m(c, lock_path);
        asio::cancellation_signal sig;
        error_code ec;
        bool done = false;
        m.async_acquire(1, std::chrono::hours(1), asio::bind_cancellation_slot(sig.slot(), [&](error_code e, std::optional<guard>) {
            ec = e;
            done = true;
        }));
        const bool made = co_await eventually([&]() -> awaitable<bool> {
            co_return (co_await observer.async_exists(lock_path)).stat.has_value();
        });
        REQUIRE_MESSAGE(made, "the acquisition never created the lock path");
        CHECK_MESSAGE(!done, "the acquisition ended before the test placed its cancellation");
        sig.emit(asio::cancellation_type::terminal);
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return done; }));
        CHECK(ec == asio::error::operation_aborted);
        const bool gone = co_await eventually([&]() -> awaitable<bool> {
            co_return !(co_await observer.async_exists(top)).stat.has_value();
        });
        CHECK_MESSAGE(gone, top << " (made by the failed acquisition) is still there");
        CHECK((co_await observer.async_exists(f.path)).stat.has_value());  // not ours: it stays
        proxy.set_delay(0ms);
        co_await c.async_remove(f.path);
        observer.close();
    });
}

// 50 waiters in 50 sessions: a release wakes exactly one of them.
TEST_CASE("no herd: one release wakes one waiter")
{
    constexpr int n = 50;
    // Client 0 holds the lock; clients 1..n wait for it.
    run_with_clients({.name = "herd", .clients = n + 1, .limit = 90s}, [&](fixture& f) -> awaitable<void> {
        auto& holder = f.client(0);
        auto& path = f.path;
        mutex mh(holder, path);
        auto g = co_await mh.acquire();
        std::vector<std::unique_ptr<mutex>> mutexes;
        int acquired = 0;
        auto watches_before = server_watches();
        std::vector<guard> guards;
        for (int i = 1; i <= n; ++i)
            mutexes.push_back(std::make_unique<mutex>(f.client(i), path));
        for (int i = 0; i < n; ++i)
            mutexes[i]->async_acquire(100 + i, std::chrono::minutes(1), [&](error_code ec, std::optional<guard> r) {
                if (!ec && r) {
                    ++acquired;
                    guards.push_back(std::move(*r));
                }
            });
        CHECK(co_await eventually([&]() -> awaitable<bool> {
            co_return (co_await children_of(holder, path)).size() == n + 1;
        }, 20000ms));
        // Every waiter's watch is in place on the server (4lw wchs counts them).
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return server_watches() >= watches_before + n; },
                                  20000ms));
        std::uint64_t before = 0;
        for (int i = 1; i <= n; ++i)
            before += f.client(i).stats().watch_events;
        co_await g.release();
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return acquired == 1; }));
        // Give any stray wake-up time to show.
        asio::steady_timer t(co_await asio::this_coro::executor, 300ms);
        co_await t.async_wait(asio::use_awaitable);
        std::uint64_t after = 0;
        for (int i = 1; i <= n; ++i)
            after += f.client(i).stats().watch_events;
        CHECK(after - before == 1);
        CHECK(acquired == 1);
        for (int i = 1; i <= n; ++i)
            f.client(i).close();
    });
}

// Fencing tokens strictly increase across grants in several sessions.
TEST_CASE("fencing tokens increase across sessions")
{
    run_with_clients({.name = "fence", .clients = 2}, [&](fixture& f) -> awaitable<void> {
        auto [a, b] = f.clients<2>();
        auto& path = f.path;
        mutex ma(a, path), mb(b, path);
        std::int64_t last = 0;
        for (int i = 0; i < 10; ++i) {
            auto& m = (i % 2) ? mb : ma;
            auto g = co_await m.acquire();
            CHECK(g.fencing_token() > last);
            last = g.fencing_token();
            co_await g.release();
        }
    });
}

// A guard destroyed without release frees the lock in the background.
TEST_CASE("dropping a guard releases")
{
    run_with_clients({.name = "drop"}, [&](fixture& f) -> awaitable<void> {
        auto& a = f.client();
        auto& path = f.path;
        mutex m(a, path);
        {
            auto g = co_await m.acquire();
        }
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return (co_await children_of(a, path)).empty(); }));
        auto g2 = co_await m.try_acquire();
        CHECK(g2.has_value());
    });
}

// Policy deadline: a cut shorter than the deadline keeps the lock; no signal.
TEST_CASE("lost policy deadline: a short cut keeps the lock")
{
    tcp_proxy proxy("127.0.0.1", shared_server().port());
    run_with_clients({.name = "short-cut", .connect = proxy.address()}, [&](fixture& f) -> awaitable<void> {
        auto& c = f.client();
        mutex m(c, f.path);
        auto g = co_await m.acquire();
        proxy.set_blackhole(true);
        CHECK(co_await wait_for_state(c, session_state::suspended, 5000ms));
        proxy.set_blackhole(false);
        CHECK(co_await wait_for_state(c, session_state::connected, 5000ms));
        asio::steady_timer t(co_await asio::this_coro::executor, 200ms);
        co_await t.async_wait(asio::use_awaitable);
        CHECK_FALSE(g.lost());
        CHECK((co_await c.async_exists(g.node_path())).stat.has_value());
        co_await g.release();
    });
}

// Policy deadline: a long partition fires the lost signal before another session can acquire.
TEST_CASE("lost policy deadline: a long partition loses the lock before anyone else gets it")
{
    tcp_proxy proxy("127.0.0.1", shared_server().port());
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> awaitable<void> {
        client c(ioc.get_executor(), test_config(proxy.address(), 2000ms));
        client other(ioc.get_executor(), test_config(server_address(), 2000ms));
        co_await c.async_connect();
        co_await other.async_connect();
        auto path = unique_path("partition");
        mutex m(c, path), mo(other, path);
        auto g = co_await m.acquire();
        std::chrono::steady_clock::time_point lost_at{}, acquired_at{};
        g.async_wait_lost([&](error_code ec) {
            if (ec == client_errc::lock_lost)
                lost_at = std::chrono::steady_clock::now();
        });
        mo.async_acquire(7, std::chrono::seconds(20), [&](error_code, std::optional<guard> r) {
            if (r)
                acquired_at = std::chrono::steady_clock::now();
        });
        proxy.set_blackhole(true);
        CHECK(co_await eventually([&]() -> awaitable<bool> {
            co_return acquired_at != std::chrono::steady_clock::time_point{};
        }, 15000ms));
        REQUIRE(lost_at != std::chrono::steady_clock::time_point{});
        CHECK(g.lost());
        CHECK(lost_at < acquired_at);
        MESSAGE("lost " << std::chrono::duration_cast<std::chrono::milliseconds>(acquired_at - lost_at).count()
                        << " ms before the other session acquired");
        proxy.set_blackhole(false);
        // Releasing a lost lock is a successful no-op.
        auto [ec] = co_await g.async_release(asio::as_tuple(asio::use_awaitable));
        CHECK_FALSE(ec);
    });
}

// Policy deadline, with a busy event loop: the loop is blocked past the moment the session may have
// expired (the policy's deadline), so the monitor's timer has not run when the holder releases.
// The node must not be handed to the task of ours that waits in memory (the server may have
// expired the session and granted the lock to someone else): the holder's guard says lost, and
// the waiter takes the lock anew on the server. The ZooKeeper twin of redis_lock's "a hold past
// its loss bound is not handed over in memory when the event loop ran late".
TEST_CASE("lost policy deadline: a hold past the deadline is not handed over in memory when the event loop ran late")
{
    tcp_proxy proxy("127.0.0.1", shared_server().port());
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> awaitable<void> {
        auto ex = ioc.get_executor();
        std::vector<std::string> lines;
        auto cfg = test_config(proxy.address(), 2000ms);
        cfg.log = [&](log_level, std::string_view text) {
            if (text.find("past its loss bound") != std::string_view::npos)
                lines.emplace_back(text);
        };
        client c(ex, cfg);
        co_await c.async_connect();
        auto path = unique_path("late-loop");
        mutex m(c, path);
        auto g = co_await m.acquire(5s);
        REQUIRE(g);
        const auto first = g->fencing_token();
        const auto held = g->node_path();
        std::optional<guard> second;
        bool done = false;
        asio::co_spawn(ex, [&]() -> awaitable<void> {
            second = co_await m.acquire(15s);
            done = true;
        }, asio::detached);
        for (int i = 0; i < 5; ++i)  // the other task runs up to its wait in memory
            co_await asio::post(ex, asio::use_awaitable);
        REQUIRE_FALSE(done);
        proxy.set_blackhole(true);
        REQUIRE(co_await wait_for_state(c, session_state::suspended, 5000ms));
        // The policy's deadline: last heard + session timeout - a fifth of it (the default margin).
        const auto timeout = c.session_timeout();
        const auto deadline = c.last_heard() + timeout - timeout / 5;
        std::this_thread::sleep_until(deadline + 200ms);  // the loop is blocked: no timer runs
        CHECK_MESSAGE(g->lost(), "a guard past its policy's deadline (the session may have expired) says it holds");
        co_await g->release();
        CHECK(m.metrics().local_handoffs == 0);
        CHECK(m.metrics().losses == 1);
        CHECK(lines.size() == 1);
        proxy.set_blackhole(false);
        REQUIRE_MESSAGE(co_await eventually([&]() -> awaitable<bool> { co_return done; }, 12000ms),
                        "the waiter was not served within 12 s of the reconnection");
        REQUIRE(second);
        CHECK_FALSE(second->lost());
        CHECK(second->node_path() != held);
        CHECK((co_await c.async_exists(second->node_path())).stat.has_value());
        CHECK(second->fencing_token() > first);
        co_await second->release();
        auto kids = co_await c.async_get_children(path);
        CHECK_MESSAGE(kids.children.empty(), "nodes left under the lock path: " << kids.children.size());
    });
}

// Policy suspended: the signal fires at the first disconnection.
TEST_CASE("lost policy suspended fires at the disconnection")
{
    tcp_proxy proxy("127.0.0.1", shared_server().port());
    run_with_clients({.name = "suspended", .connect = proxy.address()}, [&](fixture& f) -> awaitable<void> {
        auto& c = f.client();
        mutex_options o;
        o.policy = lost_policy::suspended;
        mutex m(c, f.path, o);
        auto g = co_await m.acquire();
        bool fired = false;
        asio::steady_timer never(co_await asio::this_coro::executor, std::chrono::hours(1));
        never.async_wait(asio::bind_cancellation_slot(g.lost_slot(), [&](boost::system::error_code ec) {
            fired = ec == asio::error::operation_aborted;
        }));
        proxy.cut();
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return fired; }));
        CHECK(g.lost());
    });
}

// Connection lost while the create is in flight: the protected name finds our node; exactly
// one node of ours, and the acquire succeeds. The fault is placed by events, not by timing: the
// proxy drops the server's replies on c's connection (mute_replies), the create reaches the server
// (the observer sees our node), and only then is the connection cut, so the reply is lost for
// sure. The recovery path must have run: its log line says it found the node by its name.
TEST_CASE("connection loss during create: no orphan, no double entry")
{
    tcp_proxy proxy("127.0.0.1", shared_server().port());
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> awaitable<void> {
        auto log = std::make_shared<test_log>();
        client c(ioc.get_executor(), test_config(proxy.address(), 4000ms, log));
        client observer(ioc.get_executor(), test_config());
        co_await c.async_connect();
        co_await observer.async_connect();
        auto path = unique_path("create-loss");
        co_await observer.async_create(path, "", create_mode::persistent);
        mutex m(c, path);
        auto lines_with = [&](const std::string& text) {
            std::lock_guard lk(log->m);
            return std::count_if(log->lines.begin(), log->lines.end(),
                                 [&](const auto& l) { return l.second.find(text) != std::string::npos; });
        };
        for (int round = 0; round < 5; ++round) {
            CAPTURE(round);
            const auto recovered = fmt::format("lock {}: the create's reply was lost; found our node", path);
            const auto seen_before = lines_with(recovered);
            proxy.mute_replies();  // c's connection: requests go up, replies are dropped
            std::optional<guard> g;
            error_code ec;
            bool done = false;
            m.async_acquire(50 + round, 10s, [&](error_code e, std::optional<guard> r) {
                ec = e;
                g = std::move(r);
                done = true;
            });
            // The create reached the server: our node is there.
            REQUIRE_MESSAGE(co_await eventually([&]() -> awaitable<bool> { co_return (co_await children_of(observer, path)).size() == 1; }),
                            "the create never reached the server");
            CHECK_FALSE(done);  // its reply was dropped
            proxy.cut();
            CHECK(co_await eventually([&]() -> awaitable<bool> { co_return done; }, 15000ms));
            CHECK_FALSE(ec);
            REQUIRE(g.has_value());
            CHECK_MESSAGE(lines_with(recovered) == seen_before + 1, "the recovery by the protected name did not run");
            auto ch = co_await children_of(observer, path);
            CHECK(ch.size() == 1);
            co_await g->async_release(asio::use_awaitable);
            CHECK(co_await eventually([&]() -> awaitable<bool> { co_return (co_await children_of(observer, path)).empty(); }));
        }
    }, 120s);
}

// A cancellation that reaches the walk while it waits for its connection (the create's reply was
// lost, the server cannot be reached) completes with operation_aborted: not ZSESSIONEXPIRED, not a
// time-out (found by the simulation: the walk read the end of the wait as a lost session). The
// node the create made goes once the client is back.
TEST_CASE("a cancellation while the walk waits for its connection is reported as a cancellation")
{
    tcp_proxy proxy("127.0.0.1", shared_server().port());
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> awaitable<void> {
        client c(ioc.get_executor(), test_config(proxy.address(), 10000ms));
        client observer(ioc.get_executor(), test_config());
        co_await c.async_connect();
        co_await observer.async_connect();
        auto path = unique_path("cancel-offline");
        co_await observer.async_create(path, "", create_mode::persistent);
        mutex m(c, path);
        proxy.mute_replies();  // the create goes up, its reply is dropped
        asio::cancellation_signal cancel;
        std::optional<guard> g;
        error_code ec;
        bool done = false;
        m.async_acquire(60, 20s, asio::bind_cancellation_slot(cancel.slot(), [&](error_code e, std::optional<guard> r) {
            ec = e;
            g = std::move(r);
            done = true;
        }));
        REQUIRE_MESSAGE(co_await eventually([&]() -> awaitable<bool> { co_return (co_await children_of(observer, path)).size() == 1; }),
                        "the create never reached the server");
        proxy.set_refuse(true);
        proxy.cut();
        // The client fails the create (connection loss) before it reports the state change: the
        // walk is then waiting for the connection.
        CHECK(co_await wait_for_state(c, session_state::suspended, 5000ms));
        CHECK_FALSE(done);
        cancel.emit(asio::cancellation_type::terminal);
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return done; }, 5000ms));
        CHECK_MESSAGE(ec == asio::error::operation_aborted, "completed with: " << ec.message());
        CHECK_FALSE(g.has_value());
        CHECK(m.metrics().timeouts == 0);
        proxy.set_refuse(false);
        CHECK(co_await wait_for_state(c, session_state::connected, 10000ms));
        CHECK_MESSAGE(co_await eventually([&]() -> awaitable<bool> { co_return (co_await children_of(observer, path)).empty(); }, 8000ms),
                      "the node the create made is still there");
    }, 60s);
}

// Expiry while holding: the lost signal fires (every policy, expired included).
TEST_CASE("session expiry loses the lock")
{
    run_with_clients({.name = "expiry", .session_timeout = 2000ms}, [&](fixture& f) -> awaitable<void> {
        auto& c = f.client();
        mutex_options o;
        o.policy = lost_policy::expired;
        mutex m(c, f.path, o);
        auto g = co_await m.acquire();
        REQUIRE(co_await expire_session(c));
        auto [ec] = co_await g.async_wait_lost(asio::as_tuple(asio::use_awaitable));
        CHECK(ec == client_errc::lock_lost);
        CHECK(g.lost());
        CHECK(m.metrics().losses == 1);
        // After loss the same task can take the lock again, on the new session.
        CHECK(co_await wait_for_state(c, session_state::connected));
        auto g2 = co_await m.acquire(5s);
        REQUIRE(g2.has_value());
        CHECK(g2->node_path() != g.node_path());
        CHECK(g2->fencing_token() > g.fencing_token());
    });
}

// Bad input: an invalid lock path is refused with its error.
TEST_CASE("invalid lock path")
{
    run_with_clients({}, [&](fixture& f) -> awaitable<void> {
        auto& c = f.client();
        mutex m(c, "locks/no-slash");
        auto [ec, g] = co_await m.async_acquire(1, 1s, asio::as_tuple(asio::use_awaitable));
        CHECK(ec == client_errc::invalid_path);
        CHECK_FALSE(g.has_value());
        // The throwing form carries the diagnostic: the path, the session, the server, what to do.
        std::string what;
        try {
            co_await m.acquire();
        } catch (const boost::system::system_error& e) {
            CHECK(e.code() == client_errc::invalid_path);
            what = e.what();
        }
        INFO(what);
        CHECK(what.find("acquire locks/no-slash") != std::string::npos);
        CHECK(what.find(fmt::format("session 0x{:x}", c.session().id)) != std::string::npos);
        CHECK(what.find("server 127.0.0.1:") != std::string::npos);
        CHECK(what.find("check_path()") != std::string::npos);
    });
}

// The public lock surface is basic_mutex: mutex is one (not an alias: `class mutex;` still
// declares it), it converts to it, and only mutex and redis_mutex make one.
static_assert(std::is_base_of_v<basic_mutex<zookeeper_lock_backend>, mutex>);
static_assert(!std::is_same_v<basic_mutex<zookeeper_lock_backend>, mutex>);
static_assert(std::is_convertible_v<mutex&, basic_mutex<zookeeper_lock_backend>&>);
static_assert(std::is_same_v<mutex::client_type, client>);
static_assert(!std::is_copy_constructible_v<basic_mutex<zookeeper_lock_backend>>);
static_assert(!std::is_constructible_v<basic_mutex<zookeeper_lock_backend>, std::shared_ptr<zkcoro::detail::lock_object>>);

// One function template over basic_mutex<Backend>& works on mutexes (the Redis run of the same
// template: tests/redis/test_redis_lock.cpp), and on a shared_mutex's write side.
TEST_CASE("the common lock surface: a function template over basic_mutex<Backend>&")
{
    run_with_clients({.name = "surface", .clients = 2}, [&](fixture& f) -> awaitable<void> {
        mutex a(f.client(0), f.path), b(f.client(1), f.path);
        co_await zktest::exercise_lock(a, b);
        shared_mutex sa(f.client(0), f.path + "-rw"), sb(f.client(1), f.path + "-rw");
        co_await zktest::exercise_lock(sa.writer(), sb.writer());
    });
}

// Fast path 1: an uncontended acquire is one round trip of two pipelined requests (create and
// list); once the object has seen the queue empty, the listing's children watch also covers our
// node's deletion, so holding costs no request; release is one delete.
TEST_CASE("fast path: create and list in one round trip")
{
    run_with_clients({.name = "fast1"}, [&](fixture& f) -> awaitable<void> {
        auto& c = f.client();
        auto& path = f.path;
        co_await c.async_create(path, "", create_mode::persistent);
        mutex m(c, path);
        co_await (co_await m.acquire()).release();  // the first acquire learns that the queue is empty
        auto before = c.stats().requests;
        auto g = co_await m.acquire();
        CHECK(c.stats().requests - before == 2);
        co_await g.release();
        CHECK(c.stats().requests - before == 3);
        co_await c.async_remove(path);
    });
}

// Fast path 2: a waiter whose predecessor was the head acquires on the deletion event with no
// re-read and no request after it: the watch on its own node went out with the predecessor's
// (it tells the waiter that its node still exists, and then serves the held node).
TEST_CASE("fast path: the head's deletion grants with no re-read")
{
    run_with_clients({.name = "fast2", .clients = 2}, [&](fixture& f) -> awaitable<void> {
        auto [a, b] = f.clients<2>();
        auto& path = f.path;
        mutex ma(a, path), mb(b, path);
        auto g = co_await ma.acquire();
        std::optional<guard> gb;
        mb.async_acquire(9, 10s, [&](error_code, std::optional<guard> r) { gb = std::move(r); });
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return (co_await children_of(a, path)).size() == 2; }));
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return b.stats().requests >= 4; }));
        // Sent is not answered: one more request on b's session returns only after the server has
        // processed its get_data (one session's requests run in order), so the watch is in place
        // before the release. (Without it, a release overtaking the get_data made b list again:
        // one request more, 1 run in about 20.)
        co_await b.async_exists(path);
        auto before = b.stats().requests;  // create, list, exists and get_data with watches, exists
        CHECK(before == 5);
        co_await g.release();
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return gb.has_value(); }));
        CHECK(b.stats().requests == before);
    });
}

// Acquisitions started from a thread that does not run the client's executor: the decision
// (queue in ZooKeeper, or wait in memory behind the task of ours that does) is taken once, under
// the lock object's lock, so the second waits in memory and gets the node by handoff. (This was
// the one route into a second, coroutine-based way of waiting, now gone.)
TEST_CASE("acquisitions started from another thread wait in memory behind the first")
{
    run_with_clients({.name = "xthread"}, [&](fixture& f) -> awaitable<void> {
        mutex m(f.client(), f.path);
        std::array<std::optional<guard>, 2> got;
        std::array<error_code, 2> errors;
        int done = 0;
        std::thread starter([&] {
            for (int i = 0; i < 2; ++i)
                m.async_acquire(owner_id(100 + i), 20s,
                                asio::bind_executor(f.executor(), [&, i](error_code ec, std::optional<guard> g) {
                                    errors[static_cast<std::size_t>(i)] = ec;
                                    got[static_cast<std::size_t>(i)] = std::move(g);
                                    ++done;
                                }));
        });
        starter.join();
        REQUIRE(co_await eventually([&]() -> awaitable<bool> { co_return done >= 1; }));
        CHECK(done == 1);  // the second waits
        REQUIRE(got[0].has_value());
        CHECK_FALSE(errors[0]);
        CHECK((co_await children_of(f.client(), f.path)).size() == 1);  // one znode for both
        auto node = got[0]->node_path();
        co_await got[0]->release();
        REQUIRE(co_await eventually([&]() -> awaitable<bool> { co_return done == 2; }));
        REQUIRE(got[1].has_value());
        CHECK_FALSE(errors[1]);
        CHECK(got[1]->node_path() == node);
        CHECK(m.local_handoffs() == 1);
        co_await got[1]->release();
    });
}

// Fast path 3: tasks of one process share one znode and pass the lock in memory, first come
// first served; fencing tokens still increase.
TEST_CASE("fast path: in-process handoff, FIFO, one znode")
{
    run_with_clients({.name = "fast3"}, [&](fixture& f) -> awaitable<void> {
        auto& c = f.client();
        auto& path = f.path;
        mutex m(c, path);
        auto ex = co_await asio::this_coro::executor;
        auto first = co_await m.acquire();
        std::vector<int> order;
        std::vector<std::int64_t> tokens{first.fencing_token()};
        int done = 0;
        for (int t = 0; t < 10; ++t) {
            asio::co_spawn(ex, [&, t]() -> awaitable<void> {
                auto g = co_await m.acquire();
                order.push_back(t);
                tokens.push_back(g.fencing_token());
                co_await g.release();
                ++done;
            }, asio::detached);
            // Let task t queue before task t+1 starts.
            co_await asio::post(ex, asio::use_awaitable);
        }
        CHECK((co_await children_of(c, path)).size() == 1);
        co_await first.release();
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return done == 10; }));
        CHECK(order == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
        CHECK(m.local_handoffs() == 10);
        auto mm = m.metrics();
        CHECK(mm.local_handoffs == 10);
        CHECK(mm.acquires == 11);
        CHECK(mm.wait.count() == 11);
        CHECK(std::is_sorted(tokens.begin(), tokens.end()));
        CHECK(std::adjacent_find(tokens.begin(), tokens.end()) == tokens.end());
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return (co_await children_of(c, path)).empty(); }));
    });
}

// The in-process handoff is bounded: another process waiting gets its turn while this one's
// tasks keep asking.
TEST_CASE("in-process handoff lets other processes in")
{
    run_with_clients({.name = "fair", .clients = 2, .limit = 60s}, [&](fixture& f) -> awaitable<void> {
        auto [a, b] = f.clients<2>();
        auto& path = f.path;
        mutex ma(a, path), mb(b, path);
        auto ex = co_await asio::this_coro::executor;
        bool stop = false;
        int a_grants = 0, running = 0;
        for (int t = 0; t < 8; ++t)
            asio::co_spawn(ex, [&]() -> awaitable<void> {
                ++running;
                for (int i = 0; i < 2000 && !stop; ++i) {
                    auto g = co_await ma.acquire();
                    ++a_grants;
                    co_await g.release();
                }
                --running;
            }, asio::detached);
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return a_grants > 20; }));
        auto g = co_await mb.acquire(10s);
        int a_grants_when_b_got_it = a_grants;
        stop = true;
        CHECK(g.has_value());
        CHECK_FALSE(a_grants_when_b_got_it >= 8 * 2000);
        if (g)
            co_await g->release();
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return running == 0; }, 20000ms));
    });
}

// With local_handoff off, every task queues with a node of its own (Curator's behaviour).
TEST_CASE("local handoff can be turned off")
{
    run_with_clients({.name = "nohandoff"}, [&](fixture& f) -> awaitable<void> {
        auto& c = f.client();
        auto& path = f.path;
        mutex_options o;
        o.local_handoff = false;
        mutex m(c, path, o);
        auto ex = co_await asio::this_coro::executor;
        auto first = co_await m.acquire();
        int done = 0;
        for (int t = 0; t < 5; ++t)
            asio::co_spawn(ex, [&]() -> awaitable<void> {
                auto g = co_await m.acquire();
                co_await g.release();
                ++done;
            }, asio::detached);
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return (co_await children_of(c, path)).size() == 6; }));
        co_await first.release();
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return done == 5; }));
        CHECK(m.local_handoffs() == 0);
    });
}

// The wait-time histogram sees a wait as long as the holder kept the lock; the counters add up.
TEST_CASE("metrics: wait time and outcomes")
{
    run_with_clients({.name = "metrics", .clients = 2}, [&](fixture& f) -> awaitable<void> {
        auto [a, b] = f.clients<2>();
        auto& path = f.path;
        mutex ma(a, path), mb(b, path);
        auto g = co_await ma.acquire();
        auto ex = co_await asio::this_coro::executor;
        bool got = false;
        asio::co_spawn(ex, [&]() -> awaitable<void> {
            auto gb = co_await mb.acquire(10s);
            got = gb.has_value();
        }, asio::detached);
        // Hold for 300 ms after b has queued (its node is the second).
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return (co_await children_of(a, path)).size() == 2; }));
        asio::steady_timer hold(ex, 300ms);
        co_await hold.async_wait(asio::use_awaitable);
        co_await g.release();
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return got; }));
        auto mm = mb.metrics();
        CHECK(mm.acquires == 1);
        CHECK(mm.wait.count() == 1);
        CHECK(mm.wait.max() >= 300ms);
        CHECK(mm.wait.percentile(50) >= 300ms * 15 / 16);
        CHECK(mm.wait.percentile(50) <= mm.wait.max() + mm.wait.max() / 16);
        auto ma_m = ma.metrics();
        CHECK(ma_m.acquires == 1);
        CHECK(ma_m.timeouts + ma_m.cancellations + ma_m.errors + ma_m.losses == 0);
        // A bad path counts as an error.
        mutex bad(a, "no-leading-slash");
        auto [ec, r] = co_await bad.async_acquire(1, 1s, asio::as_tuple(asio::use_awaitable));
        CHECK(ec);
        CHECK(bad.metrics().errors == 1);
    });
}

// Tasks waiting behind another task of this process wait in memory: their timeouts fire in
// deadline order (not queue order), a cancelled one leaves the queue, and when the task in
// ZooKeeper's queue gives up, the next waiter takes its place there and gets the lock.
TEST_CASE("in-process waiters: timeouts, cancellation, promotion")
{
    run_with_clients({.name = "inproc", .clients = 2}, [&](fixture& f) -> awaitable<void> {
        auto [a, b] = f.clients<2>();
        auto& path = f.path;
        mutex ma(a, path), mb(b, path);
        auto held = co_await mb.acquire();  // another session holds
        auto ex = co_await asio::this_coro::executor;

        // Task 1 queues in ZooKeeper (300 ms); tasks 2 (10 s), 3 (100 ms) and 4 (cancelled) wait
        // behind it in memory.
        std::vector<std::string> events;
        auto waiter = [&](int id, std::chrono::milliseconds timeout) -> awaitable<void> {
            auto g = co_await ma.acquire(timeout);
            events.push_back(fmt::format("{}:{}", id, g ? "got" : "timeout"));
            if (g)
                co_await g->release();
        };
        asio::co_spawn(ex, waiter(1, 300ms), asio::detached);
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return (co_await children_of(a, path)).size() == 2; }));
        asio::co_spawn(ex, waiter(2, 10000ms), asio::detached);
        asio::co_spawn(ex, waiter(3, 100ms), asio::detached);
        asio::cancellation_signal sig;
        error_code ec4;
        bool done4 = false;
        ma.async_acquire(4, std::chrono::hours(1), asio::bind_cancellation_slot(sig.slot(), [&](error_code e, std::optional<guard>) {
            ec4 = e;
            done4 = true;
        }));
        co_await asio::post(ex, asio::use_awaitable);
        sig.emit(asio::cancellation_type::terminal);
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return done4; }));
        CHECK(ec4 == asio::error::operation_aborted);
        // 3 times out first, then 1; 2 is promoted into ZooKeeper's queue and still waits.
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return events.size() == 2; }));
        CHECK(events == std::vector<std::string>{"3:timeout", "1:timeout"});
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return (co_await children_of(a, path)).size() == 2; }));
        co_await held.release();
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return events.size() == 3; }));
        CHECK(events.back() == "2:got");
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return (co_await children_of(a, path)).empty(); }));
        auto m = ma.metrics();
        CHECK(m.acquires == 1);
        CHECK(m.timeouts == 2);
        CHECK(m.cancellations == 1);
        CHECK(m.wait.count() == 1);
        CHECK(m.wait.max() >= 300ms);
    });
}

// Many in-process waiters that all time out: nothing is left queued, and the lock still works.
TEST_CASE("in-process waiters: a crowd of timeouts leaves a working lock")
{
    run_with_clients({.name = "crowd"}, [&](fixture& f) -> awaitable<void> {
        auto& a = f.client();
        auto& path = f.path;
        mutex m(a, path);
        auto held = co_await m.acquire();
        auto ex = co_await asio::this_coro::executor;
        int timeouts = 0;
        auto waiter = [&](std::chrono::milliseconds timeout) -> awaitable<void> {
            auto g = co_await m.acquire(timeout);
            if (!g)
                ++timeouts;
        };
        for (int i = 0; i < 500; ++i)
            asio::co_spawn(ex, waiter(std::chrono::milliseconds(50 + (i * 7) % 200)), asio::detached);
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return timeouts == 500; }));
        co_await held.release();
        bool got = false;
        asio::co_spawn(ex, [&]() -> awaitable<void> {
            auto g = co_await m.acquire(5s);
            got = g.has_value();
        }, asio::detached);
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return got; }));
        CHECK(m.metrics().timeouts == 500);
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return (co_await children_of(a, path)).empty(); }));
    });
}

// Releasing and closing the client at once (what a command-line tool does on exit): the hold's
// session watch ends with the close, and nothing outlives what it points to (ASan checks this;
// it once crashed zklock).
TEST_CASE("release, then close at once")
{
    for (int round = 0; round < 3; ++round) {
        run_with_clients({.name = "relclose"}, [&](fixture& f) -> awaitable<void> {
            auto& a = f.client();
            {
                mutex m(a, f.path);
                auto g = co_await m.acquire();
                if (round == 0)
                    co_await g.release();
                // round 1: the guard is dropped (background release); round 2: held while closing
                if (round == 2) {
                    co_await a.async_close();
                    CHECK(co_await eventually([&]() -> awaitable<bool> { co_return g.lost(); }));
                    co_return;
                }
            }
            co_await a.async_close();
        });
    }
}

// The guard is the ownership: acquired in one task, released by another (as a command-line tool
// does when its acquire ran inside an `||` operator), the release deletes the node at once, so
// another session gets the lock without waiting for ours to end.
TEST_CASE("a guard released from another task deletes the node")
{
    run_with_clients({.name = "xtask", .clients = 2}, [&](fixture& f) -> awaitable<void> {
        auto [a, b] = f.clients<2>();
        auto& path = f.path;
        mutex ma(a, path), mb(b, path);
        std::optional<guard> g;
        co_await asio::co_spawn(co_await asio::this_coro::executor, [&]() -> awaitable<void> {
            g = co_await ma.acquire();
        }, asio::use_awaitable);
        REQUIRE(g.has_value());
        CHECK((co_await children_of(a, path)).size() == 1);
        co_await g->release();  // this task never acquired
        CHECK_FALSE(g->valid());
        CHECK((co_await children_of(a, path)).empty());
        auto other = co_await mb.try_acquire();
        CHECK(other.has_value());
        CHECK(ma.metrics().release_failures == 0);
    });
}

// A held node deleted by someone else (an operator "breaking" the lock) is a loss, signalled
// within a round trip while the connection never dropped; the next holder's token is larger.
// Both ways of watching: a fresh object watches its node with an exists request; one that found
// the queue empty before relies on the children watch its listing left.
TEST_CASE("a held node deleted by someone else is a loss")
{
    for (bool warm : {false, true}) {
        CAPTURE(warm);
        auto log = std::make_shared<test_log>();  // a's log lines
        run_with_clients({.name = "broken", .clients = 2, .log = log}, [&](fixture& f) -> awaitable<void> {
            using namespace asio::experimental::awaitable_operators;
            auto [a, b] = f.clients<2>();
            auto& path = f.path;
            co_await a.async_create(path, "", create_mode::container);
            mutex ma(a, path), mb(b, path);
            if (warm)
                co_await (co_await ma.acquire()).release();
            auto sent = a.stats().requests;
            auto g = co_await ma.acquire();
            // The watch is in place once every request of the acquire has been answered: a read
            // of ours afterwards is answered after them (one session's requests run in order).
            co_await a.async_exists("/");
            CHECK(a.stats().requests - sent == (warm ? 3 : 4));  // create, list, [exists], our read
            auto token = g.fencing_token();
            auto t0 = std::chrono::steady_clock::now();
            co_await b.async_remove(g.node_path());
            asio::steady_timer limit(co_await asio::this_coro::executor, 3s);
            auto r = co_await (g.async_wait_lost(asio::as_tuple(asio::use_awaitable)) ||
                               limit.async_wait(asio::use_awaitable));
            auto took = std::chrono::steady_clock::now() - t0;
            REQUIRE(r.index() == 0);
            CHECK(std::get<0>(std::get<0>(r)) == client_errc::lock_lost);
            CHECK(g.lost());
            CHECK(took < zktest::relaxed(2s));  // relaxed under the sanitizers (slack.hpp)
            CHECK(a.state() == session_state::connected);
            CHECK(ma.metrics().losses == 1);
            CHECK(log->contains("deleted by someone else"));
            auto g2 = co_await mb.acquire(5s);
            REQUIRE(g2.has_value());
            CHECK(g2->fencing_token() > token);
            co_await g.release();  // releasing a lost lock succeeds and deletes nothing of b's
            CHECK((co_await children_of(b, path)).size() == 1);
        });
    }
}

// Our own release is not mistaken for a deletion by someone else.
TEST_CASE("our own release is not a loss")
{
    auto log = std::make_shared<test_log>();
    run_with_clients({.name = "ownrel", .log = log}, [&](fixture& f) -> awaitable<void> {
        auto& a = f.client();
        mutex m(a, f.path, no_handoff());
        for (int i = 0; i < 5; ++i) {
            auto g = co_await m.acquire();
            co_await g.release();
        }
        // Let every watch event of the deletions arrive before looking.
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return a.stats().watch_events >= 5; }));
        CHECK(m.metrics().losses == 0);
        CHECK_FALSE(log->contains("lost"));
    });
}

// A release that fails for good is never silent: the caller gets the error, it is logged and
// counted, and a guard dropped without release logs it too. Here the lock path is created by a
// client whose default ACL has no delete permission, so deleting the lock node is refused.
TEST_CASE("a failed release is reported, logged and counted")
{
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> awaitable<void> {
        auto log = std::make_shared<test_log>();
        auto cfg = test_config(server_address(), 4000ms, log);
        cfg.default_acl = {acl_entry{perm::all & ~perm::remove, "world", "anyone"}};
        client a(ioc.get_executor(), cfg);
        co_await a.async_connect();
        auto path = unique_path("relfail");
        mutex m(a, path, no_handoff());
        {
            auto g = co_await m.acquire();
            auto [ec] = co_await g.async_release(asio::as_tuple(asio::use_awaitable));
            CHECK(ec == zk_errc::no_auth);
            CHECK(m.metrics().release_failures == 1);
            CHECK(log->contains("release failed"));
        }
        // Dropped without release: the background release logs and counts its failure.
        mutex m2(a, unique_path("relfail2"), no_handoff());
        {
            auto g = co_await m2.acquire();
        }
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return m2.metrics().release_failures == 1; }));
        co_await a.async_close();  // the session's end removes the nodes
    });
}

// A foreign child that sorts first (here a persistent node "0" made by hand) blocks the lock in
// Curator's order; the participants list shows it first, marked foreign and persistent.
TEST_CASE("a foreign child that sorts first blocks the lock and is shown")
{
    run_with_clients({.name = "foreign"}, [&](fixture& f) -> awaitable<void> {
        auto& c = f.client();
        auto& path = f.path;
        co_await c.async_create(path, "", create_mode::persistent);
        co_await c.async_create(path + "/0", "by hand", create_mode::persistent);
        mutex m(c, path);
        std::optional<std::optional<guard>> got;
        asio::co_spawn(co_await asio::this_coro::executor, [&]() -> awaitable<void> {
            got = co_await m.acquire(1500ms);
        }, asio::detached);
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return (co_await children_of(c, path)).size() == 2; }));
        auto parts = co_await m.async_participants();
        REQUIRE(parts.size() == 2);
        CHECK(parts[0].name == "0");
        CHECK(parts[0].mode == lock_mode::foreign);
        CHECK(parts[0].session_id == 0);
        CHECK(parts[0].data == "by hand");
        CHECK(parts[1].mode != lock_mode::foreign);
        CHECK(parts[1].session_id == c.session().id);
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return got.has_value(); }));
        CHECK_FALSE(got->has_value());  // timed out behind the foreign node
        CHECK((co_await children_of(c, path)).size() == 1);  // ours was removed
        co_await c.async_remove(path + "/0");
        co_await c.async_remove(path);
    });
}

// Issue 38: B waits behind holder A, C behind B; someone deletes B's node; A releases. Before the
// fix B was granted its deleted node by A's deletion, beside C (deleted_waiter.hpp).
TEST_CASE("a waiter whose node was deleted is not granted when its predecessor goes")
{
    std::map<client*, std::pair<std::unique_ptr<mutex>, guard>> held;
    participant_ops ops{
        [&](client& c, const std::string& path, std::chrono::seconds timeout) -> awaitable<std::string> {
            auto& [m, g] = held[&c];
            if (!m || m->path() != path)
                m = std::make_unique<mutex>(c, path);
            auto r = co_await m->acquire(timeout);
            if (!r)
                co_return std::string();
            g = std::move(*r);
            co_return g.node_path();
        },
        [&](client& c) -> awaitable<void> { co_await held[&c].second.release(); },
        [&] { held.clear(); }};
    deleted_waiter_scenario("deleted-waiter", [](const std::string& p) { return p; }, ops, ops, ops);
}

// Issue 38, the in-process handoff: a task of ours waits to be handed our node; someone deletes
// that node while it is held. Once the holder's guard reports the loss, its release hands nothing
// on: the waiter queues a node of its own, which exists when it is granted.
TEST_CASE("a node deleted while held is not handed to a waiting task of ours")
{
    run_with_clients({.name = "deleted-handoff", .clients = 2, .limit = 45s}, [&](fixture& f) -> awaitable<void> {
        auto [c, obs] = f.clients<2>();
        mutex m(c, f.path);
        auto ex = f.executor();
        std::optional<guard> g1;
        bool holding = false, waiter_started = false, waiter_done = false, waiter_node_existed = false;
        std::string waiter_node;
        asio::co_spawn(ex, [&]() -> awaitable<void> {
            g1 = co_await m.acquire(10s);
            holding = true;
        }, asio::detached);
        REQUIRE(co_await eventually([&]() -> awaitable<bool> { co_return holding; }));
        REQUIRE(g1);
        asio::co_spawn(ex, [&]() -> awaitable<void> {
            // One thread: once this task runs, it queues in the acquire before anything else runs.
            waiter_started = true;
            auto g2 = co_await m.acquire(10s);
            if (g2) {
                waiter_node = g2->node_path();
                auto [ec, e] = co_await obs.async_exists(waiter_node, asio::as_tuple(asio::use_awaitable));
                waiter_node_existed = !ec && e.stat && e.stat->ephemeral_owner == c.session().id;
                co_await g2->release();
            }
            waiter_done = true;
        }, asio::detached);
        REQUIRE(co_await eventually([&]() -> awaitable<bool> { co_return waiter_started; }));
        const auto held = g1->node_path();
        co_await obs.async_remove(held, -1);
        auto [lost_ec] = co_await g1->async_wait_lost(asio::as_tuple(asio::use_awaitable));
        CHECK(lost_ec == client_errc::lock_lost);
        co_await g1->release();
        REQUIRE_MESSAGE(co_await eventually([&]() -> awaitable<bool> { co_return waiter_done; }, 10000ms),
                        "the waiting task did not finish");
        CHECK(waiter_node != held);
        CHECK_MESSAGE(waiter_node_existed, "the waiting task was handed a node that did not exist: " << waiter_node);
    });
}

// Issue 33 item 5: "an acquisition queues behind its own earlier node". A holds; B waits behind A
// with a 10 s deadline; B's waiting node vanishes (an operator deletes it, its session expires,
// its connection drops around the deletion); then A goes. B must be granted promptly, not at its
// deadline (which a new node of B's queued behind an old node of B's would wait for: nobody
// deletes that one before the session ends), on a node of its own that exists, with no other
// node of B's session left in the queue; after B's release the lock path has no children.
// Each step waits for an event seen on the server (B's nodes by listing, B's watches by "wchp"),
// not a sleep. The walk starts over only once a listing or an exists has shown its node gone
// (lock_queue.cpp, restart()); a walk that started over on any event of its node (a data change
// taken for a deletion) queued behind that node and failed data_changed at the 10 s deadline.
namespace {

enum class vanish {
    once,              // the operator deletes B's node once
    twice,             // ... and the node B made when it started over
    with_predecessor,  // B's node, then A's (the holder's) node: B's turn comes by a deletion too
    muted_then_cut,    // deleted while B's connection drops the server's events, then cut
    expiry,            // B's session expires (its node goes with it)
    deleted_then_expiry,
    data_changed,      // B's node is not deleted, its data changes: B must not start over
    reply_lost,        // B's create's reply is lost, its node deleted before B looks for it by
                       // its protected name: B creates anew under the same name's prefix
    local_waiter,      // a second task of B's process waits in memory behind B's first
};

void vanished_waiter(vanish how)
{
    tcp_proxy proxy("127.0.0.1", shared_server().port());
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> awaitable<void> {
        auto ex = ioc.get_executor();
        auto log = std::make_shared<test_log>();
        const bool expires = how == vanish::expiry || how == vanish::deleted_then_expiry;
        client a(ex, test_config());
        client b(ex, test_config(proxy.address(), expires ? 2000ms : 4000ms, log));
        client obs(ex, test_config());
        co_await a.async_connect();
        co_await b.async_connect();
        co_await obs.async_connect();
        const auto path = unique_path("vanished");
        mutex ma(a, path), mb(b, path);
        auto ga = co_await ma.acquire(10s);
        REQUIRE(ga);
        const auto a_node = ga->node_path();
        const auto vanished = [&] {
            std::lock_guard lk(log->m);
            return std::count_if(log->lines.begin(), log->lines.end(), [](const auto& l) {
                return l.second.find("vanished while waiting; starting over") != std::string::npos;
            });
        };

        struct turn {
            bool done = false;
            std::optional<guard> g;
            std::chrono::steady_clock::time_point at;
        };
        turn t1, t2;
        auto take = [&](turn& t) -> awaitable<void> {
            t.g = co_await mb.acquire(10s);
            t.at = std::chrono::steady_clock::now();
            t.done = true;
        };
        if (how == vanish::reply_lost)
            proxy.mute_replies();  // B's connection: the create is carried out, its reply dropped
        asio::co_spawn(ex, take(t1), asio::detached);
        if (how == vanish::local_waiter) {
            co_await asio::post(ex, asio::use_awaitable);  // t1 first, then t2 behind it in memory
            asio::co_spawn(ex, take(t2), asio::detached);
        }

        // B waits: one node of its (current) session in the queue, not `old`, and B watches A's
        // node and its own.
        std::string b_node;
        auto b_waits_on_a_new_node = [&](std::string old) -> awaitable<bool> {
            return eventually([&, old]() -> awaitable<bool> {
                const auto sid = b.session().id;
                auto mine = co_await nodes_of_session(obs, path, sid);
                if (mine.size() != 1 || join_path(path, mine[0]) == old)
                    co_return false;
                const auto node = join_path(path, mine[0]);
                if (!watched_by(a_node, sid) || !watched_by(node, sid))
                    co_return false;
                b_node = node;
                co_return true;
            }, 8000ms);
        };
        if (how == vanish::reply_lost) {
            REQUIRE(co_await eventually([&]() -> awaitable<bool> {
                auto mine = co_await nodes_of_session(obs, path, b.session().id);
                if (mine.size() == 1)
                    b_node = join_path(path, mine[0]);
                co_return mine.size() == 1;
            }, 8000ms));
        } else {
            REQUIRE(co_await b_waits_on_a_new_node(""));
        }
        const auto first = b_node;

        switch (how) {
        case vanish::once:
        case vanish::local_waiter:
            co_await obs.async_remove(first, -1);
            REQUIRE(co_await b_waits_on_a_new_node(first));
            break;
        case vanish::twice: {
            co_await obs.async_remove(first, -1);
            REQUIRE(co_await b_waits_on_a_new_node(first));
            const auto second = b_node;
            co_await obs.async_remove(second, -1);
            REQUIRE(co_await b_waits_on_a_new_node(second));
            break;
        }
        case vanish::with_predecessor:
            co_await obs.async_remove(first, -1);
            co_await obs.async_remove(a_node, -1);
            break;
        case vanish::muted_then_cut:
            proxy.mute_replies();  // B's connection: the deletion's event is dropped
            co_await obs.async_remove(first, -1);
            proxy.cut();  // B reconnects, its session kept; its watches are set again
            REQUIRE(co_await b_waits_on_a_new_node(first));
            break;
        case vanish::expiry:
            REQUIRE(co_await expire_session(b));
            REQUIRE(co_await b_waits_on_a_new_node(first));
            break;
        case vanish::deleted_then_expiry:
            co_await obs.async_remove(first, -1);
            REQUIRE(co_await expire_session(b));
            REQUIRE(co_await b_waits_on_a_new_node(first));
            break;
        case vanish::reply_lost:
            co_await obs.async_remove(first, -1);
            proxy.cut();  // B reconnects and looks for its node by its protected name: gone
            REQUIRE(co_await b_waits_on_a_new_node(first));
            CHECK(log->contains("the create's reply was lost and it made no node; creating again"));
            break;
        case vanish::data_changed:
            // The server drops B's watch on its node as it fires; B sets it again once its
            // listing has shown the node still there.
            co_await obs.async_set_data(first, "changed", -1);
            REQUIRE(co_await eventually([&]() -> awaitable<bool> { co_return watched_by(first, b.session().id); },
                                        8000ms));
            break;
        }

        const auto released_at = std::chrono::steady_clock::now();
        {
            // (A's guard is lost when its node was deleted; its release then only ends it.)
            auto [ec] = co_await ga->async_release(asio::as_tuple(asio::use_awaitable));
            CHECK((!ec || how == vanish::with_predecessor));
        }
        REQUIRE_MESSAGE(co_await eventually([&]() -> awaitable<bool> { co_return t1.done; }, 12000ms),
                        "B's acquisition did not finish");
        REQUIRE_MESSAGE(t1.g.has_value(), "B was not granted: it waited out its 10 s deadline");
        CHECK_MESSAGE(t1.at - released_at < 5s, "B was granted only "
                                                    << std::chrono::duration_cast<std::chrono::milliseconds>(
                                                           t1.at - released_at).count()
                                                    << " ms after A went");
        const auto granted = t1.g->node_path();
        if (how == vanish::data_changed)
            CHECK(granted == first);
        else
            CHECK(granted != first);
        // Only B's granted node is in the queue: no earlier node of B's is left behind it.
        auto ch = co_await children_of(obs, path);
        CHECK(ch == std::vector<std::string>{std::string(granted.substr(path.size() + 1))});
        {
            auto [ec, e] = co_await obs.async_exists(granted, asio::as_tuple(asio::use_awaitable));
            CHECK_FALSE(ec);
            CHECK((e.stat && e.stat->ephemeral_owner == b.session().id));
        }
        switch (how) {
        case vanish::once:
        case vanish::muted_then_cut:
        case vanish::with_predecessor:
        case vanish::local_waiter:
            CHECK(vanished() == 1);
            break;
        case vanish::twice:
            CHECK(vanished() == 2);
            break;
        case vanish::data_changed:
        case vanish::reply_lost:
            CHECK(vanished() == 0);
            break;
        case vanish::expiry:
        case vanish::deleted_then_expiry:
            break;  // the session's end, not a listing, may be what B noticed
        }
        co_await t1.g->release();
        if (how == vanish::local_waiter) {
            REQUIRE_MESSAGE(co_await eventually([&]() -> awaitable<bool> { co_return t2.done; }, 8000ms),
                            "B's second task did not finish");
            REQUIRE_MESSAGE(t2.g.has_value(), "B's second task was not granted");
            co_await t2.g->release();
        }
        const bool emptied =
            co_await eventually([&]() -> awaitable<bool> { co_return (co_await children_of(obs, path)).empty(); });
        const auto left = co_await children_of(obs, path);
        CHECK_MESSAGE(emptied, "nodes left under the lock path: " << left.size() << ", the first "
                                                                   << (left.empty() ? std::string() : left[0]));
        // (A container: the server may have removed it already.)
        co_await obs.async_remove(path, -1, asio::as_tuple(asio::use_awaitable));
    }, 60s);
}

}  // namespace

TEST_CASE("a waiter whose node vanishes starts over and is granted, not at its deadline (issue 33)")
{
    for (auto how : {vanish::once, vanish::twice, vanish::with_predecessor, vanish::muted_then_cut,
                     vanish::data_changed, vanish::local_waiter, vanish::reply_lost}) {
        CAPTURE(static_cast<int>(how));
        vanished_waiter(how);
    }
}

TEST_CASE("a waiter whose session expires starts over on the next session and is granted (issue 33)")
{
    for (auto how : {vanish::expiry, vanish::deleted_then_expiry}) {
        CAPTURE(static_cast<int>(how));
        vanished_waiter(how);
    }
}
