// What the hold loop waits for, from the connection on: INT, TERM and HUP, SIGCHLD, the job
// control stops (TSTP, TTIN, TTOU) while the command runs, the lock lost, a revocation request.
// Each source is pumped into one queue by a long-lived coroutine of its own.
#ifndef ZKCORO_TOOLS_ZKLOCK_EVENT_PUMP_HPP
#define ZKCORO_TOOLS_ZKLOCK_EVENT_PUMP_HPP

#include <zkcoro/guard.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include <signal.h>

#include <deque>
#include <initializer_list>
#include <memory>

namespace zklock {

namespace asio = boost::asio;

enum class event_kind { child, signal, lost, escalate, revoke, stop };
struct event {
    event_kind kind;
    int sig = 0;
};

// Asio's signal_set installs its handlers without SA_RESTART (Boost 1.81): a blocking call the
// signal interrupts fails with EINTR instead of going on. zklock writes its messages to stderr
// with stdio, and a terminal or pipe can block that write (Ctrl-S, a full buffer); a SIGCHLD
// then made fmt::print throw ("cannot write to file: Interrupted system call") and zklock abort.
// This adds SA_RESTART to the handlers of `sigs`, keeping everything else of them.
void restart_interrupted_calls(std::initializer_list<int> sigs);

// What the supervision loop waits for, fed by one long-lived coroutine per source. (Not `a || b`
// per wait: when two sources complete in the same round, `||` keeps one result and drops the
// other, and a dropped signal is a signal lost; nor a lost-lock wait cancelled and restarted at
// every SIGCHLD.) Shared, so that a source still pending when the run's coroutine returns owns it.
struct run_events {
    explicit run_events(const asio::any_io_executor& ex)
        : wake(ex), sigchld(ex, SIGCHLD), sigs(ex, SIGINT, SIGTERM, SIGHUP), stops(ex)
    {
        restart_interrupted_calls({SIGCHLD, SIGINT, SIGTERM, SIGHUP});
    }
    asio::steady_timer wake;  // the loop sleeps on it; cancelled by every push
    asio::signal_set sigchld;
    asio::signal_set sigs;
    // TSTP, TTIN, TTOU: taken over only while the command runs (before, they stop zklock alone,
    // as by default).
    asio::signal_set stops;
    asio::cancellation_signal stop_lost;
    asio::cancellation_signal stop_revoke;
    std::deque<event> queue;

    void push(event e)
    {
        queue.push_back(e);
        wake.cancel();
    }
};

// From the connection on: INT, TERM, HUP and SIGCHLD are queued (SIGCHLD before any fork, so that
// no exit is missed).
void pump_signals(const std::shared_ptr<run_events>& ev);

// Once the command runs: the lock lost, job control's stops, and with --revocable a revocation
// request, each an event.
void pump_while_held(const std::shared_ptr<run_events>& ev, zkcoro::guard& g, bool revocable);

// Completes with the first INT, TERM or HUP queued (left in the queue), for `||` with the
// connection and the acquisition: a signal that arrives as they complete stays queued.
asio::awaitable<int> queued_signal(std::shared_ptr<run_events> ev);

// The first INT, TERM or HUP in the queue; 0 if none.
int first_queued_signal(const run_events& ev);

// Stops the event sources when the run's coroutine ends, however it ends.
struct stop_events {
    std::shared_ptr<run_events> ev;
    ~stop_events();
};

}  // namespace zklock

#endif
