// zkcoro::redis_semaphore: a counting semaphore on one Redis server (or the master Sentinel
// names, or a Redis Cluster's shard): at most max_leases leases held at once, each acquisition
// taking n of them, all or nothing, in arrival order. Leases expire with their holder.
#ifndef ZKCORO_REDIS_SEMAPHORE_HPP
#define ZKCORO_REDIS_SEMAPHORE_HPP

#include <zkcoro/basic_mutex.hpp>
#include <zkcoro/detail/config.hpp>
#include <zkcoro/redis.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zkcoro {

/// Options of a redis_semaphore.
struct redis_semaphore_options {
    /// How long a holder's leases live without renewal: a crashed holder's leases come back after
    /// this. A holder renews them every third of it. 100 ms to 24 h.
    std::chrono::milliseconds ttl{10000};
    /// As redis_mutex_options::safety_margin (zero: a fifth of the TTL).
    std::chrono::milliseconds safety_margin{0};
    /// How long a waiter keeps its place in the queue without coming back (as
    /// redis_fair_mutex_options::waiter_timeout). Zero: the TTL. 100 ms to 24 h.
    std::chrono::milliseconds waiter_timeout{0};
};

/// A counting semaphore of `max_leases` leases on Redis, shared by every zkcoro process that uses
/// the same key and the same max_leases.
/// - The keys, under the prefix P (the key when it has a hash tag `{...}`, else `{key}`, as
///   redis_fair_mutex's: every key on one cluster slot): `P:leases` (a sorted set: each holder's
///   value, scored with the server's time in ms at which its leases expire), `P:queue` (a list of
///   the waiters, in arrival order), `P:timeouts` (a sorted set: when each waiter counts as
///   gone), `P:max` (max_leases, while anyone holds or waits), `P:fencing` (the fencing counter)
///   and the channels `P:wake:<process>`. The key itself is never written.
/// - acquire(n) runs one script: holders whose leases expired and waiters whose timeout passed
///   are dropped; it is granted when the leases still free cover its n and those of every waiter
///   queued before it (FIFO: a later acquisition of 1 does not pass an earlier one of 3), else
///   it queues. All or nothing: a waiter holds no lease, so two acquisitions of several leases
///   never each hold part of what they need.
/// - One guard per acquisition, holding its n leases: one lease renewal, one lost signal, one
///   fencing token (P:fencing: max(counter + 1, the server's TIME in µs), the rule of the other
///   Redis locks). Not reentrant: a second acquisition by the same task takes more leases.
/// - Release gives the n leases back and tells the waiters at the head whose leases now fit,
///   and only them (a message naming each on its process's channel).
/// - Every participant must pass the same max_leases: the first acquisition stores it in P:max
///   (kept while anyone holds or waits), and an acquisition with another count fails with
///   redis_errc::leases_mismatch, writing nothing.
/// - Transient failures, WAIT for replicas, cancellation and deadlines: as redis_fair_mutex. When
///   everyone has left, only `P:fencing` remains.
/// The client must outlive the semaphore and its guards.
///
/// \par Thread safety
/// Distinct objects: safe. Shared objects: safe (any task on any thread may acquire).
class ZKCORO_API redis_semaphore {
public:
    /// The client's executor type.
    using executor_type = redis_client::executor_type;

    /// Bad keys (empty, over 1024 bytes: bad_key), TTLs and waiter timeouts (bad_ttl) and a
    /// max_leases below 1 (bad_leases) make every acquisition fail with that code.
    redis_semaphore(redis_client& c, std::string key, int max_leases, redis_semaphore_options opts = {});
    /// Moves the semaphore; the moved-from object may only be destroyed.
    redis_semaphore(redis_semaphore&&) noexcept;
    ~redis_semaphore();

    /// n leases, all or nothing, waiting as long as it takes; throws boost::system::system_error
    /// on error (its what() names the key and, when the server answered with an error, its text).
    asio::awaitable<guard> acquire(int n = 1);
    /// n leases within `timeout`; an empty optional when the time ran out (nothing is kept).
    asio::awaitable<std::optional<guard>> acquire(int n, std::chrono::steady_clock::duration timeout);
    /// One attempt: n leases now, or an empty optional.
    asio::awaitable<std::optional<guard>> try_acquire(int n = 1);

    /// The operation behind acquire, for any completion token. `timeout`: duration::max() waits
    /// for ever. Handler: void(error_code, std::optional<guard>). Cancellation: terminal, partial
    /// (nothing is left on the server). Errors: bad_leases (n < 1 or n > max_leases, or
    /// max_leases < 1), leases_mismatch, bad_key, bad_ttl, wrong_type (a key of the semaphore
    /// holds another type), bad_fencing_counter, closed, and redis_mutex's transient errors at
    /// the deadline.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::optional<guard>))
                  CompletionToken = detail::default_token>
    auto async_acquire(int n, std::chrono::steady_clock::duration timeout, CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code, std::optional<guard>)>(
            detail::make_initiation(get_executor(),
                                    [this](auto handler, int count, std::chrono::steady_clock::duration t) {
                                        start_acquire(count, t, std::move(handler));
                                    }),
            token, n, timeout);
    }

    /// The holders (holds: true; name and data: the holder's value, whose ":s<n>" suffix says how
    /// many leases it holds; path: P:leases), then the waiters in queue order (path: P:queue), as
    /// the server has them (a holder whose leases expired is listed until a script drops it).
    /// Handler: void(error_code, std::vector<participant>).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::vector<participant>))
                  CompletionToken = detail::default_token>
    auto async_participants(CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code, std::vector<participant>)>(
            detail::make_initiation(get_executor(),
                                    [this](auto handler) {
                                        detail::start_lock_participants(state_, std::move(handler));
                                    }),
            token);
    }

    /// The semaphore's key: its name, or `{name}` on a cluster when the name has no hash tag (the
    /// rule of every Redis recipe); never written itself.
    const std::string& key() const noexcept;
    /// The number of leases, as given.
    int max_leases() const noexcept { return max_; }
    /// The executor of the semaphore's client.
    executor_type get_executor() const noexcept;
    /// A snapshot of the semaphore's counters: one acquisition per acquire call (of n leases).
    lock_metrics metrics() const;

private:
    void start_acquire(int n, std::chrono::steady_clock::duration timeout,
                       detail::any_handler<void(error_code, std::optional<guard>)> handler);
    std::shared_ptr<detail::lock_object> state_;
    int max_;
};

}  // namespace zkcoro

#endif
