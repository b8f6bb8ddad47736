// Issue 40: after the last acquisition and the client's close, io_context::run() returns at once;
// nothing the library armed (a deadline or linger timer, a renewal, a ping, a reconnection) stays
// pending. Shared by tests/integration/test_timers.cpp (ZooKeeper) and
// tests/redis/test_redis_timers.cpp (Redis): one scenario, any client and lock type with
// async_connect(), close() and acquire(timeout).
//
// The scenario: `tasks` tasks x `cycles` cycles of acquire(30 s) + release on one lock object
// (they wait in memory behind one another: the deadline timer is armed), optionally followed by
// acquisitions behind a holder that time out and that are cancelled, and by the lock object's
// destruction; then the client is closed and the time until the last run() returns is measured.
// A watchdog stops the io_context when run() has not returned `grace` after the close, so a
// failure costs seconds, not the 30 s timeout.
#ifndef ZKCORO_TESTS_INTEGRATION_CLOSING_RUN_HPP
#define ZKCORO_TESTS_INTEGRATION_CLOSING_RUN_HPP

#include "../unit/slack.hpp"

#include <zkcoro/guard.hpp>

#include <boost/asio.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace zktest::closing {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

struct scenario {
    const char* label = "";  // for the messages: what else this run does (linger, ...)
    int threads = 1;      // threads running the io_context
    int tasks = 20;       // tasks contending on one lock object
    int cycles = 5;       // acquire(30 s) + release each
    bool extras = false;  // then, behind a holder: acquisitions that time out and that are cancelled
    bool destroy = false; // the lock object is destroyed (no acquisition pending) before the close
    bool held = false;    // a guard is still held at the close: it is lost then (no renewal, no
                          // monitor left running), and its release after the loss sends nothing
    int waiting = 0;      // with held: tasks acquire(30 s) behind it; the close ends them (an error)
};

// How the acquisitions ended.
struct tally {
    std::atomic<int> granted{0};
    std::atomic<int> timed_out{0};
    std::atomic<int> cancelled{0};
    std::atomic<int> failed{0};
    std::atomic<int> closed_out{0};  // ended by the close with an error (waiting then)
    std::mutex m;
    std::string first_error;  // guarded by m
    void fail(const std::string& what)
    {
        ++failed;
        std::lock_guard lk(m);
        if (first_error.empty())
            first_error = what;
    }
};

// The extras' numbers: behind one holder, `short_waiters` acquire(50 ms) and time out,
// `cancelled_waiters` acquire(30 s) and are cancelled after 30 ms, one acquire(30 s) is granted
// when the holder releases (once the others have ended).
constexpr int short_waiters = 3;
constexpr int cancelled_waiters = 2;

// Times the close and the return of run(), with a watchdog.
class close_clock {
public:
    void closed()
    {
        std::lock_guard lk(m_);
        closed_at_ = clock::now();
        cv_.notify_all();
    }
    void returned()
    {
        std::lock_guard lk(m_);
        done_ = true;
        cv_.notify_all();
    }
    // Until run() returned, or `grace` after the close, or `limit` in all: then stops `ioc`.
    void watch(asio::io_context& ioc, clock::duration grace, clock::duration limit)
    {
        const auto give_up = clock::now() + limit;
        std::unique_lock lk(m_);
        for (;;) {
            if (done_)
                return;
            auto until = closed_at_ ? std::min(give_up, *closed_at_ + grace) : give_up;
            if (clock::now() >= until)
                break;
            cv_.wait_until(lk, until);
        }
        stopped_ = true;
        ioc.stop();
    }
    std::optional<clock::time_point> closed_at() const
    {
        std::lock_guard lk(m_);
        return closed_at_;
    }
    bool stopped() const
    {
        std::lock_guard lk(m_);
        return stopped_;
    }

private:
    mutable std::mutex m_;
    std::condition_variable cv_;
    std::optional<clock::time_point> closed_at_;
    bool done_ = false;
    bool stopped_ = false;
};

template <class Lock>
asio::awaitable<void> contend(Lock& lk, int cycles, tally& t)
{
    for (int i = 0; i < cycles; ++i) {
        auto g = co_await lk.acquire(30s);
        if (!g) {
            ++t.timed_out;
            continue;
        }
        ++t.granted;
        co_await g->release();
    }
}

// One of the extras' waiters; `ended` counts those that timed out or were cancelled, and opens
// `gate` when all have (the holder then releases).
struct extras_state {
    int ended = 0;  // on the strand
    asio::steady_timer* gate = nullptr;
    void end()
    {
        if (++ended == short_waiters + cancelled_waiters)
            gate->cancel();
    }
};

