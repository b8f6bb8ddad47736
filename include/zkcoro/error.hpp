// Error codes of zkcoro: client errors of our own, and ZooKeeper's result codes passed through.
#ifndef ZKCORO_ERROR_HPP
#define ZKCORO_ERROR_HPP

#include <zkcoro/detail/api.hpp>

#include <boost/system/error_code.hpp>

#include <type_traits>

namespace zkcoro {

// zkcoro reports errors as Boost.System error codes, like Asio itself (so that `co_await` throws
// on failure); they convert implicitly to std::error_code.
using error_code = boost::system::error_code;

// Errors found by zkcoro itself, before or instead of asking the server.
// Category name "zkcoro.client"; values start at 1.
enum class client_errc : int {
    invalid_path = 1,        // a path breaks ZooKeeper's rules; check_path() gives the position
    invalid_argument,        // an option or argument is out of range
    invalid_connect_string,  // the connect string has no usable host:port
    data_too_large,          // node data larger than client_config::max_data_size
    closed,                  // the client was closed (or never connected) while the operation waited
    session_expired,         // the session expired while the operation or watch was pending
    connect_timeout,         // no session established within client_config::connect_timeout
    not_connected,           // the operation needs a connection that async_connect has not made yet
    auth_failed,             // the server rejected the credentials given in client_config::auth
    operation_in_progress,   // a second concurrent call of an operation that allows only one
    not_owner,               // a lock was released by a task that does not hold it
    lock_lost,               // the lock's session may have expired or its node is gone
    upgrade_not_supported,   // read lock held, write lock asked: it could never be granted
    name_resolution_failed,  // no host name of the connect string resolved to an address
    chroot_not_found,        // the connect string's chroot does not exist on the server
};

// The category of client_errc.
ZKCORO_API const boost::system::error_category& client_category() noexcept;

// ZooKeeper's own result codes (ZOK, ZNONODE, ...) passed through unchanged: the value of the
// error_code is the C client's integer. Category name "zkcoro.zookeeper".
ZKCORO_API const boost::system::error_category& zookeeper_category() noexcept;

inline error_code make_error_code(client_errc e) noexcept
{
    return {static_cast<int>(e), client_category()};
}

// Wraps a ZooKeeper C client result code. ZOK (0) yields an empty error_code.
inline error_code make_zk_error(int rc) noexcept
{
    return {rc, zookeeper_category()};
}

// The session is gone (expired, closed, or authentication failed): retrying on the same
// session cannot succeed. Locks held through it must be considered lost.
ZKCORO_API bool is_session_lost(const error_code& ec) noexcept;

// A transient failure (connection loss, operation timeout): the same request may succeed
// later on the same session. Note that a non-idempotent create may still have happened.
ZKCORO_API bool is_retriable(const error_code& ec) noexcept;

}  // namespace zkcoro

template <>
struct boost::system::is_error_code_enum<zkcoro::client_errc> : std::true_type {};

#endif
