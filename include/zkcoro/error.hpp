// Error codes of zkcoro: client errors of our own, and ZooKeeper's result codes passed through.
#ifndef ZKCORO_ERROR_HPP
#define ZKCORO_ERROR_HPP

#include <zkcoro/detail/api.hpp>

#include <boost/system/error_code.hpp>

#include <type_traits>

namespace zkcoro {

/// zkcoro reports errors as Boost.System error codes, like Asio itself (so that `co_await` throws
/// on failure); they convert implicitly to std::error_code.
using error_code = boost::system::error_code;

/// Errors found by zkcoro itself, before or instead of asking the server.
/// Category name "zkcoro.client"; values start at 1.
enum class client_errc : int {
    invalid_path = 1,        ///< a path breaks ZooKeeper's rules; check_path() gives the position
    invalid_argument,        ///< an option or argument is out of range
    invalid_connect_string,  ///< the connect string has no usable host:port
    data_too_large,          ///< node data larger than client_config::max_data_size
    closed,                  ///< the client was closed (or never connected) while the operation waited
    session_expired,         ///< the session expired while the operation or watch was pending
    connect_timeout,         ///< no session established within client_config::connect_timeout
    not_connected,           ///< the operation needs a connection that async_connect has not made yet
    auth_failed,             ///< the server rejected the credentials given in client_config::auth
    operation_in_progress,   ///< a second concurrent call of an operation that allows only one
    not_owner,               ///< a lock was released by a task that does not hold it
    lock_lost,               ///< the lock's session may have expired or its node is gone
    upgrade_not_supported,   ///< read lock held, write lock asked: it could never be granted
    name_resolution_failed,  ///< no host name of the connect string resolved to an address
    chroot_not_found,        ///< the connect string's chroot does not exist on the server
    not_revocable,           ///< a revocation was awaited on a guard acquired without mutex_options::revocable
    not_supported,           ///< the lock's backend cannot do this (e.g. a ZooKeeper transaction on a Redis lease)
    empty_guard,             ///< a guard already released (a second release), moved from, or default-constructed
    would_deadlock,          ///< client_config::detect_deadlocks: the wait would close a cycle of this process's tasks
    internal_error,          ///< an unexpected exception in the library's own code (a bug); the operation did not complete
};

/// The category of client_errc.
ZKCORO_API const boost::system::error_category& client_category() noexcept;

/// ZooKeeper's own result codes, with ZooKeeper's own numbers (the C client's ZNONODE is -101,
/// so zk_errc::no_node is -101): errors the server or the C client reported, passed through
/// unchanged. Compare with them instead of with numbers: `ec == zk_errc::no_node`.
/// Category name "zkcoro.zookeeper".
enum class zk_errc : int {
    system_error = -1,                        ///< ZSYSTEMERROR
    runtime_inconsistency = -2,               ///< ZRUNTIMEINCONSISTENCY (a transaction's rolled-back op; for a
                                              ///< request, a reply out of order: the C client then
                                              ///< reconnects, and it is retriable as a lost connection)
    data_inconsistency = -3,                  ///< ZDATAINCONSISTENCY
    connection_loss = -4,                     ///< ZCONNECTIONLOSS
    marshalling_error = -5,                   ///< ZMARSHALLINGERROR
    unimplemented = -6,                       ///< ZUNIMPLEMENTED
    operation_timeout = -7,                   ///< ZOPERATIONTIMEOUT
    bad_arguments = -8,                       ///< ZBADARGUMENTS
    invalid_state = -9,                       ///< ZINVALIDSTATE
    new_config_no_quorum = -13,               ///< ZNEWCONFIGNOQUORUM
    reconfig_in_progress = -14,               ///< ZRECONFIGINPROGRESS
    ssl_connection_error = -15,               ///< ZSSLCONNECTIONERROR
    api_error = -100,                         ///< ZAPIERROR
    no_node = -101,                           ///< ZNONODE
    no_auth = -102,                           ///< ZNOAUTH
    bad_version = -103,                       ///< ZBADVERSION
    no_children_for_ephemerals = -108,        ///< ZNOCHILDRENFOREPHEMERALS
    node_exists = -110,                       ///< ZNODEEXISTS
    not_empty = -111,                         ///< ZNOTEMPTY
    session_expired = -112,                   ///< ZSESSIONEXPIRED
    invalid_callback = -113,                  ///< ZINVALIDCALLBACK
    invalid_acl = -114,                       ///< ZINVALIDACL
    auth_failed = -115,                       ///< ZAUTHFAILED
    closing = -116,                           ///< ZCLOSING
    nothing = -117,                           ///< ZNOTHING
    session_moved = -118,                     ///< ZSESSIONMOVED
    not_read_only = -119,                     ///< ZNOTREADONLY
    ephemeral_on_local_session = -120,        ///< ZEPHEMERALONLOCALSESSION
    no_watcher = -121,                        ///< ZNOWATCHER
    reconfig_disabled = -123,                 ///< ZRECONFIGDISABLED
    session_closed_requires_sasl_auth = -124, ///< ZSESSIONCLOSEDREQUIRESASLAUTH
    throttled_op = -127,                      ///< ZTHROTTLEDOP
};

/// The category of zk_errc (and of any other integer the C client returns).
ZKCORO_API const boost::system::error_category& zookeeper_category() noexcept;

inline error_code make_error_code(client_errc e) noexcept
{
    return {static_cast<int>(e), client_category()};
}

inline error_code make_error_code(zk_errc e) noexcept
{
    return {static_cast<int>(e), zookeeper_category()};
}

/// Wraps a ZooKeeper C client result code (an int). ZOK (0) yields an empty error_code.
inline error_code make_zk_error(int rc) noexcept
{
    return {rc, zookeeper_category()};
}

/// What an error means for the caller: the one classification every retry decision uses.
enum class error_kind {
    none,          ///< no error
    retriable,     ///< transient (connection loss, operation timeout, throttled, a reply out of
                   ///< order (ZRUNTIMEINCONSISTENCY); Redis: connection
                   ///< failed or lost, READONLY, OOM, NOREPLICAS, LOADING, MASTERDOWN; NOPERM is
                   ///< permanent): the same request may succeed later on the
                   ///< same session; a create (or SET) may still have happened. Connecting, on
                   ///< both backends: no server reached in time or none answering (ZooKeeper's
                   ///< connect_timeout, Redis' connect_failed) and no address found
                   ///< (name_resolution_failed, Redis' no_sentinel) are retriable: a server that
                   ///< is down at start-up may come up, and async_connect may be called again
    session_lost,  ///< the session is gone (expired, closed, authentication failed, lock lost;
                   ///< Redis: the client closed, credentials refused): nothing more will succeed
                   ///< on it; locks held through it are lost
    permanent,     ///< anything else: retrying the same request cannot help (bad input, a
                   ///< refused operation, a chroot that does not exist)
};

namespace detail {
/// The base of zkcoro's error categories (client, ZooKeeper, Redis): each classifies its own
/// codes, and classify() asks the category of the error it is given.
class classifying_category : public boost::system::error_category {
public:
    /// The kind of a non-zero code of this category.
    virtual error_kind kind(int code) const noexcept = 0;
};
}  // namespace detail

ZKCORO_API error_kind classify(const error_code& ec) noexcept;

/// classify(ec) == error_kind::session_lost.
inline bool is_session_lost(const error_code& ec) noexcept { return classify(ec) == error_kind::session_lost; }

/// classify(ec) == error_kind::retriable.
inline bool is_retriable(const error_code& ec) noexcept { return classify(ec) == error_kind::retriable; }

}  // namespace zkcoro

// Boost.System traits: not part of the reference.
/// @cond
template <>
struct boost::system::is_error_code_enum<zkcoro::client_errc> : std::true_type {};
template <>
struct boost::system::is_error_code_enum<zkcoro::zk_errc> : std::true_type {};
/// @endcond

#endif
