// What every acquisition shares, whatever the recipe (internal): deadlines, the metrics of how
// it ended, and running its coroutine on the client's executor under the caller's cancellation.
#ifndef ZKCORO_SRC_ENGINE_ACQUISITION_HPP
#define ZKCORO_SRC_ENGINE_ACQUISITION_HPP

#include "async/coroutine.hpp"
#include "async/op_state.hpp"

#include <zkcoro/error.hpp>
#include <zkcoro/metrics.hpp>
#include <zkcoro/this_task.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/error.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>

namespace zkcoro::detail {

// The moment `timeout` from now; duration::max() (or any overflow) means never.
inline std::chrono::steady_clock::time_point deadline_after(std::chrono::steady_clock::duration timeout)
{
    using clock = std::chrono::steady_clock;
    auto now = clock::now();
    if (timeout >= clock::time_point::max() - now)
        return clock::time_point::max();
    return now + std::max(timeout, clock::duration::zero());
}

// What is left until `deadline` (never negative); duration::max() for a deadline of never.
inline std::chrono::steady_clock::duration remaining(std::chrono::steady_clock::time_point deadline)
{
    using clock = std::chrono::steady_clock;
    if (deadline == clock::time_point::max())
        return clock::duration::max();
    return std::max(clock::duration::zero(), deadline - clock::now());
}

// Counts how an acquisition ended (the caller holds the lock guarding `m`).
inline void note_outcome(lock_metrics& m, const error_code& ec, bool granted, std::chrono::steady_clock::duration waited)
{
    if (ec == asio::error::operation_aborted)
        ++m.cancellations;
    else if (ec)
        ++m.errors;
    else if (!granted)
        ++m.timeouts;
    else {
        ++m.acquires;
        m.wait.record(std::chrono::duration_cast<std::chrono::nanoseconds>(waited));
    }
}

// Counts how an acquisition that began at `started` ended, in the metrics of `s` (a lock object,
// (count_outcome), or a recipe's state: members m, metrics, log_failure and executor), logs the diagnostic of a
// failure (with the backend's context), then completes its
// operation. A state with a wait-for graph (`graph`, null when off) records there that `owner`
// holds the lock (when granted) and no longer waits, before its task can run again.
// `here`: called from a completion on the client's executor (op_state::complete_here).
template <class State, class R>
void complete_counted(State& s, op_state<std::optional<R>>& op, std::chrono::steady_clock::time_point started,
                      error_code ec, std::optional<R> result, owner_id owner = 0, bool here = false)
{
    if constexpr (requires { s.graph; })
        if (s.graph && owner != 0) {
            if (result.has_value())
                s.graph->held(owner, &s);
            s.graph->stopped_waiting(owner);
        }
    if constexpr (requires { s.count_outcome(ec, true, started); }) {
        s.count_outcome(ec, result.has_value(), started);  // a lock object counts on its own clock and lock
    } else {
        std::lock_guard lk(s.m);
        note_outcome(s.metrics, ec, result.has_value(), std::chrono::steady_clock::now() - started);
    }
    if (ec && ec != asio::error::operation_aborted)
        s.log_failure("acquire", ec);
    if (here)
        op.complete_here(ec, std::move(result));
    else
        op.complete(ec, std::move(result));
}

// Runs an acquisition coroutine on the client's executor, cancellable through the operation's
// slot, and completes the operation with its result, counted (an exception: ZSYSTEMERROR), for
// `owner` (complete_counted).
template <class State, class R>
void spawn_counted(const std::shared_ptr<State>& s, asio::awaitable<std::tuple<error_code, std::optional<R>>> coro,
                   std::shared_ptr<op_state<std::optional<R>>> op, std::chrono::steady_clock::time_point started,
                   owner_id owner = 0)
{
    auto slot = op->cancellation_slot();
    spawn_with(s->executor(), std::move(coro), slot,
               [s, op = std::move(op), started, owner](error_code ec, std::optional<R> result) {
                   complete_counted(*s, *op, started, ec, std::move(result), owner);
               });
}

// Runs a backend's acquisition coroutine for an active_task (engine/lock_object.hpp): `make` gets
// the task (which the coroutine reports through) and returns the coroutine; the caller's operation
// completes with its result (spawn_counted). What spawn_counted needs is read before the task moves.
template <class Task, class Make>
void spawn_task(Task& task, Make make)
{
    auto s = task.object();
    auto op = task.op();
    const auto started = task.started();
    const auto owner = task.owner();
    spawn_counted(s, make(std::move(task)), std::move(op), started, owner);
}

}  // namespace zkcoro::detail

#endif
