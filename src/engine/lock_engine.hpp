// The lock queue engine shared by every recipe (internal): what a recipe tells the engine about
// its nodes, and how recipes build mutex objects on it.
#ifndef ZKCORO_SRC_LOCK_ENGINE_HPP
#define ZKCORO_SRC_LOCK_ENGINE_HPP

#include "driver/client_impl.hpp"

#include <zkcoro/metrics.hpp>
#include <zkcoro/mutex.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/error.hpp>

#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace zkcoro::detail {

// The decision a recipe makes from the sorted queue: hold, or watch one node.
struct queue_decision {
    bool holds = false;
    std::size_t watch_index = 0;   // the node to watch when not holding
    bool deletion_grants = false;  // that node's deletion makes us a holder with no re-read
    bool watch_children = false;   // wait for a change of the children instead (semaphores)
};
using queue_rule = std::function<queue_decision(const std::vector<std::string>& sorted, std::size_t ours)>;

struct mutex_state;

// What makes a recipe: node names, order, the rule, and hooks for read/write interplay.
struct recipe_params {
    std::string base_name = "lock-";
    // The markers of this recipe's node names (base_name when empty); a child with none of them
    // is foreign: another recipe's or a user's node, which still takes its place in the order.
    std::vector<std::string> markers;
    // Sorts child names into queue order.
    std::function<void(std::vector<std::string>&)> sort;
    queue_rule rule;
    // Refuses an acquisition before anything is sent (e.g. read-to-write upgrade).
    std::function<error_code(owner_id)> precheck;
    // Grants at once with a node of the given name instead of queueing (write-to-read downgrade).
    std::function<std::optional<std::string>(owner_id)> immediate_node;
    bool local_handoff_allowed = true;
    // Reentrant per owner (mutexes) or one node per acquisition (semaphore leases).
    bool reentrant = true;
    // Watch our own node while held, so that its deletion by anyone is a loss. Off only for the
    // semaphore's entry mutex, which is held for one round trip.
    bool watch_own_node = true;
};

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

// Counts how an acquisition that began at `started` ended, in the metrics of `s` (a recipe's
// state: members m and metrics), then completes its operation.
template <class State, class R>
void complete_counted(State& s, op_state<std::optional<R>>& op, std::chrono::steady_clock::time_point started,
                      error_code ec, std::optional<R> result)
{
    {
        std::lock_guard lk(s.m);
        note_outcome(s.metrics, ec, result.has_value(), std::chrono::steady_clock::now() - started);
    }
    op.complete(ec, std::move(result));
}

// Runs an acquisition coroutine on the client's executor, cancellable through the operation's
// slot, and completes the operation with its result, counted (an exception: ZSYSTEMERROR).
template <class State, class R>
void spawn_counted(const std::shared_ptr<State>& s, asio::awaitable<std::tuple<error_code, std::optional<R>>> coro,
                   std::shared_ptr<op_state<std::optional<R>>> op, std::chrono::steady_clock::time_point started)
{
    auto done = [s, op, started](std::exception_ptr e, std::tuple<error_code, std::optional<R>> r) {
        auto& [ec, result] = r;
        if (e) {
            ec = make_zk_error(ZSYSTEMERROR);
            result.reset();
        }
        complete_counted(*s, *op, started, ec, std::move(result));
    };
    auto slot = op->cancellation_slot();
    if (slot.is_connected())
        asio::co_spawn(s->zk.get_executor(), std::move(coro), asio::bind_cancellation_slot(slot, std::move(done)));
    else
        asio::co_spawn(s->zk.get_executor(), std::move(coro), std::move(done));
}

queue_decision mutex_rule(const std::vector<std::string>& sorted, std::size_t ours);

std::shared_ptr<mutex_state> make_mutex_state(client& c, std::string path, mutex_options opts, recipe_params params);

// The node `owner` holds through this state, if any.
std::optional<std::string> held_node(mutex_state& s, owner_id owner);
std::size_t held_count(mutex_state& s, owner_id owner);

struct mutex_access {
    static mutex make(std::shared_ptr<mutex_state> s) { return mutex(std::move(s)); }
};

}  // namespace zkcoro::detail

#endif
