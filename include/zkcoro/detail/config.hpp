// Build-wide definitions for zkcoro's headers.
#ifndef ZKCORO_DETAIL_CONFIG_HPP
#define ZKCORO_DETAIL_CONFIG_HPP

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/version.hpp>
#include <zkcoro/detail/api.hpp>
#include <zkcoro/error.hpp>

#include <type_traits>
#include <utility>

// Asio 1.26 (Boost 1.81) is the oldest we build with; newer ones must work unchanged.
static_assert(BOOST_ASIO_VERSION >= 102600, "zkcoro needs Boost.Asio 1.26 (Boost 1.81) or newer");


namespace zkcoro {
namespace asio = boost::asio;

namespace detail {
template <class Sig>
using any_handler = asio::any_completion_handler<Sig>;

// The default completion token: a deferred operation, so `co_await op(args)` works without one.
using default_token = asio::deferred_t;

template <class T>
inline constexpr bool is_executor_binder = false;
template <class T, class E>
inline constexpr bool is_executor_binder<asio::executor_binder<T, E>> = true;

// Calls start(handler), with the handler first bound to its io_context's own executor where it
// names that executor as an any_io_executor (a coroutine's handler does). The type-erased handler
// could otherwise only hand such an executor on as a shared, reference-counted completion
// executor: two allocations per operation. Same executor, held in place.
template <class Handler, class Start>
void start_bound(Handler&& handler, Start&& start)
{
    // (A handler the caller bound to an executor already is left as it is: Asio 1.26 cannot bind
    // an executor_binder again.)
    if constexpr (std::is_same_v<asio::associated_executor_t<std::decay_t<Handler>>, asio::any_io_executor> &&
                  !is_executor_binder<std::decay_t<Handler>>) {
        const auto hex = asio::get_associated_executor(handler);
        if (const auto* ctx = hex.template target<asio::io_context::executor_type>()) {
            std::forward<Start>(start)(asio::bind_executor(*ctx, std::forward<Handler>(handler)));
            return;
        }
    }
    std::forward<Start>(start)(std::forward<Handler>(handler));
}

// The initiation object of every asynchronous operation of zkcoro: it carries the I/O object's
// executor (get_executor), which partial completion tokens such as asio::cancel_after and
// asio::as_tuple ask the initiation for, and forwards to a start function.
template <class Start>
struct initiation {
    using executor_type = asio::any_io_executor;
    executor_type ex;
    Start start;
    executor_type get_executor() const noexcept { return ex; }
    template <class Handler, class... Args>
    void operator()(Handler&& handler, Args&&... args) const
    {
        start_bound(std::forward<Handler>(handler),
                    [&](auto&& h) { start(std::forward<decltype(h)>(h), std::forward<Args>(args)...); });
    }
};
template <class Start>
initiation<Start> make_initiation(asio::any_io_executor ex, Start start)
{
    return {std::move(ex), std::move(start)};
}
}  // namespace detail
}  // namespace zkcoro

#endif