template <class Lock>
asio::awaitable<void> short_waiter(Lock& lk, tally& t, extras_state& st)
{
    auto g = co_await lk.acquire(50ms);
    if (g) {
        t.fail("an acquire(50 ms) behind a holder was granted");
        co_await g->release();
    } else {
        ++t.timed_out;
    }
    st.end();
}

template <class Lock>
asio::awaitable<void> cancelled_waiter(Lock& lk, tally& t, extras_state& st)
{
    using namespace asio::experimental::awaitable_operators;
    asio::steady_timer give_up(co_await asio::this_coro::executor, 30ms);
    auto r = co_await (lk.acquire(30s) || give_up.async_wait(asio::use_awaitable));
    if (r.index() == 1) {
        ++t.cancelled;
    } else {
        t.fail("an acquire(30 s) behind a holder ended before its cancellation");
        if (auto& g = std::get<0>(r))
            co_await g->release();
    }
    st.end();
}

template <class Lock>
asio::awaitable<void> long_waiter(Lock& lk, tally& t)
{
    auto g = co_await lk.acquire(30s);
    if (!g) {
        t.fail("an acquire(30 s) timed out behind a holder that released");
        co_return;
    }
    ++t.granted;
    co_await g->release();
}

template <class Lock, class Guard>
asio::awaitable<void> release_at_gate(Guard& g, asio::steady_timer& gate)
{
    co_await gate.async_wait(asio::as_tuple(asio::use_awaitable));  // cancelled: the waiters ended
    co_await g.release();
}

// On a strand: the holder, then the waiters behind it.
template <class Lock>
asio::awaitable<void> extras(Lock& lk, tally& t)
{
    using namespace asio::experimental::awaitable_operators;
    auto ex = co_await asio::this_coro::executor;
    auto held = co_await lk.acquire(30s);
    if (!held) {
        t.fail("the extras' holder timed out");
        co_return;
    }
    ++t.granted;
    asio::steady_timer gate(ex, clock::time_point::max());
    extras_state st;
    st.gate = &gate;
    // Children of && are tasks of their own: they wait behind the holder.
    co_await (long_waiter(lk, t) && short_waiter(lk, t, st) && short_waiter(lk, t, st) &&
              short_waiter(lk, t, st) && cancelled_waiter(lk, t, st) && cancelled_waiter(lk, t, st) &&
              release_at_gate<Lock>(*held, gate));
}

// What a run measured.
struct outcome {
    bool closed = false;   // the client was closed
    bool stopped = false;  // the watchdog stopped the io_context
    clock::duration after_close{};  // from the close to the last run()'s return
};

template <class Client, class Lock>
struct run_state {
    std::unique_ptr<Client> client;
    std::unique_ptr<Lock> lock;
    const scenario* sc = nullptr;
    tally t;
    std::atomic<int> left{0};
    close_clock clk;
};

template <class Client, class Lock>
asio::awaitable<void> finish(run_state<Client, Lock>& s, asio::any_io_executor ex)
{
    if (s.sc->extras)
        co_await asio::co_spawn(asio::make_strand(ex), extras(*s.lock, s.t), asio::use_awaitable);
    std::optional<zkcoro::guard> g;
    if (s.sc->held && !(g = co_await s.lock->acquire(30s)))
        s.t.fail("the guard held at the close timed out");
    if (g)
        ++s.t.granted;
    if (g && s.sc->waiting > 0) {
        for (int i = 0; i < s.sc->waiting; ++i)
            asio::co_spawn(ex, waiting_at_close(*s.lock, s.t), asio::detached);
        // Yields (no sleep) that let them start waiting first. Coverage only: one that starts
        // after the close ends the same way, at once.
        for (int i = 0; i < 8; ++i)
            co_await asio::post(ex, asio::use_awaitable);
    }
    if (s.sc->destroy && !g)
        s.lock.reset();  // no acquisition pending, every guard released
    s.clk.closed();
    s.client->close();
    if (g) {
        // Reported lost by the close (else run() does not return: the watchdog says so).
        auto [ec] = co_await g->async_wait_lost(asio::as_tuple(asio::use_awaitable));
        if (!g->lost())
            s.t.fail("the guard held at the close was not lost: " + ec.message());
        co_await g->release();
    }
}

// Waits behind the guard held at the close (in memory, its deadline on the lock object's timer,
// or on the server when it starts before the holder's grant): the close ends it with an error.
// Started before the close, it may begin to wait after it; it ends the same way.
template <class Lock>
asio::awaitable<void> waiting_at_close(Lock& lk, tally& t)
{
    try {
        if (auto g = co_await lk.acquire(30s)) {
            t.fail("an acquire(30 s) waiting at the close was granted");
            co_await g->release();
        } else {
            t.fail("an acquire(30 s) waiting at the close timed out");
        }
    } catch (const std::exception&) {
        ++t.closed_out;
    }
}

