// zkcoro::basic_mutex: the one public surface of a lock object, whatever its backend. mutex
// (ZooKeeper) and redis_mutex (Redis) derive from it; code that takes a lock without caring where
// it lives takes a basic_mutex<Backend>&. The members forward to functions of the compiled library
// (src/recipes/basic_mutex.cpp), defined once for every backend.
#ifndef ZKCORO_BASIC_MUTEX_HPP
#define ZKCORO_BASIC_MUTEX_HPP

#include <zkcoro/detail/config.hpp>
#include <zkcoro/guard.hpp>
#include <zkcoro/metrics.hpp>
#include <zkcoro/queue_order.hpp>
#include <zkcoro/this_task.hpp>

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace zkcoro {

namespace detail {
struct access;
class lock_object;

// The members of basic_mutex, one definition for every backend (src/recipes/basic_mutex.cpp).
// Each takes the lock object the public object holds, by reference, the coroutines too (as a
// member coroutine takes `this`: the public object must outlive the acquisition); by value, the
// shared_ptr made every waiting task 16 bytes larger (the bench's scale).
ZKCORO_API asio::any_io_executor lock_executor(const std::shared_ptr<lock_object>& s) noexcept;
ZKCORO_API asio::awaitable<guard> lock_acquire(const std::shared_ptr<lock_object>& s);
ZKCORO_API asio::awaitable<std::optional<guard>> lock_acquire_for(const std::shared_ptr<lock_object>& s,
                                                                  std::chrono::steady_clock::duration timeout);
ZKCORO_API void start_lock_acquire(const std::shared_ptr<lock_object>& s, owner_id owner,
                                   std::chrono::steady_clock::duration timeout,
                                   any_handler<void(error_code, std::optional<guard>)> handler);
ZKCORO_API void start_lock_participants(const std::shared_ptr<lock_object>& s,
                                        any_handler<void(error_code, std::vector<participant>)> handler);
ZKCORO_API std::uint64_t lock_local_handoffs(const std::shared_ptr<lock_object>& s);
ZKCORO_API lock_metrics lock_metrics_of(const std::shared_ptr<lock_object>& s);
ZKCORO_API std::size_t lock_hold_count(const std::shared_ptr<lock_object>& s, owner_id owner);
}  // namespace detail

/// A reentrant lock on one resource of a lock server, the members every backend shares.
///
/// Not made directly: a mutex (`Backend` = zookeeper_lock_backend) or a redis_mutex (`Backend` =
/// redis_lock_backend) is one. Take a `basic_mutex<Backend>&` (or a template over `Backend`) to
/// write code that works on either:
/// \code
/// template <class Backend>
/// asio::awaitable<void> with_lock(zkcoro::basic_mutex<Backend>& m)
/// {
///     auto g = co_await m.acquire();
///     // ... the critical section ...
///     co_await g.release();
/// }
/// \endcode
/// To hold locks of both backends together, use a multi_lock (its lock_ref takes either).
///
/// `Backend` is a traits type that names the backend's client (`client_type`) and the executor
/// of its objects (`executor_type`, which an asio::any_io_executor converts to).
///
/// Reentrancy is per task (one co_spawn'd coroutine chain) and per lock object: the same task
/// acquiring N times holds once and needs N releases. Two tasks on one thread are different
/// owners; a task that moves between threads stays one owner. Tasks of this process that wait on
/// one object queue in memory, FIFO, behind the one that waits on the server, unless the
/// backend's options turn the in-process handoff off.
///
/// \par Object lifetimes
/// The client must outlive the lock object and its guards' releases. The lock object must outlive
/// the operations started on it (a deferred async_acquire refers to it until it is started).
///
/// \par Thread safety
/// Distinct objects: safe. Shared objects: safe (any task on any thread may acquire).
template <class Backend>
class basic_mutex {
public:
    /// The backend's traits type.
    using backend_type = Backend;
    /// The client the backend's locks live on.
    using client_type = typename Backend::client_type;
    /// The executor every completion of the lock runs on: its client's.
    using executor_type = typename Backend::executor_type;

    basic_mutex(const basic_mutex&) = delete;
    basic_mutex& operator=(const basic_mutex&) = delete;

    /// The executor of the lock's client.
    executor_type get_executor() const noexcept { return executor_type(detail::lock_executor(state_)); }

    /// Waits until the current task holds the lock.
    ///
    /// \par Errors
    /// Throws boost::system::system_error with the error of async_acquire and a message that names
    /// the operation, the lock's path or key, where it was sent (ZooKeeper: the session and the
    /// server; Redis: the server's own error text, when it answered with one) and, for ZooKeeper,
    /// what to do about it.
    asio::awaitable<guard> acquire() { return detail::lock_acquire(state_); }

    /// Waits at most `timeout`; an empty optional when the time ran out (not an error). Throws as
    /// acquire() does.
    asio::awaitable<std::optional<guard>> acquire(std::chrono::steady_clock::duration timeout)
    {
        return detail::lock_acquire_for(state_, timeout);
    }

    /// acquire with a zero wait: one round trip, then an answer (an empty optional when someone
    /// else holds the lock).
    asio::awaitable<std::optional<guard>> try_acquire()
    {
        return detail::lock_acquire_for(state_, std::chrono::steady_clock::duration::zero());
    }

    /// The operation behind acquire, for any completion token and an explicit owner (e.g. a
    /// callback's or a future's, or one shared on purpose; this_task::id() is the current task's).
    /// `timeout`: duration::max() waits forever; running out completes with an empty optional.
    ///
    /// \par Handler signature
    /// `void(error_code, std::optional<guard>)`
    ///
    /// \par Executor
    /// The handler runs on its associated executor, never inside this call.
    ///
    /// \par Per-operation cancellation
    /// Terminal and partial. Nothing is left behind on the server and nobody else is woken (a
    /// ZooKeeper lock deletes our node).
    ///
    /// \par Errors
    /// - mutex: client_errc::invalid_path, client_errc::closed (the client was closed while the
    ///   acquisition waited, or before it started), ZooKeeper's own (e.g. zk_errc::no_auth),
    ///   operation_aborted. A session that expires while the acquisition waits does not end it:
    ///   its node went with the old session, so it queues again on the client's new session and is
    ///   granted in turn, within the same timeout (an empty optional when that runs out).
    /// - redis_mutex: redis_errc::bad_key, bad_ttl, bad_url, connect_failed, auth_failed,
    ///   not_redis, connection_lost (the connection dropped during the attempt; retried while the
    ///   deadline allows), closed, operation_aborted.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::optional<guard>))
                  CompletionToken = detail::default_token>
    auto async_acquire(owner_id owner, std::chrono::steady_clock::duration timeout, CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code, std::optional<guard>)>(
            detail::make_initiation(get_executor(),
                                    [this](auto handler, owner_id o, std::chrono::steady_clock::duration t) {
                                        detail::start_lock_acquire(state_, o, t, std::move(handler));
                                    }),
            token, owner, timeout);
    }

    /// Who holds the lock and who waits for it.
    /// - mutex: the queue, holders first, then waiters, each in Curator's order, Curator's nodes
    ///   included (like Curator's getParticipantNodes), each with its mode. Foreign children of
    ///   the lock path are listed too (lock_mode::foreign): when the first in order is foreign, it
    ///   is what blocks the lock.
    /// - redis_mutex: one participant (name and path: the key; data: the holder's value; holds:
    ///   true), or none when the key is free. Redis keeps no queue: waiters are not listed.
    ///
    /// \par Handler signature
    /// `void(error_code, std::vector<participant>)`
    ///
    /// \par Per-operation cancellation
    /// None: a listing is a few reads.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::vector<participant>))
                  CompletionToken = detail::default_token>
    auto async_participants(CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code, std::vector<participant>)>(
            detail::make_initiation(get_executor(),
                                    [this](auto handler) { detail::start_lock_participants(state_, std::move(handler)); }),
            token);
    }

    /// How many times the lock passed between tasks of this object in memory, with no round trip
    /// to the server.
    std::uint64_t local_handoffs() const { return detail::lock_local_handoffs(state_); }

    /// A snapshot of this object's counters and wait-time histogram (shared by its moved-to
    /// objects; a shared_mutex side counts its own acquisitions).
    lock_metrics metrics() const { return detail::lock_metrics_of(state_); }

    /// How many acquisitions `owner` holds on this object (reentrant ones counted; 0: none).
    std::size_t hold_count(owner_id owner) const { return detail::lock_hold_count(state_, owner); }

protected:
    /// Takes the lock object a derived class made.
    explicit basic_mutex(std::shared_ptr<detail::lock_object> state) noexcept : state_(std::move(state)) {}
    /// Moves the lock object; the moved-from object may only be destroyed.
    basic_mutex(basic_mutex&&) noexcept = default;
    ~basic_mutex() = default;

    /// The lock object, for the derived class's own members.
    const std::shared_ptr<detail::lock_object>& state() const noexcept { return state_; }

private:
    friend struct detail::access;
    std::shared_ptr<detail::lock_object> state_;
};

}  // namespace zkcoro

#endif
