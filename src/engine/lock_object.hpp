// A lock object (internal): what a mutex, either side of a shared_mutex and a semaphore's queues
// are built on. Its decisions (reentrancy, the tasks of this process waiting in memory behind the
// one in the backend's queue, their deadlines, the batch bound, lingering, losses) are made by a
// lock_machine (engine/lock_machine.hpp, no I/O), the only place that knows them; the object
// carries them out in one loop (lock_object::handle): the leases granted on the node this process
// holds, the waiters' completions, the timers. Backends report through the active_task they are
// given and the object's events; nothing else of the object is theirs.
#ifndef ZKCORO_SRC_ENGINE_LOCK_OBJECT_HPP
#define ZKCORO_SRC_ENGINE_LOCK_OBJECT_HPP

#include "async/op_state.hpp"
#include "engine/clock.hpp"
#include "engine/lease.hpp"
#include "engine/lock_machine.hpp"
#include "engine/rules.hpp"
#include "engine/wait_graph.hpp"

#include <zkcoro/guard.hpp>
#include <zkcoro/metrics.hpp>
#include <zkcoro/lock_options.hpp>
#include <zkcoro/queue_order.hpp>
#include <zkcoro/types.hpp>

#include <boost/asio/cancellation_signal.hpp>

#include <atomic>
#include <limits>
#include <chrono>
#include <functional>
#include <string_view>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace zkcoro::detail {

using steady_clock = std::chrono::steady_clock;

// What makes a recipe: node names, order, the rule, and hooks for read/write interplay.
struct recipe_params {
    std::string base_name = "lock-";
    // The markers of this recipe's node names (base_name when empty); a child with none of them
    // is foreign: another recipe's or a user's node, which still takes its place in the order.
    std::vector<std::string> markers;
    // Sorts child names into queue order (Curator's "lock-" order when empty).
    std::function<void(std::vector<std::string>&)> sort;
    // Decides for our node (mutex_rule when empty).
    queue_rule rule;
    // Whether the node at i of a sorted listing holds, for async_participants (holds_at with
    // `rule` when empty).
    std::function<bool(const std::vector<std::string>&, std::size_t)> listing_holds;
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

class lock_object;
class object_lease;

// The node (ZooKeeper) or key (Redis) this process holds or queues with: the backend's handle on
// it, what the backend needs for its I/O. Whether it is lost or given back, who holds it and how
// often it was handed on are the engine's (the lock machine's, and the lock object's under its
// lock): a backend reads only ended().
class node_state {
public:
    std::string node;   // ZooKeeper: the node's path; Redis: the key
    std::string value;  // Redis: what the key holds while we hold it (our token)
    std::int64_t fence_base = 0;  // ZooKeeper: the node's czxid; Redis: the fencing counter
    std::int64_t session_id = 0;
    std::uint64_t generation = 0;
    steady_clock::time_point granted_at;  // when the backend granted it: a handoff batch's start
    // A children watch on the lock path (or the listing that sets one) covers whoever queues
    // behind the node from now on (someone doing so is the lock machine's others_queued event).
    std::atomic<bool> queue_watched{false};
    asio::cancellation_signal monitor_stop;   // the backend's executor only

    // Lost, or given back by the engine: nothing left to watch it for. Any thread.
    bool ended() const noexcept { return lost_.load() || given_back_.load(); }
    bool lost() const noexcept { return lost_.load(); }

    // Redis: the hold's own loss bound (the last confirmed renewal + TTL - safety margin), kept by
    // its renewal. Past it the node counts as lost before the renewal's timer has run, which a busy
    // event loop runs late (tests/sim: sim_redis's multi-lock seed 2028). ZooKeeper: never set (its
    // bound is the lost policy's, computed from the session's state: zk_backend::past_bound).
    void set_lost_by(steady_clock::time_point t) noexcept { lost_by_.store(t.time_since_epoch().count()); }
    bool past_lost_by() const noexcept
    {
        const auto by = lost_by_.load(std::memory_order_relaxed);
        return by != no_bound && steady_clock::now().time_since_epoch().count() >= by;
    }

private:
    friend class lock_object;
    static constexpr steady_clock::rep no_bound = std::numeric_limits<steady_clock::rep>::max();
    std::atomic<steady_clock::rep> lost_by_{no_bound};
    std::atomic<bool> lost_{false};
    std::atomic<bool> given_back_{false};    // our own delete is under way: its deletion is no loss
    std::shared_ptr<object_lease> holder_;  // guarded by the lock object's lock
};

// In-process handoffs of one node before it goes back to the end of ZooKeeper's queue, so that
// other processes get their turn. Fencing tokens are fence_base * 64 + handoff number.
constexpr int max_handoffs = 63;
constexpr std::int64_t token_scale = 64;

// One grant of the node to one owner: the lease a guard holds. Its reentrant holds are counted by
// the lock machine; the lease is the handle the owner's guards share.
class object_lease final : public lease {
public:
    object_lease(std::shared_ptr<lock_object> obj, std::shared_ptr<node_state> ns, owner_id owner, int handoff);