template <class Client, class Lock>
asio::awaitable<void> task(run_state<Client, Lock>& s)
{
    co_await contend(*s.lock, s.sc->cycles, s.t);
    if (--s.left == 0)
        co_await finish(s, co_await asio::this_coro::executor);  // the last task closes the client
}

template <class Client, class Lock>
asio::awaitable<void> start(run_state<Client, Lock>& s, asio::io_context& ioc)
{
    co_await s.client->async_connect();
    s.left = s.sc->tasks;
    for (int i = 0; i < s.sc->tasks; ++i)
        asio::co_spawn(ioc, task(s), [&s](std::exception_ptr e) {
            if (!e)
                return;
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& ex) {
                s.t.fail(std::string("a task threw: ") + ex.what());
            }
        });
}

// Runs the scenario with the client and lock `make_client` and `make_lock` make, then checks how
// every acquisition ended and that run() returned within `bound` of the close.
template <class Client, class Lock>
outcome run(const scenario& sc, const std::function<std::unique_ptr<Client>(asio::any_io_executor)>& make_client,
            const std::function<std::unique_ptr<Lock>(Client&)>& make_lock,
            clock::duration bound = 500ms)
{
    asio::io_context ioc(sc.threads);
    run_state<Client, Lock> s;
    s.sc = &sc;
    s.client = make_client(ioc.get_executor());
    s.lock = make_lock(*s.client);
    asio::co_spawn(ioc, start(s, ioc), [&s](std::exception_ptr e) {
        if (!e)
            return;
        try {
            std::rethrow_exception(e);
        } catch (const std::exception& ex) {
            s.t.fail(std::string("the start threw: ") + ex.what());
        }
        s.clk.closed();
        s.client->close();
    });
    std::mutex rm;
    clock::time_point last_return{};
    auto run_one = [&] {
        ioc.run();
        std::lock_guard lk(rm);
        last_return = std::max(last_return, clock::now());
    };
    std::thread watchdog([&] { s.clk.watch(ioc, 3s, relaxed(15s)); });
    std::vector<std::thread> threads;
    for (int i = 1; i < sc.threads; ++i)
        threads.emplace_back(run_one);
    run_one();
    for (auto& th : threads)
        th.join();
    s.clk.returned();
    watchdog.join();

    outcome o;
    const auto closed_at = s.clk.closed_at();
    o.closed = closed_at.has_value();
    o.stopped = s.clk.stopped();
    if (closed_at)
        o.after_close = last_return - *closed_at;
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(o.after_close).count();
    std::string what = std::string(sc.label) + (*sc.label ? " " : "") + std::to_string(sc.threads) +
                       (sc.threads == 1 ? " thread, " : " threads, ") + std::to_string(sc.tasks) + " tasks x " +
                       std::to_string(sc.cycles) + " cycles of acquire(30 s)" +
                       (sc.extras ? ", then timeouts and cancellations behind a holder" : "") +
                       (sc.destroy ? ", then the lock object destroyed" : "") +
                       (sc.held ? ", a guard held at the close" : "") +
                       (sc.waiting ? " with " + std::to_string(sc.waiting) + " tasks waiting behind it" : "");
    INFO(what);
    {
        std::lock_guard lk(s.t.m);
        CHECK_MESSAGE(s.t.failed == 0, s.t.failed.load() << " acquisitions failed; the first: " << s.t.first_error);
    }
    CHECK_MESSAGE(o.closed, "the client was never closed (the tasks did not finish in time)");
    CHECK_MESSAGE(!o.stopped, "io_context::run() had not returned 3 s after close(): something the library armed "
                              "stayed pending (stopped by the test's watchdog)");
    CHECK_MESSAGE(o.after_close <= relaxed(bound),
                  "io_context::run() returned " << ms << " ms after close(), over the bound of "
                                                << std::chrono::duration_cast<std::chrono::milliseconds>(bound).count()
                                                << " ms");
    const int extra_grants = (sc.extras ? 2 : 0) + (sc.held ? 1 : 0);
    CHECK(s.t.granted == sc.tasks * sc.cycles + extra_grants);
    CHECK(s.t.timed_out == (sc.extras ? short_waiters : 0));
    CHECK(s.t.cancelled == (sc.extras ? cancelled_waiters : 0));
    CHECK(s.t.closed_out == (sc.held ? sc.waiting : 0));
    MESSAGE(what << ": run() returned " << ms << " ms after close()");
    // The lock object goes before the client (it must not outlive it), the io_context last.
    s.lock.reset();
    return o;
}

}  // namespace zktest::closing

#endif
