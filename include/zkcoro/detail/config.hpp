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

// Asio 1.26 (Boost 1.81) is the oldest we build with; newer ones must work unchanged.
static_assert(BOOST_ASIO_VERSION >= 102600, "zkcoro needs Boost.Asio 1.26 (Boost 1.81) or newer");


namespace zkcoro {
namespace asio = boost::asio;

namespace detail {
template <class Sig>
using any_handler = asio::any_completion_handler<Sig>;

// The default completion token: a deferred operation, so `co_await op(args)` works without one.
using default_token = asio::deferred_t;
}  // namespace detail
}  // namespace zkcoro

#endif