    const std::string& resource() const noexcept override { return ns_->node; }
    std::int64_t session_id() const noexcept override { return ns_->session_id; }
    void release(any_handler<void(error_code)> handler) override;
    client* zookeeper() noexcept override;
    bool past_bound() const noexcept override;

    const std::shared_ptr<node_state>& node() const noexcept { return ns_; }
    using lease::set_revocation;

private:
    friend class lock_object;
    using lease::set_lost;
    using lease::set_released;

    std::shared_ptr<lock_object> obj_;
    std::shared_ptr<node_state> ns_;
    // Guarded by the lock object's lock: no hold of it counts any more (its last release, or the
    // loss, which also took its holds out of the wait-for graph).
    bool ended_ = false;
};

// The "active" role: the one task of ours that queues on the backend (or holds there), given to
// the backend with each start. The backend reports through it, once, how the acquisition ended
// there: granted (with the node), or failed. Dropped without a report, it reports failed: a
// backend cannot leave the tasks of ours waiting in memory behind a role nobody has. It also
// carries the caller's operation, counted and completed by complete().
class active_task {
public:
    using op_type = std::shared_ptr<op_state<std::optional<guard>>>;

    active_task() = default;
    active_task(std::shared_ptr<lock_object> s, owner_id owner, steady_clock::time_point deadline, op_type op,
                steady_clock::time_point started, bool promoted, bool role = true) noexcept
        : s_(std::move(s)), op_(std::move(op)), owner_(owner), deadline_(deadline), started_(started),
          promoted_(promoted), role_(role)
    {
    }
    active_task(active_task&& o) noexcept;
    active_task& operator=(active_task&& o) noexcept;
    ~active_task();

    const std::shared_ptr<lock_object>& object() const noexcept { return s_; }
    owner_id owner() const noexcept { return owner_; }
    steady_clock::time_point deadline() const noexcept { return deadline_; }
    steady_clock::time_point started() const noexcept { return started_; }
    // A task of ours that waited in memory and now takes the role (not a new acquisition).
    bool promoted() const noexcept { return promoted_; }
    const op_type& op() const noexcept { return op_; }

