// A lock object (internal): what a mutex, either side of a shared_mutex and a semaphore's queues
// are built on. Its decisions (reentrancy, the tasks of this process waiting in memory behind the
// one in the backend's queue, their deadlines, the batch bound, lingering, losses) are made by a
// lock_machine (engine/lock_machine.hpp, no I/O); it carries them out: the leases granted on the
// node this process holds, the waiters' completions, the timers.
#ifndef ZKCORO_SRC_ENGINE_LOCK_OBJECT_HPP
#define ZKCORO_SRC_ENGINE_LOCK_OBJECT_HPP

#include "async/op_state.hpp"
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
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <deque>
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

// The one znode this process holds (or queues with) on the path, shared by the in-process
// handoff: several tasks hold it one after another without touching ZooKeeper.
struct node_state {
    std::string node;   // ZooKeeper: the node's path; Redis: the key
    std::string value;  // Redis: what the key holds while we hold it (our token)
    std::int64_t fence_base = 0;  // ZooKeeper: the node's czxid; Redis: the fencing counter
    std::int64_t session_id = 0;
    std::uint64_t generation = 0;
    std::atomic<bool> lost{false};
    std::atomic<bool> released{false};  // our own delete is under way: its deletion is no loss
    int handoffs = 0;                   // guarded by lock_object::m
    steady_clock::time_point granted_at;  // when ZooKeeper granted it: a handoff batch's start
    // A children watch on the lock path (or the listing that sets one) covers whoever queues
    // behind the node from now on (someone doing so is the lock machine's others_queued event).
    std::atomic<bool> queue_watched{false};
    std::shared_ptr<class object_lease> current;  // guarded by lock_object::m
    asio::cancellation_signal monitor_stop;   // client's executor only
};

// In-process handoffs of one node before it goes back to the end of ZooKeeper's queue, so that
// other processes get their turn. Fencing tokens are fence_base * 64 + handoff number.
constexpr int max_handoffs = 63;
constexpr std::int64_t token_scale = 64;

// One grant of the node to one owner: the lease a guard holds.
class object_lease final : public lease {
public:
    object_lease(std::shared_ptr<lock_object> obj, std::shared_ptr<node_state> ns, owner_id owner);

    const std::string& resource() const noexcept override { return ns_->node; }
    std::int64_t session_id() const noexcept override { return ns_->session_id; }
    void release(any_handler<void(error_code)> handler) override;
    client* zookeeper() noexcept override;

    const std::shared_ptr<node_state>& node() const noexcept { return ns_; }
    const std::shared_ptr<lock_object>& object() const noexcept { return obj_; }
    using lease::set_lost;
    using lease::set_released;

    // Guarded by lock_object::m.
    std::size_t count = 1;  // reentrant acquisitions not yet released
    bool released = false;
    bool unrecorded = false;  // lost: its holds were taken out of the wait-for graph already

private:
    std::shared_ptr<lock_object> obj_;
    std::shared_ptr<node_state> ns_;
};

// A task of this process waiting for the in-process handoff, with no coroutine: it is completed
// through `op` when it is granted the node, or started on ZooKeeper's queue when promoted. The
// lock machine knows it by `id`; lock_object::waiters maps the id back.
struct local_waiter {
    enum class status { waiting, granted, promoted };
    waiter_id id = 0;
    owner_id owner = 0;
    status st = status::waiting;        // guarded by lock_object::m
    std::shared_ptr<object_lease> grant;    // set with granted
    std::shared_ptr<op_state<std::optional<guard>>> op;
    steady_clock::time_point deadline;
    steady_clock::time_point started;
};

