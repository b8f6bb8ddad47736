// A one-shot ZooKeeper watch, left by a read operation.
#ifndef ZKCORO_WATCH_HPP
#define ZKCORO_WATCH_HPP

#include <zkcoro/detail/config.hpp>
#include <zkcoro/types.hpp>

#include <memory>
#include <system_error>

namespace zkcoro {

namespace detail {
struct access;
struct watch_state;
ZKCORO_API void async_watch_wait_impl(std::shared_ptr<watch_state> st,
                                      any_handler<void(error_code, watch_event)> h);
}  // namespace detail

/// Tag asking a read operation (exists, get_data, get_children) to leave a watch.
struct leave_watch_t {
    explicit constexpr leave_watch_t() = default;
};
inline constexpr leave_watch_t leave_watch{};

/// The handle of a watch left by exists/get_data/get_children with `leave_watch`. The server
/// fires a watch at most once; the event is kept until async_wait collects it.
///
/// \par Thread safety
/// Distinct objects: safe. Shared objects: unsafe. The event may arrive on any thread running
/// the client's executor; async_wait may be called from any thread.
class ZKCORO_API watch {
public:
    watch() = default;

    /// True when this handle refers to a watch (the read asked for one and succeeded).
    bool valid() const noexcept { return st_ != nullptr; }

    /// The client's executor (a system executor for an empty handle).
    asio::any_io_executor get_executor() const noexcept;

    /// True once the watch fired or failed (async_wait would complete at once).
    bool ready() const noexcept;

    /// Waits for the watch to fire.
    ///
    /// Handler signature: void(error_code, watch_event).
    /// Executor: the handler's associated executor, else the client's.
    /// Per-operation cancellation: terminal and partial; the wait completes with
    ///   asio::error::operation_aborted and the watch stays armed: a later async_wait still gets it.
    /// Errors: client_errc::session_expired or client_errc::closed when the session ends first
    ///   (a watch survives reconnection within one session); client_errc::invalid_argument on an
    ///   empty handle or when another async_wait is already pending on this watch.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, watch_event))
                  CompletionToken = detail::default_token>
    auto async_wait(CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code, watch_event)>(
            detail::make_initiation(get_executor(),
                                    [st = st_](auto handler) { detail::async_watch_wait_impl(st, std::move(handler)); }),
            token);
    }

private:
    friend struct detail::access;
    explicit watch(std::shared_ptr<detail::watch_state> st) noexcept : st_(std::move(st)) {}

    std::shared_ptr<detail::watch_state> st_;
};

}  // namespace zkcoro

#endif
