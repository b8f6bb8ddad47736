// Build-wide definitions for zkcoro's headers.
#ifndef ZKCORO_DETAIL_CONFIG_HPP
#define ZKCORO_DETAIL_CONFIG_HPP

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/version.hpp>
#include <zkcoro/detail/api.hpp>
#include <zkcoro/error.hpp>

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
        start(std::forward<Handler>(handler), std::forward<Args>(args)...);
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
