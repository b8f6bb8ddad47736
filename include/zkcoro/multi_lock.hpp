// zkcoro::multi_lock: several locks taken all or nothing, in an order that cannot deadlock.
#ifndef ZKCORO_MULTI_LOCK_HPP
#define ZKCORO_MULTI_LOCK_HPP

#include <zkcoro/mutex.hpp>
#include <zkcoro/semaphore.hpp>
#include <zkcoro/shared_mutex.hpp>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace zkcoro {

/// A lock a multi_lock can take: a mutex, either side of a shared_mutex (reader() / writer()), a
/// semaphore_mutex, or a redis_mutex. Refers to the object, which must outlive the lock_ref and
/// its operations.
class ZKCORO_API lock_ref {
public:
    /// Refers to `m`: any lock of the library with the same async_acquire and async_participants
    /// (a mutex, one side of a shared_mutex, a semaphore_mutex, or a redis_mutex, whose key is
    /// its path here).
    template <class Lock>
        requires(!std::is_same_v<std::remove_cv_t<Lock>, lock_ref> &&
                 requires(Lock& l, owner_id o, std::chrono::steady_clock::duration t,
                          detail::any_handler<void(error_code, std::optional<guard>)> h) {
                     l.get_executor();
                     l.async_acquire(o, t, std::move(h));
                 })
    lock_ref(Lock& m) : path_(&name_of(m)), ex_(m.get_executor())
    {
        if constexpr (requires { m.is_read_side(); })
            read_side_ = m.is_read_side();
        start_ = [&m](owner_id o, std::chrono::steady_clock::duration t,
                      detail::any_handler<void(error_code, std::optional<guard>)> h) {
            m.async_acquire(o, t, std::move(h));
        };
        participants_ = [&m](detail::any_handler<void(error_code, std::vector<participant>)> h) {
            m.async_participants(std::move(h));
        };
    }

    /// The lock's path (a Redis lock: its key).
    const std::string& path() const noexcept { return *path_; }
    /// The executor of the lock's client.
    asio::any_io_executor get_executor() const noexcept { return ex_; }
    /// For one path, the write side sorts before the read side (a downgrade, not an upgrade).
    bool is_read_side() const noexcept { return read_side_; }

    /// The referred lock's async_acquire. Handler: void(error_code, std::optional<guard>).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::optional<guard>))
                  CompletionToken = detail::default_token>
    auto async_acquire(owner_id owner, std::chrono::steady_clock::duration timeout, CompletionToken&& token = {}) const
    {
        return asio::async_initiate<CompletionToken, void(error_code, std::optional<guard>)>(
            detail::make_initiation(ex_, [this](auto handler, owner_id o, std::chrono::steady_clock::duration t) {
                start_(o, t, std::move(handler));
            }),
            token, owner, timeout);
    }

    /// The referred lock's async_participants. Handler: void(error_code, std::vector<participant>).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::vector<participant>))
                  CompletionToken = detail::default_token>
    auto async_participants(CompletionToken&& token = {}) const
    {
        return asio::async_initiate<CompletionToken, void(error_code, std::vector<participant>)>(
            detail::make_initiation(ex_, [this](auto handler) { participants_(std::move(handler)); }), token);
    }

private:
    template <class Lock>
    static const std::string& name_of(Lock& m) noexcept
    {
        if constexpr (requires { m.key(); })
            return m.key();
        else
            return m.path();
    }

    using start_fn = std::function<void(owner_id, std::chrono::steady_clock::duration,
                                        detail::any_handler<void(error_code, std::optional<guard>)>)>;
    using participants_fn = std::function<void(detail::any_handler<void(error_code, std::vector<participant>)>)>;

    const std::string* path_;
    asio::any_io_executor ex_;
    bool read_side_ = false;
    start_fn start_;
    participants_fn participants_;
};

/// What a multi_lock holds: one guard per lock, in acquisition order. Released in reverse order,
/// by release() or when destroyed.
class ZKCORO_API multi_guard {
public:
    multi_guard() = default;
    /// Takes over the guards of one acquisition by task `owner` (made by multi_lock).
    explicit multi_guard(std::vector<guard> g, owner_id owner) noexcept : guards_(std::move(g)), owner_(owner) {}
    /// Moves the holds; the moved-from multi_guard holds nothing.
    multi_guard(multi_guard&&) noexcept = default;
    /// Releases what this one holds (as when destroyed), then takes the other's holds.
    multi_guard& operator=(multi_guard&& o) noexcept;
    ~multi_guard();

    /// The members' guards, in acquisition order.
    std::vector<guard>& guards() noexcept { return guards_; }
    /// The smallest of the members' fencing tokens is not meaningful across locks: each member's
    /// guard carries its own.
    bool lost() const noexcept;

    /// Releases every member, last acquired first, from the task that acquired them.
    asio::awaitable<void> release();

private:
    void release_all() noexcept;
    std::vector<guard> guards_;
    owner_id owner_ = 0;
};

/// Takes a set of locks all or nothing within ONE deadline for the whole set. Locks are taken
/// sorted by path (so that two multi-locks over overlapping sets cannot deadlock), and on
/// failure, timeout or cancellation the ones already taken are released in reverse order. A
/// member lost before the set is complete is never returned: the set is given back and taken
/// again, in order, within the deadline.
///
/// \par Thread safety
/// Distinct objects: safe. Shared objects: safe.
class ZKCORO_API multi_lock {
public:
    /// A multi-lock over `locks` (each must outlive it).
    explicit multi_lock(std::vector<lock_ref> locks);

    /// Takes every lock, waiting as long as it takes; throws on error (nothing is kept then).
    asio::awaitable<multi_guard> acquire();
    /// An empty optional when the deadline passed before every lock was held (none is kept).
    asio::awaitable<std::optional<multi_guard>> acquire(std::chrono::steady_clock::duration timeout);

    /// Handler: void(error_code, std::optional<multi_guard>). Cancellation: terminal, partial.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::optional<multi_guard>))
                  CompletionToken = detail::default_token>
    auto async_acquire(owner_id owner, std::chrono::steady_clock::duration timeout, CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code, std::optional<multi_guard>)>(
            detail::make_initiation(get_executor(),
                                    [this](auto handler, owner_id o, std::chrono::steady_clock::duration t) {
                                        start_acquire(o, t, std::move(handler));
                                    }),
            token, owner, timeout);
    }

    /// Every member's queue, in the order the locks are taken (participant::path tells which lock
    /// a node belongs to), each member's holders first.
    /// Handler: void(error_code, std::vector<participant>).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::vector<participant>))
                  CompletionToken = detail::default_token>
    auto async_participants(CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code, std::vector<participant>)>(
            detail::make_initiation(get_executor(), [this](auto handler) { start_participants(std::move(handler)); }),
            token);
    }

    /// The locks in the order they are taken.
    std::vector<std::string> order() const;

    /// The first member's executor (a system executor when there is none).
    asio::any_io_executor get_executor() const noexcept;

private:
    void start_acquire(owner_id o, std::chrono::steady_clock::duration t,
                       detail::any_handler<void(error_code, std::optional<multi_guard>)> handler);
    void start_participants(detail::any_handler<void(error_code, std::vector<participant>)> handler);
    std::vector<lock_ref> locks_;
    asio::any_io_executor ex_;
};

}  // namespace zkcoro

#endif
