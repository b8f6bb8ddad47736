// zkcoro::semaphore and zkcoro::semaphore_mutex on Curator's InterProcessSemaphoreV2 layout.
#ifndef ZKCORO_SEMAPHORE_HPP
#define ZKCORO_SEMAPHORE_HPP

#include <zkcoro/mutex.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zkcoro {

namespace detail {
struct semaphore_state;
}

/// Tag: read max_leases from a shared count node (Curator's SharedCount: a 4-byte big-endian
/// integer) at every acquisition.
struct shared_count_t {
    explicit constexpr shared_count_t() = default;
};
inline constexpr shared_count_t shared_count{};

/// A counting semaphore shared by every process using the same path, zkcoro's or Curator's
/// InterProcessSemaphoreV2: a mutex at `<path>/locks` serialises entry; each lease is an
/// ephemeral-sequential node `<path>/leases/_c_<uuid>-lease-<seq>`; an acquirer waits until the
/// number of leases is at most max_leases. Max leases is not stored: all participants must agree
/// on it (or share a count node).
///
/// Each lease is a guard: not reentrant, and owned by the guard itself, so it may be released
/// from any task.
///
/// \par Thread safety
/// Distinct objects: safe. Shared objects: safe.
class ZKCORO_API semaphore {
public:
    /// A semaphore of `max_leases` leases at `path`; every participant must use the same number.
    semaphore(client& c, std::string path, int max_leases, mutex_options opts = {});
    /// A semaphore whose number of leases is read from the node `count_path` (Curator's SharedCount).
    semaphore(client& c, std::string path, shared_count_t, std::string count_path, mutex_options opts = {});
    /// Moves the semaphore; the moved-from object may only be destroyed or assigned to.
    semaphore(semaphore&&) noexcept;
    ~semaphore();

    /// n leases, all or nothing, waiting as long as it takes.
    asio::awaitable<std::vector<guard>> acquire(int n = 1);
    /// n leases within `timeout`; an empty optional when the time ran out (none is kept).
    asio::awaitable<std::optional<std::vector<guard>>> acquire(int n, std::chrono::steady_clock::duration timeout);

    /// Handler: void(error_code, std::optional<std::vector<guard>>). Cancellation: terminal,
    /// partial (no lease is kept). Errors: invalid_argument (n < 1 or n > max_leases, or a bad
    /// count node), invalid_path, session loss, ZooKeeper errors.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::optional<std::vector<guard>>))
                  CompletionToken = detail::default_token>
    auto async_acquire(int n, std::chrono::steady_clock::duration timeout, CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code, std::optional<std::vector<guard>>)>(
            detail::make_initiation(get_executor(),
                                    [this](auto handler, int count, std::chrono::steady_clock::duration t) {
                                        start_acquire(count, t, std::move(handler));
                                    }),
            token, n, timeout);
    }

    /// The semaphore's path.
    const std::string& path() const noexcept;
    /// The executor of the semaphore's client.
    client::executor_type get_executor() const noexcept;

    /// The leases under `<path>/leases`, holders first (the first max_leases in order), each with
    /// lock_mode::lease (or foreign). Handler: void(error_code, std::vector<participant>).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::vector<participant>))
                  CompletionToken = detail::default_token>
    auto async_participants(CompletionToken&& token = {})
    {
        return leases().async_participants(std::forward<CompletionToken>(token));
    }

    /// A snapshot of this semaphore's counters: one acquisition per acquire call (of n leases),
    /// losses per lease.
    lock_metrics metrics() const;

private:
    void start_acquire(int n, std::chrono::steady_clock::duration t,
                       detail::any_handler<void(error_code, std::optional<std::vector<guard>>)> handler);
    mutex& leases() const noexcept;
    std::shared_ptr<detail::semaphore_state> state_;
};

/// Curator's InterProcessSemaphoreMutex: the semaphore with one lease. Not reentrant: a second
/// acquire by the same task waits like anyone else's (and would wait for itself). The guard owns
/// the lock and may be moved to and released by another task. It does not exclude a `mutex` on
/// the same path (different layout): interop means the same recipe on the same path.
class ZKCORO_API semaphore_mutex {
public:
    /// A semaphore mutex at `path` (a semaphore of one lease).
    semaphore_mutex(client& c, std::string path, mutex_options opts = {});

    /// Takes the lease, waiting as long as it takes; throws on error.
    asio::awaitable<guard> acquire();
    /// An empty optional when `timeout` passed first.
    asio::awaitable<std::optional<guard>> acquire(std::chrono::steady_clock::duration timeout);

    /// The owner is ignored (ownership belongs to the guard); present so that a semaphore_mutex
    /// fits wherever a mutex does. Handler: void(error_code, std::optional<guard>).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::optional<guard>))
                  CompletionToken = detail::default_token>
    auto async_acquire(owner_id, std::chrono::steady_clock::duration timeout, CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code, std::optional<guard>)>(
            detail::make_initiation(get_executor(), [this](auto handler, std::chrono::steady_clock::duration t) {
                start_acquire(t, std::move(handler));
            }),
            token, timeout);
    }

    /// The lock's path.
    const std::string& path() const noexcept { return sem_.path(); }
    /// The executor of the lock's client.
    client::executor_type get_executor() const noexcept { return sem_.get_executor(); }
    /// The counters of this lock object.
    lock_metrics metrics() const { return sem_.metrics(); }

    /// The lease (holder) and the waiter, as for a semaphore of one lease.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::vector<participant>))
                  CompletionToken = detail::default_token>
    auto async_participants(CompletionToken&& token = {})
    {
        return sem_.async_participants(std::forward<CompletionToken>(token));
    }

private:
    void start_acquire(std::chrono::steady_clock::duration t,
                       detail::any_handler<void(error_code, std::optional<guard>)> handler);
    semaphore sem_;
};

}  // namespace zkcoro

#endif