    // The backend holds `ns` for the owner: the engine records it and makes the guard's lease.
    // `others_queued`: the listing that granted it showed another participant behind it;
    // `revocation`: a revocable acquisition's state. Set the node's fields (queue_watched
    // included) before: when tasks of ours wait behind it, the engine asks the backend to watch
    // who queues (watch_queue).
    std::shared_ptr<object_lease> granted(std::shared_ptr<node_state> ns, bool others_queued = false,
                                          std::shared_ptr<revocation_state> revocation = {});
    // The backend gave up (an error, the deadline, a cancellation): the role goes on.
    void failed();
    // Counts how the acquisition ended and completes the caller's operation (complete_counted).
    void complete(error_code ec, std::optional<guard> g, bool here = false);

private:
    std::shared_ptr<lock_object> s_;
    op_type op_;
    owner_id owner_ = 0;
    steady_clock::time_point deadline_{}, started_{};
    bool promoted_ = false;
    bool role_ = true;  // false: a grant outside the queue (a downgrade), no role to hand on
    bool reported_ = false;
};

// Where the task of ours with the "active" role queues, and where a node nobody here needs any
// more goes back: ZooKeeper's queue of lock nodes (zookeeper/) or a Redis key (redis/). The
// engine knows a backend only through this interface, and a backend reports only through the
// active_task it was given and the lock object's events (lost, queue_changed).
class lock_backend {
public:
    virtual ~lock_backend() = default;
    // Takes the lock on the server for the task, reporting through it. A promoted task's deadline
    // has not passed (the engine checks it).
    virtual void start(active_task task) = 0;
    // The last release with nobody of ours to hand to: gives the hold back on the server
    // (ns.ended() is already true), completing `op`.
    virtual void give_back(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns,
                           std::shared_ptr<op_state<>> op) = 0;
    // Lists who holds the lock and who waits for it (async_participants), completing `op`.
    virtual void participants(const std::shared_ptr<lock_object>& s,
                              std::shared_ptr<op_state<std::vector<participant>>> op) = 0;
    // Logs an acquisition's failure with its context.
    virtual void log_failure(std::string_view operation, std::string_view resource, const error_code& ec) = 0;
    // The context of a failure for the throwing acquire(): the what() of its system_error, which
    // then ends with the code's message.
    virtual std::string failure_context(std::string_view operation, std::string_view resource, const error_code& ec) = 0;
    // Logs a message of the lock's (through the client's log).
    virtual void log(log_level level, std::string_view message) = 0;
    // Whether the lingering node `ns` may be granted again with no request (ZooKeeper: the
    // session that made it is still connected). Lock object's lock held.
    virtual bool still_held(const node_state& ns) const noexcept = 0;
    // Learns whether anyone else queues behind `ns` (then calls lock_object::queue_changed), for
    // the batch's time bound and lingering; called with node_state::queue_watched just set.
    virtual void watch_queue(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns) = 0;
    // Whether the hold `ns` is past its loss bound now, whether or not what watches it (a timer, a
    // state change's handler, late on a busy event loop) has reported it yet. Any thread. By
    // default the bound kept in the node (Redis: the renewal's, set_lost_by).
    virtual bool past_bound(const node_state& ns, const mutex_options&) const noexcept { return ns.past_lost_by(); }
    // The engine lost `ns` past its bound (its holder is told): the backend's part of a loss
    // (ZooKeeper: stop watching the node and delete it, as a loss it finds itself does). Default:
    // nothing (Redis: the key expires; the renewal stops at the loss).
    virtual void lost_past_bound(const std::shared_ptr<lock_object>&, const std::shared_ptr<node_state>&) {}
    // Grants at once with a node of the given name, outside the queue (a read-write lock's
    // downgrade), reporting through `task` (which has no role); not_supported where there are no
    // named nodes.
    virtual void start_immediate(active_task task, std::string name) = 0;
    // The ZooKeeper client whose node a lease holds, for a fenced transaction; null when the
    // backend has no ZooKeeper node.
    virtual client* zookeeper() noexcept { return nullptr; }
};

class lock_object : public std::enable_shared_from_this<lock_object> {
public:
    // A lock object on `backend`: `resource` names what it locks (a lock path, a Redis key), `ex`
    // is the executor of the backend's connection, where every completion runs; `clock` its
    // clock and timers (null: steady_clock and asio's timers on `ex`). The ZooKeeper backend makes
    // its lock objects with make_zk_lock (zookeeper/lock.hpp).
    lock_object(std::shared_ptr<lock_backend> backend, asio::any_io_executor ex, std::string resource,
                mutex_options opts, recipe_params params, std::unique_ptr<engine_clock> clock = nullptr);
    ~lock_object();

    // Starts an acquisition for `owner`, completing `op` (counted in the metrics).
    void acquire(owner_id owner, steady_clock::time_point deadline, std::shared_ptr<op_state<std::optional<guard>>> op);
    // Lists who holds and who waits, through the backend (ZooKeeper: list_queue).
    void participants(std::shared_ptr<op_state<std::vector<participant>>> op);

    // The node `owner` holds through this object, if any, and how many times.
    std::optional<std::string> held_node(owner_id owner);
    std::size_t held_count(owner_id owner);

    // --- what a backend reports besides its active_task (any thread) ---
    // The node (or key) is lost: its holder's guard reports it (lost signal, lock_lost) and the
    // next local waiter queues anew. False when it was already lost, or given back.
    bool lost(const std::shared_ptr<node_state>& ns);
    // Someone queued behind the node (or the queue changed): ends its lingering, if it lingers.
    void queue_changed(const std::shared_ptr<node_state>& ns);
    // A release's give-back failed for good (the backend logs it).
    void count_release_failure();

    // Deletes the lingering node now, if any (the mutex's end).
    void end_linger();

    // The metrics, and the counting of an acquisition's end (complete_counted).
    lock_metrics metrics_snapshot() const;
    void count_outcome(const error_code& ec, bool granted, steady_clock::time_point started);

    // The executor of the backend's connection; an acquisition's failure logged with its context.
    const asio::any_io_executor& executor() const noexcept { return ex; }
    void log_failure(std::string_view operation, const error_code& ec) { backend->log_failure(operation, path, ec); }
    steady_clock::time_point now() const { return clock_->now(); }

