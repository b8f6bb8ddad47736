// Exact in-process deadlock detection (client_config::detect_deadlocks) against a real ZooKeeper:
// two tasks of one process, each holding one of two mutexes and asking for the other.
#include "common.hpp"

#include <optional>

using namespace zktest;
using namespace zkcoro;
using asio::awaitable;

namespace {

// Two tasks of this process, named by their owner ids (mutex::async_acquire takes the task).
constexpr owner_id task_a = 0xA0;
constexpr owner_id task_b = 0xB0;

// An acquisition started now whose completion is awaited later, within a bound: `done` is
// cancelled by the completion (an event, not a sleep).
struct pending {
    explicit pending(asio::any_io_executor ex) : done(ex, asio::steady_timer::time_point::max()) {}
    asio::steady_timer done;
    bool completed = false;
    error_code ec;
    std::optional<guard> g;

    void start(mutex& m, owner_id owner)
    {
        m.async_acquire(owner, std::chrono::steady_clock::duration::max(),
                        [this](error_code e, std::optional<guard> r) {
                            ec = e;
                            g = std::move(r);
                            completed = true;
                            done.cancel();
                        });
    }
    // True when it completed within `limit`.
    awaitable<bool> wait(std::chrono::milliseconds limit)
    {
        if (!completed) {
            done.expires_after(limit);
            co_await done.async_wait(asio::as_tuple(asio::use_awaitable));
        }
        co_return completed;
    }
};

client_config detecting(std::shared_ptr<test_log> log = nullptr)
{
    auto cfg = test_config(server_address(), 4000ms, std::move(log));
    cfg.detect_deadlocks = true;
    return cfg;
}

}  // namespace

// A holds /a and waits for /b; B holds /b and asks for /a: B is refused at once with
// would_deadlock, the log names the tasks, and A gets /b once B lets it go.
TEST_CASE("opposite orders: the closing acquisition fails with would_deadlock, the other is unaffected")
{
    run_with_clients({.name = "deadlock", .clients = 0}, [&](fixture& f) -> awaitable<void> {
        auto log = std::make_shared<test_log>();
        client c(f.executor(), detecting(log));
        co_await c.async_connect();
        mutex ma(c, f.path + "/a");
        mutex mb(c, f.path + "/b");
        auto a_holds_a = co_await ma.async_acquire(task_a, 10s, asio::use_awaitable);
        auto b_holds_b = co_await mb.async_acquire(task_b, 10s, asio::use_awaitable);
        REQUIRE(a_holds_a);
        REQUIRE(b_holds_b);

        pending a_waits_b(f.executor());
        a_waits_b.start(mb, task_a);  // recorded as waiting by the time async_acquire returns
        CHECK_FALSE(a_waits_b.completed);

        const auto t0 = std::chrono::steady_clock::now();
        auto [ec, g] = co_await ma.async_acquire(task_b, 10s, asio::as_tuple(asio::use_awaitable));
        const auto took = std::chrono::steady_clock::now() - t0;
        CHECK(ec == client_errc::would_deadlock);
        CHECK_FALSE(g);
        CHECK(took < 1s);  // refused at once, not after the 10 s timeout
        MESSAGE("refused after ", std::chrono::duration_cast<std::chrono::microseconds>(took).count(), " us: ",
                ec.message());
        CHECK(log->contains("would deadlock"));
        CHECK(log->contains(fmt::format("task {:#x}", task_b)));
        CHECK(ma.metrics().errors == 1);
        CHECK_FALSE(a_waits_b.completed);  // A still waits: its acquisition is not touched

        co_await b_holds_b->async_release(asio::use_awaitable);
        REQUIRE(co_await a_waits_b.wait(10000ms));
        CHECK_FALSE(a_waits_b.ec);
        REQUIRE(a_waits_b.g);
        CHECK(mb.hold_count(task_a) == 1);

        // The cycle is gone with the release: B asking for /a now waits as usual (A holds it).
        auto [ec2, g2] = co_await ma.async_acquire(task_b, 200ms, asio::as_tuple(asio::use_awaitable));
        CHECK_FALSE(ec2);
        CHECK_FALSE(g2);  // timed out, no error
        co_await a_waits_b.g->async_release(asio::use_awaitable);
        co_await a_holds_a->async_release(asio::use_awaitable);
    });
}

