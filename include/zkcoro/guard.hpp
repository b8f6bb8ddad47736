// zkcoro::guard: a lock held, as a lease that can be lost.
#ifndef ZKCORO_GUARD_HPP
#define ZKCORO_GUARD_HPP

#include <zkcoro/client.hpp>
#include <zkcoro/detail/config.hpp>
#include <zkcoro/this_task.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace zkcoro {

namespace detail {
struct access;
class lease;
ZKCORO_API void async_wait_lost_impl(std::shared_ptr<lease> l, any_handler<void(error_code)> handler);
ZKCORO_API void async_wait_revocation_impl(std::shared_ptr<lease> l, any_handler<void(error_code)> handler);
ZKCORO_API void fenced_multi_impl(std::shared_ptr<lease> l, std::vector<multi_op> ops,
                                  any_handler<void(error_code, std::vector<multi_result>)> handler);
ZKCORO_API bool revocation_requested(const lease* l) noexcept;
ZKCORO_API asio::cancellation_slot revocation_slot(lease* l) noexcept;
}  // namespace detail

/// One acquisition of a lock. The lock is a lease: ZooKeeper ends it when the session ends, so a
/// guard can be lost while held (see lost_policy). Fencing tokens protect what a lost holder
/// might still touch. Guards are made by the locks' acquire operations only.
///
/// Destroying a guard that was not released releases it in the background (never blocks).
///
/// \par Thread safety
/// Distinct objects: safe. Shared objects: unsafe. lost(), fencing_token(), node_path() and
/// session_id() may be called from any thread.
class ZKCORO_API guard {
public:
    /// The executor of the lock's client.
    using executor_type = asio::any_io_executor;

    guard() = default;
    /// Moves the hold: the moved-from guard is no longer valid and releases nothing.
    guard(guard&&) noexcept;
    /// Releases what this guard holds in the background (as when destroyed), then takes the other's hold.
    guard& operator=(guard&&) noexcept;
    guard(const guard&) = delete;
    guard& operator=(const guard&) = delete;
    ~guard();

    /// True until released (a lost guard stays valid until released; its release is a no-op).
    bool valid() const noexcept { return lease_ != nullptr; }
    /// valid().
    explicit operator bool() const noexcept { return valid(); }

    /// Strictly increasing across every grant of this lock, across processes: the lock node's
    /// czxid (ZooKeeper's global transaction id of its creation, never its sequence number) x 64
    /// + the number of in-process handoffs of that node (at most 63). Reentrant acquisitions by
    /// one task share the grant and its token.
    std::int64_t fencing_token() const noexcept;
    /// The lock node, e.g. "/locks/orders/_c_<uuid>-lock-0000000042".
    const std::string& node_path() const noexcept;
    /// The session that owns the lock node.
    std::int64_t session_id() const noexcept;
    /// The task (or explicit owner) that acquired it; its reentrancy count includes this guard.
    owner_id owner() const noexcept { return owner_; }

    /// The executor of the lock's client (where lost_slot() is emitted and handlers run when they
    /// have no executor of their own); a system executor for an empty guard.
    executor_type get_executor() const noexcept;

    /// True once the lock is lost: the session may have expired, has expired, or the node is gone.
    bool lost() const noexcept;

    /// A cancellation slot that receives terminal cancellation when the lock is lost: bind the
    /// critical section's operations to it, e.g.
    ///   co_await write(..., asio::bind_cancellation_slot(g.lost_slot(), asio::use_awaitable));
    /// The signal is emitted on the client's executor: bind it only to operations whose handlers
    /// run there (or on a strand of it). One slot per guard: each call returns the same slot.
    asio::cancellation_slot lost_slot() noexcept;