// Where the task of ours with the "active" role queues, and where a node nobody here needs any
// more goes back: ZooKeeper's queue of lock nodes (zookeeper/) or a Redis key (redis/). The
// engine knows a backend only through this interface.
class lock_backend {
public:
    virtual ~lock_backend() = default;
    // Takes the lock on the server for `owner` by `deadline`, completing `op` (counted) with the
    // guard of a lease on `s`, or hands the active role on (hand_on) when that fails.
    virtual void start(const std::shared_ptr<lock_object>& s, owner_id owner, steady_clock::time_point deadline,
                       std::shared_ptr<op_state<std::optional<guard>>> op, steady_clock::time_point started,
                       bool promoted) = 0;
    // The last release with nobody of ours to hand to: gives the hold back on the server.
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
    // Learns whether anyone else queues behind `ns` (then calls queue_changed), for the batch's
    // time bound and lingering; called with node_state::queue_watched just set.
    virtual void watch_queue(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns) = 0;
    // Grants at once with a node of the given name, outside the queue (a read-write lock's
    // downgrade), completing `op` (counted); not_supported where there are no named nodes.
    virtual void start_immediate(const std::shared_ptr<lock_object>& s, owner_id owner, std::string name,
                                 std::shared_ptr<op_state<std::optional<guard>>> op, steady_clock::time_point started) = 0;
    // The ZooKeeper client whose node a lease holds, for a fenced transaction; null when the
    // backend has no ZooKeeper node.
    virtual client* zookeeper() noexcept { return nullptr; }
};

class lock_object : public std::enable_shared_from_this<lock_object> {
public:
    // A lock object on `backend`: `resource` names what it locks (a lock path, a Redis key), `ex`
    // is the executor of the backend's connection, where every completion runs. The ZooKeeper
    // backend makes its lock objects with make_zk_lock (zookeeper/lock.hpp).
    lock_object(std::shared_ptr<lock_backend> backend, asio::any_io_executor ex, std::string resource,
                mutex_options opts, recipe_params params);

    // Starts an acquisition for `owner`, completing `op` (counted in the metrics).
    void acquire(owner_id owner, steady_clock::time_point deadline, std::shared_ptr<op_state<std::optional<guard>>> op);
    // Lists who holds and who waits, through the backend (ZooKeeper: list_queue).
    void participants(std::shared_ptr<op_state<std::vector<participant>>> op);

    // The node `owner` holds through this object, if any, and how many times.
    std::optional<std::string> held_node(owner_id owner);
    std::size_t held_count(owner_id owner);

    // The executor of the backend's connection; an acquisition's failure logged with its context.
    const asio::any_io_executor& executor() const noexcept { return ex; }
    void log_failure(std::string_view operation, const error_code& ec) { backend->log_failure(operation, path, ec); }

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

    std::mutex m;
    lock_metrics metrics;  // guarded by m

    // The decisions (engine/lock_machine.hpp), with m held.
    lock_machine& machine(const std::lock_guard<std::mutex>&) noexcept { return machine_; }
    const lock_machine& machine(const std::lock_guard<std::mutex>&) const noexcept { return machine_; }

    // The queue was empty at this object's last listing (see queue_acquire). Starts false: a
    // first acquire watches its node with one request rather than risk a stray event.
    std::atomic<bool> alone{false};

private:
    // The engine's functions that carry out the machine's decisions (with m held).
    friend class object_lease;
    friend bool mark_lost(const std::shared_ptr<lock_object>&, const std::shared_ptr<node_state>&);
    friend void enqueue_local(const std::shared_ptr<lock_object>&, const std::shared_ptr<local_waiter>&,
                              const lock_action&);
    friend std::shared_ptr<local_waiter> take_waiter(lock_object&, waiter_id, local_waiter::status);
    friend void arm_deadline_timer(const std::shared_ptr<lock_object>&, const lock_action&);
    friend void disarm_timers(lock_object&, const lock_action&);
    friend bool record_grant(const std::shared_ptr<lock_object>&, const std::shared_ptr<node_state>&,
                             const std::shared_ptr<object_lease>&, bool);
    friend void start_linger(const std::shared_ptr<lock_object>&, const std::shared_ptr<node_state>&,
                             const lock_action&);
    friend std::shared_ptr<object_lease> take_lingering(const std::shared_ptr<lock_object>&, owner_id);
    friend bool linger_usable(const lock_object&);
    friend void end_linger(const std::shared_ptr<lock_object>&, const std::shared_ptr<node_state>&);
    friend void queue_changed(const std::shared_ptr<lock_object>&, const std::shared_ptr<node_state>&);
    friend void arm_linger_timer(const std::shared_ptr<lock_object>&, const lock_action&);
    friend std::shared_ptr<node_state> ended_linger(lock_object&, const lock_action&);

    void configure_machine();

