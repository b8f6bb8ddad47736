// zkcoro::redis_mutex: the single-instance Redis lock (SET key token NX PX ttl, compare-and-delete
// release), behind the same guard as the ZooKeeper locks: one lease, one lost signal, one fencing
// token. Built when Debian's libhiredis-dev is found.
#ifndef ZKCORO_REDIS_MUTEX_HPP
#define ZKCORO_REDIS_MUTEX_HPP

#include <zkcoro/detail/config.hpp>
#include <zkcoro/guard.hpp>
#include <zkcoro/metrics.hpp>
#include <zkcoro/queue_order.hpp>
#include <zkcoro/redis.hpp>
#include <zkcoro/this_task.hpp>

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zkcoro {

namespace detail {
class lock_object;
}  // namespace detail

/// Options of a redis_mutex.
struct redis_mutex_options {
    /// How long the key lives without renewal: a crashed holder's lock frees itself after this.
    /// A holder renews it every third of the TTL. 100 ms to 24 h.
    std::chrono::milliseconds ttl{10000};
    /// The guard counts as lost when no renewal has been confirmed by the last confirmed one
    /// + ttl - margin (the key may have expired on the server). Zero: a fifth of the TTL. Must be
    /// below a third of the TTL.
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
/// Reentrancy is per task, as for zkcoro::mutex. A multi_lock takes it as a member (lock_ref), with
/// ZooKeeper locks or other Redis keys. The client must outlive the mutex and its guards.
class ZKCORO_API redis_mutex {
public:
    /// Bad keys (empty, over 1024 bytes) and TTLs make every acquisition fail with bad_key/bad_ttl.
    redis_mutex(redis_client& c, std::string key, redis_mutex_options opts = {});
    redis_mutex(const redis_mutex&) = delete;
    redis_mutex& operator=(const redis_mutex&) = delete;
    /// Moves the lock object; the moved-from object may only be destroyed or assigned to.
    redis_mutex(redis_mutex&&) noexcept;
    ~redis_mutex();

    /// The lock's key.
    const std::string& key() const noexcept;
    /// The executor of the lock's client.
    redis_client::executor_type get_executor() const noexcept;

    /// Waits until the current task holds the lock. Throws boost::system::system_error on failure.
    asio::awaitable<guard> acquire();
    /// Waits at most `timeout`; an empty optional when the time ran out (not an error).
    asio::awaitable<std::optional<guard>> acquire(std::chrono::steady_clock::duration timeout);
    /// One attempt: one round trip, then an answer.
    asio::awaitable<std::optional<guard>> try_acquire();

    /// The operation behind acquire, for any completion token and an explicit owner.
    /// timeout: duration::max() waits forever. Handler: void(error_code, std::optional<guard>).
    /// Per-operation cancellation: terminal and partial. Errors: bad_key, bad_ttl, bad_url,
    /// connect_failed, auth_failed, not_redis, connection_lost (the connection dropped during the
    /// attempt; retried while the deadline allows), closed, operation_aborted.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::optional<guard>))
                  CompletionToken = detail::default_token>
    auto async_acquire(owner_id owner, std::chrono::steady_clock::duration timeout, CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code, std::optional<guard>)>(
            detail::make_initiation(get_executor(),
                                    [this](auto handler, owner_id o, std::chrono::steady_clock::duration t) {
                                        start_acquire(o, t, std::move(handler));
                                    }),
            token, owner, timeout);
    }

    /// Who holds the key: one participant (name and path: the key; data: the holder's value;
    /// holds: true), or none when it is free. Redis keeps no queue: waiters are not listed.
    /// Handler: void(error_code, std::vector<participant>).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::vector<participant>))
                  CompletionToken = detail::default_token>
    auto async_participants(CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code, std::vector<participant>)>(
            detail::make_initiation(get_executor(), [this](auto handler) { start_participants(std::move(handler)); }),
            token);
    }

    /// How many times the lock went from one task of this process to another without a round trip to Redis.
    std::uint64_t local_handoffs() const;
    /// The counters of this lock object.
    lock_metrics metrics() const;
    /// How many times task `owner` holds this lock (reentrant acquisitions), 0 when it does not.
    std::size_t hold_count(owner_id owner) const;

private:
    void start_acquire(owner_id o, std::chrono::steady_clock::duration t,
                       detail::any_handler<void(error_code, std::optional<guard>)> handler);
    void start_participants(detail::any_handler<void(error_code, std::vector<participant>)> handler);

    std::shared_ptr<detail::lock_object> state_;
};

}  // namespace zkcoro

#endif
