// zkcoro::redis_mutex: the single-instance Redis lock (SET key token NX PX ttl, compare-and-delete
// release), behind the same guard as the ZooKeeper locks: one lease, one lost signal, one fencing
// token. Built when Debian's libhiredis-dev is found.
#ifndef ZKCORO_REDIS_MUTEX_HPP
#define ZKCORO_REDIS_MUTEX_HPP

#include <zkcoro/basic_mutex.hpp>
#include <zkcoro/detail/config.hpp>
#include <zkcoro/redis.hpp>

#include <chrono>
#include <string>

namespace zkcoro {

/// The backend of redis_mutex: one Redis server (or the master Sentinel names), through a
/// zkcoro::redis_client.
struct redis_lock_backend {
    /// The Redis client.
    using client_type = redis_client;
    /// The client's executor.
    using executor_type = redis_client::executor_type;
};

/// Options of a redis_mutex.
struct redis_mutex_options {
    /// How long the key lives without renewal: a crashed holder's lock frees itself after this.
    /// A holder renews it every third of the TTL. 100 ms to 24 h.
    std::chrono::milliseconds ttl{10000};
    /// The guard counts as lost when no renewal has been confirmed by the last confirmed one
    /// + ttl - margin (the key may have expired on the server). Zero: a fifth of the TTL. Must be
    /// below a third of the TTL. A grant whose reply comes later than its request + ttl - margin
    /// is not handed on (the next attempt follows at once): round trips that long never grant.
    std::chrono::milliseconds safety_margin{0};
    /// Tasks of this process waiting on this object share one key: a release hands the lock to
    /// the next of them in memory, FIFO, with no request to Redis, up to 63 times in a row.
    bool local_handoff = true;
};

/// A reentrant lock on one Redis key, shared by every process that uses the same key: zkcoro's, or
/// redis-py's Lock (the same SET NX PX and compare-and-delete).
/// - Acquire runs one script: when the key is free, `<key>:fencing` := max(it + 1, the server's TIME
///   in microseconds) (the fencing token, strictly increasing across all grants of the key, also
///   across a restart that lost the counter, unless the server's clock went back further than the
///   time between grants), then SET key token PX ttl. It checks before it writes: a failure leaves
///   the key as it was.
/// - Release deletes the key only while it still holds our token, and PUBLISHes on the channel
///   `<key>:released`, which waiters of every zkcoro process listen on. A waiter also tries again
///   when the key's TTL runs out (a crashed holder publishes nothing), and behind a holder that is
///   not zkcoro's (redis-py's Lock publishes nothing) on a bounded backoff of 5-50 ms.
/// - Redis keeps no queue: across processes this lock is not FIFO. Within a process, tasks queue
///   in memory, FIFO.
/// - Transient failures are waited through while the acquisition's deadline has time left: a
///   grant no replica confirmed (not_replicated, given back), connect_failed, connection_lost,
///   not_master, no_sentinel, read_only, master_down, loading, no_replicas, and on a cluster
///   try_again and cluster_down are tried again
///   after a backoff (50 ms doubling to 1 s, jittered), the master found again through the
///   sentinels; the acquisition fails with the last of them at its deadline (try_acquire tries
///   once). Anything else (no_permission, auth_failed, wrong_type, out_of_memory, a closed
///   client, ...) fails it at once. A client whose first connection failed is closed: see
///   redis_options::first_connect_wait.
/// Its acquisition members (acquire, try_acquire, async_acquire, async_participants, the
/// counters) are basic_mutex's, shared with the ZooKeeper mutex. Reentrancy is per task, as for
/// zkcoro::mutex. A multi_lock takes it as a member (lock_ref), with ZooKeeper locks or other
/// Redis keys. The client must outlive the mutex and its guards.
class ZKCORO_API redis_mutex : public basic_mutex<redis_lock_backend> {
public:
    /// Bad keys (empty, over 1024 bytes) and TTLs make every acquisition fail with bad_key/bad_ttl.
    redis_mutex(redis_client& c, std::string key, redis_mutex_options opts = {});
    /// Moves the lock object; the moved-from object may only be destroyed.
    redis_mutex(redis_mutex&&) noexcept;
    ~redis_mutex();

    /// The lock's key: its name, or `{name}` on a cluster when the name has no hash tag (the rule
    /// of every Redis recipe).
    const std::string& key() const noexcept;
};

}  // namespace zkcoro

#endif
