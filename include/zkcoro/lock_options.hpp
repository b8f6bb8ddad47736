// What every lock recipe is given: when a held lock counts as lost, what its node stores, and
// whether tasks of one process share a node.
#ifndef ZKCORO_LOCK_OPTIONS_HPP
#define ZKCORO_LOCK_OPTIONS_HPP

#include <chrono>
#include <string>

namespace zkcoro {

// When a held lock counts as lost.
enum class lost_policy {
    // When the session may have expired on the server: the connection is not back by the last
    // moment the client heard from the server + the session timeout - a safety margin; at once on
    // an expiry notice or when our node is found gone. A failover the session survives keeps the
    // lock. The default.
    deadline,
    // At the first disconnection (safe, but every failover loses the lock).
    suspended,
    // Only on the expiry notice. UNSAFE: another holder may already have the lock while we still
    // believe we hold it (for up to the session timeout during a partition).
    expired,
};

struct mutex_options {
    // Stored in the lock node. Empty: "<host>:<pid>".
    std::string data;
    lost_policy policy = lost_policy::deadline;
    // For lost_policy::deadline: how long before the possible expiry the lock counts as lost.
    // Zero: a fifth of the negotiated session timeout.
    std::chrono::milliseconds safety_margin{0};
    // Tasks of this process waiting on this mutex object share one znode: a release hands the
    // lock to the next of them in memory (FIFO), with no request to ZooKeeper. After 63 such
    // handoffs the node goes back to the end of ZooKeeper's queue so other processes get their
    // turn. Off: every task queues in ZooKeeper with a node of its own (Curator's behaviour).
    bool local_handoff = true;
    // Revocable (Curator's makeRevocable): another process may ask the holder to let go by
    // writing "__REVOKE__" into its lock node (zkcoro::async_request_revoke, Curator's
    // Revoker.attemptRevoke); the guard's revocation signal tells the holder, which decides.
    // The node then stores no data (data must stay empty), the request is watched from the
    // node's creation on (so it may come while still queued), and local_handoff is off.
    // For mutexes and the sides of a shared_mutex; a semaphore refuses it (invalid_argument).
    bool revocable = false;
};

}  // namespace zkcoro

#endif
