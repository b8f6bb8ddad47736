// zkcoro::mutex: a reentrant distributed mutex on Curator's InterProcessMutex layout.
#ifndef ZKCORO_MUTEX_HPP
#define ZKCORO_MUTEX_HPP

#include <zkcoro/client.hpp>
#include <zkcoro/detail/config.hpp>
#include <zkcoro/guard.hpp>
#include <zkcoro/lock_options.hpp>
#include <zkcoro/metrics.hpp>
#include <zkcoro/queue_order.hpp>
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
struct access;
class lock_object;
}  // namespace detail

/// A reentrant mutex shared by every process that uses the same path, zkcoro's or Curator's
/// InterProcessMutex: ephemeral-sequential nodes `<path>/_c_<uuid>-lock-<seq>`; the lowest
/// sequence holds; each waiter watches only its predecessor.
///
/// Reentrancy is per task (one co_spawn'd coroutine chain) and per mutex object: the same task
/// acquiring N times holds one node and needs N releases. Two tasks on one thread are different
/// owners; a task that moves between threads stays one owner.
///
/// The client must outlive the mutex and its guards' releases.
///
/// \par Thread safety
/// Distinct objects: safe. Shared objects: safe (any task on any thread may acquire).
class ZKCORO_API mutex {
public:
    /// A mutex at `path` on client `c`; nothing is sent until the first acquisition.
    mutex(client& c, std::string path, mutex_options opts = {});
    mutex(const mutex&) = delete;
    mutex& operator=(const mutex&) = delete;
    /// Moves the mutex; the moved-from object may only be destroyed or assigned to.
    mutex(mutex&&) noexcept;
    ~mutex();

    /// The lock's path.
    const std::string& path() const noexcept;
    /// The executor of the mutex's client.
    client::executor_type get_executor() const noexcept;
    /// True for the read side of a shared_mutex.
    bool is_read_side() const noexcept;

    /// Waits until the current task holds the lock. Throws boost::system::system_error on failure
    /// (session lost, invalid path, cancellation).
    asio::awaitable<guard> acquire();

    /// Waits at most `timeout`; an empty optional when the time ran out (not an error).
    asio::awaitable<std::optional<guard>> acquire(std::chrono::steady_clock::duration timeout);

    /// acquire with a zero wait: one round trip, then an answer.
    asio::awaitable<std::optional<guard>> try_acquire();

    /// The operation behind acquire, for any completion token and an explicit owner.
    /// timeout: duration::max() waits forever. Handler: void(error_code, std::optional<guard>).
    /// Per-operation cancellation: terminal and partial; our node is deleted, nobody else is woken.
    /// Errors: invalid_path, session_expired/closed (the session ended while waiting), ZooKeeper's
    /// ZNOAUTH..., operation_aborted.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::optional<guard>))
                  CompletionToken = detail::default_token>
    auto async_acquire(owner_id owner, std::chrono::steady_clock::duration timeout,
                       CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code, std::optional<guard>)>(
            detail::make_initiation(get_executor(),
                                    [this](auto handler, owner_id o, std::chrono::steady_clock::duration t) {
                                        start_acquire(o, t, std::move(handler));
                                    }),
            token, owner, timeout);
    }

    /// The queue, holders first, then waiters, each in Curator's order, Curator's nodes included
    /// (like Curator's getParticipantNodes), each with its mode. Foreign children of the lock path
    /// are listed too (lock_mode::foreign): when the first in order is foreign, it is what blocks
    /// the lock. Handler: void(error_code, std::vector<participant>).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::vector<participant>))
                  CompletionToken = detail::default_token>
    auto async_participants(CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code, std::vector<participant>)>(
            detail::make_initiation(get_executor(), [this](auto handler) { start_participants(std::move(handler)); }),
            token);
    }

    /// How many times the lock passed between tasks of this object in memory.
    std::uint64_t local_handoffs() const;

    /// A snapshot of this object's counters and wait-time histogram (shared by its moved-to
    /// objects; a shared_mutex side counts its own acquisitions).
    lock_metrics metrics() const;

    /// How many acquisitions `owner` holds on this object (0: none).
    std::size_t hold_count(owner_id owner) const;

private:
    friend struct detail::access;
    explicit mutex(std::shared_ptr<detail::lock_object> state) noexcept;

    void start_acquire(owner_id o, std::chrono::steady_clock::duration t,
                       detail::any_handler<void(error_code, std::optional<guard>)> handler);
    void start_participants(detail::any_handler<void(error_code, std::vector<participant>)> handler);

    std::shared_ptr<detail::lock_object> state_;
};

}  // namespace zkcoro

#endif