// The negative control: both tasks take /a then /b. B waits behind A and gets both in turn.
TEST_CASE("one order: no would_deadlock, B gets the locks after A")
{
    run_with_clients({.name = "deadlock-one-order", .clients = 0}, [&](fixture& f) -> awaitable<void> {
        client c(f.executor(), detecting());
        co_await c.async_connect();
        mutex ma(c, f.path + "/a");
        mutex mb(c, f.path + "/b");
        auto a1 = co_await ma.async_acquire(task_a, 10s, asio::use_awaitable);
        auto a2 = co_await mb.async_acquire(task_a, 10s, asio::use_awaitable);
        auto a3 = co_await ma.async_acquire(task_a, 10s, asio::use_awaitable);  // reentrant: no cycle with itself
        REQUIRE((a1 && a2 && a3));
        pending b_waits_a(f.executor());
        b_waits_a.start(ma, task_b);
        CHECK_FALSE(b_waits_a.completed);
        co_await a2->async_release(asio::use_awaitable);
        co_await a3->async_release(asio::use_awaitable);
        co_await a1->async_release(asio::use_awaitable);
        REQUIRE(co_await b_waits_a.wait(10000ms));
        CHECK_FALSE(b_waits_a.ec);
        REQUIRE(b_waits_a.g);
        auto [ec, b2] = co_await mb.async_acquire(task_b, 10s, asio::as_tuple(asio::use_awaitable));
        CHECK_FALSE(ec);
        REQUIRE(b2);
        co_await b2->async_release(asio::use_awaitable);
        co_await b_waits_a.g->async_release(asio::use_awaitable);
    });
}

// Off (the default): nothing is detected, B's acquisition waits; its timeout ends it.
TEST_CASE("option off: B waits and times out instead")
{
    run_with_clients({.name = "deadlock-off", .clients = 1}, [&](fixture& f) -> awaitable<void> {
        auto& c = f.client();
        mutex ma(c, f.path + "/a");
        mutex mb(c, f.path + "/b");
        auto a_holds_a = co_await ma.async_acquire(task_a, 10s, asio::use_awaitable);
        auto b_holds_b = co_await mb.async_acquire(task_b, 10s, asio::use_awaitable);
        REQUIRE((a_holds_a && b_holds_b));
        pending a_waits_b(f.executor());
        a_waits_b.start(mb, task_a);
        const auto t0 = std::chrono::steady_clock::now();
        auto [ec, g] = co_await ma.async_acquire(task_b, 300ms, asio::as_tuple(asio::use_awaitable));
        CHECK_FALSE(ec);
        CHECK_FALSE(g);  // timed out: the deadlock would have lasted forever
        CHECK(std::chrono::steady_clock::now() - t0 >= 300ms);
        co_await b_holds_b->async_release(asio::use_awaitable);
        REQUIRE(co_await a_waits_b.wait(10000ms));
        REQUIRE(a_waits_b.g);
        co_await a_waits_b.g->async_release(asio::use_awaitable);
        co_await a_holds_a->async_release(asio::use_awaitable);
    });
}

// A lost hold blocks nobody: A's node of /a deleted from outside, A waiting for /b, B asking for
// /a is no cycle (the lock is free) and B gets it.
TEST_CASE("a lost hold is no longer a hold: no would_deadlock through it")
{
    run_with_clients({.name = "deadlock-lost", .clients = 1}, [&](fixture& f) -> awaitable<void> {
        auto& outside = f.client();
        client c(f.executor(), detecting());
        co_await c.async_connect();
        mutex ma(c, f.path + "/a");
        mutex mb(c, f.path + "/b");
        auto a_holds_a = co_await ma.async_acquire(task_a, 10s, asio::use_awaitable);
        auto b_holds_b = co_await mb.async_acquire(task_b, 10s, asio::use_awaitable);
        REQUIRE((a_holds_a && b_holds_b));
        co_await outside.async_remove(a_holds_a->node_path(), -1, asio::use_awaitable);
        auto [lost] = co_await a_holds_a->async_wait_lost(asio::as_tuple(asio::use_awaitable));
        CHECK(lost == client_errc::lock_lost);
        pending a_waits_b(f.executor());
        a_waits_b.start(mb, task_a);
        auto [ec, g] = co_await ma.async_acquire(task_b, 10s, asio::as_tuple(asio::use_awaitable));
        CHECK_FALSE(ec);
        REQUIRE(g);
        co_await g->async_release(asio::use_awaitable);
        co_await b_holds_b->async_release(asio::use_awaitable);
        REQUIRE(co_await a_waits_b.wait(10000ms));
        REQUIRE(a_waits_b.g);
        co_await a_waits_b.g->async_release(asio::use_awaitable);
        co_await a_holds_a->async_release(asio::use_awaitable);
    });
}
