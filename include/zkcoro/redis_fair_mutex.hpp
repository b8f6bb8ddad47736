// zkcoro::redis_fair_mutex: a fair (FIFO) lock on one Redis server (or the master Sentinel names):
// waiters queue on the server, in arrival order, and only the first of them is granted. The same
// guard as the other locks: one lease, one lost signal, one fencing token.
#ifndef ZKCORO_REDIS_FAIR_MUTEX_HPP
#define ZKCORO_REDIS_FAIR_MUTEX_HPP

#include <zkcoro/basic_mutex.hpp>
#include <zkcoro/detail/config.hpp>
#include <zkcoro/redis.hpp>
#include <zkcoro/redis_mutex.hpp>

#include <chrono>
#include <string>

namespace zkcoro {

/// Options of a redis_fair_mutex.
struct redis_fair_mutex_options {
    /// How long the key lives without renewal (as redis_mutex_options::ttl). 100 ms to 24 h.
    std::chrono::milliseconds ttl{10000};
    /// As redis_mutex_options::safety_margin (zero: a fifth of the TTL).
    std::chrono::milliseconds safety_margin{0};
    /// How long a waiter stays in the queue without coming back: a waiting acquisition renews its
    /// place every third of it; one that does not (its process crashed, its connection is cut) is
    /// taken out of the queue once it has passed, and the waiters behind it move up. Zero: the TTL.
    /// 100 ms to 24 h. A crashed waiter at the head delays the next grant by up to this much.
    std::chrono::milliseconds waiter_timeout{0};
};

/// A reentrant, fair lock on one Redis key: acquisitions are granted in the order they reached
/// the server, across processes (and across the tasks of one process: each queues on the server
/// in its own right; there is no in-process handoff, which would let one process's tasks pass
/// the others').
/// - The keys: the key itself (holding the holder's value while held, as redis_mutex's, so that a
///   redis_mutex or redis-py's Lock on the same key is excluded too), and under the prefix P
///   (the key when it has a hash tag `{...}`, else `{key}`: every key on the key's cluster slot):
///   `P:fencing` (the fencing counter), `P:queue` (a list of the waiters), `P:timeouts` (a sorted
///   set: when each waiter counts as gone), and the channels `P:wake:<process>`. On a
///   redis+cluster:// client a key without a hash tag is used as `{key}` (key() says so), as a
///   redis_mutex's: the key is then P, and every key and channel is on one slot.
/// - Acquire runs one script: waiters whose timeout passed leave the queue; the key is granted
///   when it is free and nobody else heads the queue (fencing token max(counter + 1, the server's
///   TIME in microseconds), as redis_mutex's); else the acquisition queues (once) and its timeout
///   is set to now + waiter_timeout. It waits for a message naming it, and comes back every third
///   of waiter_timeout, when the key's TTL runs out (at the head) or when the head's timeout does
///   (second in line).
/// - Release deletes the key while it holds our value and publishes the next waiter's name on its
///   own process's channel: only that waiter tries again (no herd).
/// - Cancellation, the deadline and a failure take the waiter out of the queue (and give back a
///   grant its last attempt may have made). When everyone has left, only `P:fencing` remains;
///   `P:queue` and `P:timeouts` expire 1 ms after the latest waiter's timeout, so waiters that
///   never come back (crashed, their client closed while waiting) leave no key behind either.
/// - Lease, renewal, the lost signal, transient failures and WAIT for replicas: as redis_mutex.
/// Its acquisition members are basic_mutex's; a multi_lock takes it as a member (lock_ref).
/// The client must outlive the mutex and its guards.
///
/// \par Thread safety
/// Distinct objects: safe. Shared objects: safe (any task on any thread may acquire).
class ZKCORO_API redis_fair_mutex : public basic_mutex<redis_lock_backend> {
public:
    /// Bad keys (empty, over 1024 bytes), TTLs and waiter timeouts make every acquisition fail
    /// with bad_key/bad_ttl.
    redis_fair_mutex(redis_client& c, std::string key, redis_fair_mutex_options opts = {});
    /// Moves the lock object; the moved-from object may only be destroyed.
    redis_fair_mutex(redis_fair_mutex&&) noexcept;
    ~redis_fair_mutex();

    /// The lock's key: as given, or `{key}` on a cluster when it has no hash tag.
    const std::string& key() const noexcept;
};

}  // namespace zkcoro

#endif