    // Guarded by m.
    lock_machine machine_;
    // Who holds the node through which lease (the machine counts the holds).
    recycling_map<owner_id, std::shared_ptr<object_lease>> holds;
    // The waiters the machine has queued, in id order (ids increase): 24 bytes each, no node of
    // their own. A taken one is emptied and dropped lazily (local_queue.cpp: take_waiter).
    std::deque<std::pair<waiter_id, std::shared_ptr<local_waiter>>> waiters;
    std::size_t waiters_taken = 0;  // emptied entries inside the deque (not at its ends)
    waiter_id last_waiter = 0;
    // Set to the machine's earliest deadline while waiters wait; cancelled when the last leaves.
    std::unique_ptr<asio::steady_timer> deadline_timer;
    // Lingering (mutex_options::linger): our node, kept after the last release while nobody else
    // queues (the machine decides how long). One timer, re-armed only when it fires early, and
    // cancelled when the node goes (a contender, the loss, the close, the mutex's end).
    std::shared_ptr<node_state> lingering;
    std::unique_ptr<asio::steady_timer> linger_timer;
    // The node the machine's handoff is about (local_handoff): the last one granted by the backend.
    std::weak_ptr<node_state> handoff_node;
};

// --- local handoff (engine/local_queue.cpp) ---------------------------------------------------

// Records a waiter the machine queued (`a`: its decision, with the deadline timer to arm). Lock held.
void enqueue_local(const std::shared_ptr<lock_object>& s, const std::shared_ptr<local_waiter>& w,
                   const lock_action& a);
// The waiter the machine named, taken off lock_object::waiters with its new status. Lock held.
std::shared_ptr<local_waiter> take_waiter(lock_object& s, waiter_id id, local_waiter::status st);
// Arms the deadline timer as the machine asks. Lock held.
void arm_deadline_timer(const std::shared_ptr<lock_object>& s, const lock_action& a);
// Cancels the deadline and linger timers the machine no longer needs (`a`: disarm_deadline,
// disarm_linger), so that none stays pending for nobody. Called with every action of the machine
// that can carry them. Lock held.
void disarm_timers(lock_object& s, const lock_action& a);
// Tells a waiter whose status changed (granted or promoted) about it. Lock not held.
void notify(const std::shared_ptr<lock_object>& s, const std::shared_ptr<local_waiter>& w);

// Passes the "in the server's queue" role on to the next local waiter (or clears it): the active
// task gave up or failed.
void hand_on(const std::shared_ptr<lock_object>& s);
// The node (or key) is lost: its holder's guard reports it (lost signal, lock_lost) and the next
// local waiter queues anew. False when it was already lost. On the lock object's executor.
bool mark_lost(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns);

// --- who queues behind our node, and lingering (engine/linger.cpp) ----------------------------

// Someone queued behind the node (or the queue changed): ends its lingering, if it lingers.
void queue_changed(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns);
// The backend granted `ns` to h's owner: records it in the machine. Returns whether tasks of ours
// wait behind it (learn whether others queue, for the batch's time bound). Lock not held.
bool record_grant(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns,
                  const std::shared_ptr<object_lease>& h, bool others_queued);
// Keeps `ns` lingering as the machine decided (`a`: with the timer to arm). Lock held.
void start_linger(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns, const lock_action& a);
// A grant of the lingering node to `owner`, decided by the machine (no request). Lock held.
std::shared_ptr<object_lease> take_lingering(const std::shared_ptr<lock_object>& s, owner_id owner);
// Whether the lingering node may be granted: our session is the node's and connected. Lock held.
bool linger_usable(const lock_object& s);
// Arms the linger timer as the machine asks (`a`). Lock held.
void arm_linger_timer(const std::shared_ptr<lock_object>& s, const lock_action& a);
// The lingering node, taken, when the machine ended its lingering (`a`). Lock held.
std::shared_ptr<node_state> ended_linger(lock_object& s, const lock_action& a);
// Deletes the lingering node now, if `ns` (any node when null) lingers. Lock not held.
void end_linger(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns = nullptr);

// --- the backend's queue (engine/lock_object.cpp) ---------------------------------------------

// Starts the task of ours that has the "active" role on the backend's queue: a new acquisition,
// or a local waiter promoted to it.
void start_active(const std::shared_ptr<lock_object>& s, owner_id owner, steady_clock::time_point deadline,
                 std::shared_ptr<op_state<std::optional<guard>>> op, steady_clock::time_point started, bool promoted);

}  // namespace zkcoro::detail

#endif