    /// Completes with client_errc::lock_lost when the lock is lost, or with
    /// asio::error::operation_aborted when it is released first.
    /// Handler signature: void(error_code). Cancellation: terminal, partial.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code)) CompletionToken = detail::default_token>
    auto async_wait_lost(CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code)>(
            detail::make_initiation(get_executor(),
                                    [l = lease_](auto handler) { detail::async_wait_lost_impl(l, std::move(handler)); }),
            token);
    }

    /// Revocation (mutex_options::revocable; Curator's makeRevocable and Revoker): another process
    /// asks the holder to let go (zkcoro::async_request_revoke, Curator's Revoker.attemptRevoke).
    /// Cooperative: nothing is released until this guard is. A request that came while the
    /// acquisition still queued is already set when the guard is made.
    bool revocable() const noexcept;
    /// True once another process asked this holder to let go (see revocable()).
    bool revocation_requested() const noexcept;
    /// Receives terminal cancellation when a revocation is requested: bind the critical section to
    /// it (like lost_slot(), emitted on the client's executor; one slot per guard). A request that
    /// came before the slot was bound is not replayed: test revocation_requested() first, or use
    /// async_wait_revocation.
    asio::cancellation_slot revocation_slot() noexcept;

    /// Completes with success when a revocation is requested (at once if it was already);
    /// client_errc::lock_lost when the lock is lost first, asio::error::operation_aborted when it
    /// is released first, client_errc::not_revocable for a guard of a lock not made revocable.
    /// Handler signature: void(error_code). Cancellation: terminal, partial.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code)) CompletionToken = detail::default_token>
    auto async_wait_revocation(CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code)>(
            detail::make_initiation(get_executor(),
                                    [l = lease_](auto handler) { detail::async_wait_revocation_impl(l, std::move(handler)); }),
            token);
    }

    /// A ZooKeeper transaction fenced by this lock: `check(node_path(), any version)` is put first,
    /// so the transaction commits only while our lock node exists. A holder whose session has
    /// expired (a frozen process that woke up still believing it holds the lock) cannot write,
    /// even through a new session. The results are those of `ops` (the check's is left out).
    /// Handler signature: void(error_code, std::vector<multi_result>).
    /// Errors: client_errc::lock_lost when the lock is known lost or the check found no node (no
    /// operation was applied); the first failing operation's error otherwise (see
    /// client::async_multi); client_errc::empty_guard on an empty guard;
    /// client_errc::not_supported for a lock that has no ZooKeeper node (another backend).
    /// Cancellation: terminal, partial (a transaction already sent may still commit).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::vector<multi_result>))
                  CompletionToken = detail::default_token>
    auto async_multi(std::vector<multi_op> ops, CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code, std::vector<multi_result>)>(
            detail::make_initiation(get_executor(),
                                    [l = lease_](auto handler, std::vector<multi_op> o) {
                                        detail::fenced_multi_impl(l, std::move(o), std::move(handler));
                                    }),
            token, std::move(ops));
    }

    /// Releases this acquisition. Any task or thread may do it: the guard is the ownership (a
    /// guard moved to another task, or released from a completion handler, releases the
    /// acquisition it stands for). Reentrancy counts stay with the task that acquired: a task that
    /// acquired N times holds N guards, and the lock node is deleted when the last of them is
    /// released, whoever releases each (retried until the node is gone). Releasing a lost lock
    /// succeeds. Throws boost::system::system_error when the delete fails for good; the failure is
    /// also logged and counted (lock_metrics::release_failures).
    asio::awaitable<void> release();

    /// Like release(), for any completion token. Handler signature: void(error_code).
    /// Errors: client_errc::empty_guard on an empty guard (released already, moved from);
    /// ZooKeeper's errors when the node cannot be deleted (e.g. ZNOAUTH). A guard destroyed
    /// without release releases in the background; a failure there is logged at error level and
    /// counted, never dropped silently.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code)) CompletionToken = detail::default_token>
    auto async_release(CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code)>(
            detail::make_initiation(get_executor(), [this](auto handler) { release_with(std::move(handler)); }), token);
    }

private:
    friend struct detail::access;
    guard(std::shared_ptr<detail::lease> l, owner_id owner) noexcept;
    void release_with(detail::any_handler<void(error_code)> handler);

    std::shared_ptr<detail::lease> lease_;
    owner_id owner_ = 0;
};

namespace detail {
/// release_on's task: the guard is a coroutine parameter, so it lives in this coroutine's frame.
inline asio::awaitable<void> release_owned(guard g)
{
    co_await g.release();
}
}  // namespace detail

/// Releases `g` in a task of its own, spawned on `ex` (asio::co_spawn), and completes when the
/// release did. The guard travels as a coroutine parameter: the form GCC 12 compiles correctly.
/// Do not write the spawned task as a coroutine lambda that captures the guard by move inside the
/// co_await (`co_spawn(ex, [g = std::move(g)]() mutable -> awaitable<void> {...}, use_awaitable)`):
/// GCC 12.2 destroys such a capture twice, which releases the acquisition twice (docs/building.md,
/// "Compilers"). For example:
///
///     auto g1 = co_await m.acquire();
///     auto g2 = co_await m.acquire();                  // the same task: hold count 2
///     co_await zkcoro::release_on(ex, std::move(g1), asio::use_awaitable);   // hold count 1
///
/// Handler signature: void(std::exception_ptr), co_spawn's: a release that failed for good is a
/// boost::system::system_error in it (with asio::use_awaitable, thrown); client_errc::empty_guard
/// for an empty guard. Cancellation: none (a release is not taken back).
template <class Executor, BOOST_ASIO_COMPLETION_TOKEN_FOR(void(std::exception_ptr))
                              CompletionToken = detail::default_token>
    requires(asio::execution::is_executor<Executor>::value || asio::is_executor<Executor>::value)
auto release_on(const Executor& ex, guard g, CompletionToken&& token = {})
{
    return asio::co_spawn(ex, detail::release_owned(std::move(g)), std::forward<CompletionToken>(token));
}

}  // namespace zkcoro

#endif
