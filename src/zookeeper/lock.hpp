// ZooKeeper as a lock object's backend (internal), beside redis/: the queue of lock nodes
// (zookeeper/lock_queue.hpp), the node this process holds and its watches, revocation, who
// participates. The engine (engine/) knows it only as a lock_backend; the recipes make their lock
// objects on a ZooKeeper client with make_zk_lock.
#ifndef ZKCORO_SRC_ZOOKEEPER_LOCK_HPP
#define ZKCORO_SRC_ZOOKEEPER_LOCK_HPP

#include "async/state_listener.hpp"
#include "engine/lock_object.hpp"
#include "engine/revocation.hpp"

#include <zkcoro/client.hpp>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace zkcoro::detail {

// The backend of one lock object on a ZooKeeper client (zookeeper/backend.cpp).
class zk_backend final : public lock_backend {
public:
    explicit zk_backend(const client& c);

    void start(active_task task) override;
    void give_back(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns,
                   std::shared_ptr<op_state<>> op) override;
    void participants(const std::shared_ptr<lock_object>& s,
                      std::shared_ptr<op_state<std::vector<participant>>> op) override;
    void log_failure(std::string_view operation, std::string_view resource, const error_code& ec) override;
    std::string failure_context(std::string_view operation, std::string_view resource, const error_code& ec) override;
    void log(log_level level, std::string_view message) override;
    bool still_held(const node_state& ns) const noexcept override;
    bool past_bound(const node_state& ns, const mutex_options& opts) const noexcept override;
    void lost_past_bound(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns) override;
    void watch_queue(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns) override;
    void start_immediate(active_task task, std::string name) override;
    client* zookeeper() noexcept override { return &zk; }

    client zk;
    // The queue was empty at this lock's last listing (see queue_acquire). Starts false: a first
    // acquire watches its node with one request rather than risk a stray event.
    std::atomic<bool> alone{false};

    // Held nodes in the steady state (connected, on the session that made them), whose session
    // one registration with the client watches for the life of the lock object
    // (zookeeper/held_node.cpp): a hold costs no wait of its own. A change of the state hands
    // each to a monitor.
    std::mutex session_m;
    std::vector<std::shared_ptr<node_state>> session_nodes;  // guarded by session_m
    std::shared_ptr<state_listener> session_listener;        // guarded by session_m
};

// The backend of a lock object made by make_zk_lock, and its client.
inline zk_backend& zk_backend_of(lock_object& s) noexcept { return static_cast<zk_backend&>(*s.backend); }
inline client& zk_of(lock_object& s) noexcept { return zk_backend_of(s).zk; }

// A lock object on ZooKeeper client `c` at lock path `path`, for the recipe `params`: the
// recipe's defaults (Curator's "lock-" order, the mutex rule), the node's data, the wait-for graph
// for a mutex (client_config::detect_deadlocks); an invalid path or option is refused at the
// first acquire (lock_object::path_error), and logged now.
std::shared_ptr<lock_object> make_zk_lock(const client& c, std::string path, mutex_options opts, recipe_params params);

// --- the held node (zookeeper/held_node.cpp) --------------------------------------------------

// `task` holds `node`: reports it, watches its session and the node itself, and makes the guard.
// `others_queued`: the listing that granted it showed another participant behind it.
// `revocation`: the revocable acquisition's state (null when not revocable).
// `own_watch`: an exists watch on the node, set while it waited and not fired, if any (it then
// serves as the held node's watch, with no new request).
guard hold_node(active_task& task, const std::string& node, const node_stat& st,
                zkcoro::watch queue_watch = {}, bool others_queued = false,
                std::shared_ptr<revocation_state> revocation = {}, zkcoro::watch own_watch = {});
// Deletes our node after the last release (retried; a final failure is logged and counted).
void delete_released_node(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns,
                          std::shared_ptr<op_state<>> op);
// The engine lost `ns` past the lost policy's bound (lock_backend::lost_past_bound): stops its
// monitor, stops watching it and deletes it, as a loss the held node's watchers find does.
void end_lost_node(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns);
// When the lost policy `deadline` counts a hold on `zk`'s session lost: when the session may have
// expired (last heard + session timeout - opts.safety_margin, or a fifth of the timeout).
steady_clock::time_point policy_deadline(const client& zk, const mutex_options& opts) noexcept;
// Lists the lock path with a children watch, so that the lock machine learns whether another
// participant is (or was since) queued behind our node (lock_object::queue_changed). Call with
// queue_watched just set.
void watch_queue(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns);

// --- who participates (zookeeper/participants.cpp) --------------------------------------------

// Lists the queue of lock nodes, holders first, by the recipe's own rule.
void list_queue(const std::shared_ptr<lock_object>& s, std::shared_ptr<op_state<std::vector<participant>>> op);

// --- revocation (zookeeper/revocation_watch.cpp) ----------------------------------------------

// Watches `node`'s data for a revocation request until the request comes, the node is gone, the
// session ends or `rs` ends. Runs in the background on the client's executor; each round waits
// for a watch event, and failures to reach the server are retried a bounded number of times.
void watch_revocation(const client& zk, std::string node, std::shared_ptr<revocation_state> rs);

}  // namespace zkcoro::detail

#endif
