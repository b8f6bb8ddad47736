// What every lock recipe is given: when a held lock counts as lost, what its node stores, and
// whether tasks of one process share a node.
#ifndef ZKCORO_LOCK_OPTIONS_HPP
#define ZKCORO_LOCK_OPTIONS_HPP

#include <chrono>
#include <string>

namespace zkcoro {

/// When a held lock counts as lost.
enum class lost_policy {
    /// When the session may have expired on the server: the connection is not back by the last
    /// moment the client heard from the server + the session timeout - a safety margin; at once on
    /// an expiry notice or when our node is found gone. A failover the session survives keeps the
    /// lock. The default.
    deadline,
    /// At the first disconnection (safe, but every failover loses the lock).
    suspended,
    /// Only on the expiry notice. UNSAFE: another holder may already have the lock while we still
    /// believe we hold it (for up to the session timeout during a partition).
    expired,
};

/// Options of a mutex, of either side of a shared_mutex and of a semaphore.
struct mutex_options {
    /// Stored in the lock node. Empty: "host=<host> pid=<pid> program=<program>[ label=<label>]"
    /// (zkcoro/holder_data.hpp; the label is client_config::holder_label).
    std::string data;
    lost_policy policy = lost_policy::deadline;  ///< When the lock counts as lost (see lost_policy).
    /// For lost_policy::deadline: how long before the possible expiry the lock counts as lost.
    /// Zero: a fifth of the negotiated session timeout.
    std::chrono::milliseconds safety_margin{0};
    /// Tasks of this process waiting on this mutex object share one znode: a release hands the
    /// lock to the next of them in memory (FIFO), with no request to ZooKeeper. After 63 such
    /// handoffs, or once handoff_batch_time has passed while another participant is queued, the
    /// node goes back to the end of ZooKeeper's queue so other processes get their turn. Off:
    /// every task queues in ZooKeeper with a node of its own (Curator's behaviour).
    bool local_handoff = true;
    /// Bounds a batch of in-process handoffs by time as well as by count, whenever another
    /// participant (another process, or a Curator client) is queued behind our node: the first
    /// release at least this long after ZooKeeper granted the node sends it to the end of the
    /// queue. A foreign waiter then waits about this long plus one hold per process ahead of it.
    /// Zero: the count of 63 alone bounds a batch.
    std::chrono::milliseconds handoff_batch_time{5};
    /// Lingering: after the last release by this process, keep the node for up to this long while
    /// no other participant is queued (a child watch on the lock path tells when one queues). An
    /// acquire by this process inside that window is granted with no request to ZooKeeper; a
    /// contender's node makes the lingering node go at once, so the contender pays one
    /// notification. The lost policy applies while lingering; fencing tokens keep increasing
    /// (each grant of a lingering node counts as a handoff, so at most 63 before a new node).
    /// Helps a process that takes the same lock in bursts. Zero (the default): the node is
    /// deleted at the last release. Needs local_handoff.
    std::chrono::milliseconds linger{0};
    /// Revocable (Curator's makeRevocable): another process may ask the holder to let go by
    /// writing "__REVOKE__" into its lock node (zkcoro::async_request_revoke, Curator's
    /// Revoker.attemptRevoke); the guard's revocation signal tells the holder, which decides.
    /// The node then stores no data (data must stay empty), the request is watched from the
    /// node's creation on (so it may come while still queued), and local_handoff is off.
    /// For mutexes and the sides of a shared_mutex; a semaphore refuses it (invalid_argument).
    bool revocable = false;
};

}  // namespace zkcoro

#endif