    // What the lock is: set up once, before the first acquisition, and read-only after.
    std::shared_ptr<lock_backend> backend;
    asio::any_io_executor ex;
    const std::string path;
    mutex_options opts;
    recipe_params recipe;
    std::string data;
    error_code path_error;
    // client_config::detect_deadlocks: process_wait_graph(), for a mutex (exclusive: whoever
    // holds it blocks every other task); null otherwise, and nothing is recorded.
    task_wait_graph* graph = nullptr;

private:
    friend class object_lease;
    friend class active_task;

    // What goes through the one loop (engine/lock_loop.cpp).
    // One thing that happened to the lock object, with what the loop reports back to its caller.
    struct event {
        enum class kind : std::uint8_t {
            acquire,        // owner asks by deadline (op, started; immediate: a downgrade's node name)
            granted,        // the backend holds ns for owner (others_queued, revocation)
            failed,         // the active task gave up on the backend
            released,       // a guard of `lease` released (release_op completes the release)
            deadline,       // the deadline timer fired
            cancelled,      // waiter id's caller cancelled
            lost,           // ns is lost
            others_queued,  // someone queued behind ns
            linger_fired,   // the linger timer fired
            end_linger,     // the lingering node goes now
        };
        explicit event(kind k) noexcept : what(k) {}

        kind what;
        owner_id owner = 0;
        waiter_id id = 0;
        steady_clock::time_point deadline{}, started{};
        std::shared_ptr<op_state<std::optional<guard>>> op;
        std::string immediate;
        std::shared_ptr<node_state> ns;
        bool others_queued = false;
        std::shared_ptr<revocation_state> revocation;
        object_lease* lease = nullptr;
        std::shared_ptr<op_state<>> release_op;

        // Reported back: acquire: refused (ec, with the cycle of a would_deadlock), granted at once
        // (lease_out), to start on the backend (start) or outside the queue (start_immediate);
        // granted: the new lease (lease_out); released: its last hold (last); lost: newly lost (last).
        error_code ec;
        std::vector<owner_id> cycle;
        std::shared_ptr<object_lease> lease_out;
        bool start = false;
        bool start_immediate = false;
        bool last = false;
    };

    // A task of ours waiting in memory: the handle of its caller's operation. The machine knows it by
    // its id (and its owner, its deadline, its place in the FIFO).
    struct waiter {
        owner_id owner = 0;
        steady_clock::time_point deadline{}, started{};
        std::shared_ptr<op_state<std::optional<guard>>> op;
    };

    // What the loop does once the lock is let go.
    struct follow_up {
        std::vector<std::unique_ptr<waiter>> timed_out;  // complete with a timeout (no guard)
        std::unique_ptr<waiter> cancelled;               // complete with operation_aborted
        std::unique_ptr<waiter> granted;                 // handed the node in memory, with granted_lease
        std::shared_ptr<object_lease> granted_lease;
        std::unique_ptr<waiter> promoted;                // takes the active role: start it on the backend
        std::shared_ptr<object_lease> lost;              // its guard reports the loss
        std::shared_ptr<node_state> give_back;           // nobody of ours takes it: back to the backend
        std::shared_ptr<node_state> watch_queue;         // learn who queues behind it
    };


    // The one loop (engine/lock_object.cpp): takes an event, asks the machine under the lock,
    // carries out its action, and then, with the lock let go, does what follows (completions,
    // requests to the backend). Nothing else reads a lock_action.
    void handle(event& e);
    void step(event& e, follow_up& f, steady_clock::time_point now);
    void carry_out(const lock_action& a, event& e, follow_up& f);
    void finish(event& e, follow_up& f);
    std::shared_ptr<object_lease> make_lease(std::shared_ptr<node_state> ns, owner_id owner);
    void arm(engine_timer which, steady_clock::time_point at);
    void release(object_lease& l, any_handler<void(error_code)> handler);
    bool linger_usable() const;

    mutable std::mutex m_;
    lock_metrics metrics_;  // guarded by m_
    std::unique_ptr<engine_clock> clock_;

    // Guarded by m_. The decisions and every fact they rest on (holds, the FIFO of waiters, the
    // active role, handoffs, lingering): engine/lock_machine.hpp.
    lock_machine machine_;
    // Handles, not facts: the lease through which each holding owner holds (what a reentrant
    // acquisition shares), the completions of the tasks waiting in memory (by the machine's id),
    // and the node the machine's handoff is about (while the machine has one).
    recycling_map<owner_id, std::shared_ptr<object_lease>> leases_;
    std::unordered_map<waiter_id, std::unique_ptr<waiter>> waiters_;
    waiter_id last_waiter_ = 0;
    std::shared_ptr<node_state> node_;
};

}  // namespace zkcoro::detail

#endif
