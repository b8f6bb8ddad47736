// zkcoro::client: one ZooKeeper session, driven by an Asio executor.
#ifndef ZKCORO_CLIENT_HPP
#define ZKCORO_CLIENT_HPP

#include <zkcoro/client_config.hpp>
#include <zkcoro/detail/config.hpp>
#include <zkcoro/error.hpp>
#include <zkcoro/types.hpp>
#include <zkcoro/watch.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

namespace zkcoro {

/// The reply of client::async_create.
struct create_result {
    std::string path;   ///< the created node's path (with the sequence number for sequential modes)
    zkcoro::node_stat stat;  ///< its Stat; stat.czxid is the create's transaction id
};

/// The reply of client::async_exists.
struct exists_result {
    std::optional<zkcoro::node_stat> stat;  ///< empty when the node does not exist (not an error)
    zkcoro::watch watch;               ///< valid when leave_watch was given
};

/// The reply of client::async_get_data.
struct data_result {
    std::string data;  ///< the node's data
    zkcoro::node_stat stat;  ///< its Stat
    zkcoro::watch watch;  ///< valid when leave_watch was given
};

/// The reply of client::async_get_children.
struct children_result {
    std::vector<std::string> children;  ///< names, not paths, in the server's order (unsorted)
    zkcoro::node_stat stat;             ///< the parent's Stat
    zkcoro::watch watch;                ///< valid when leave_watch was given
};

/// The operations of a transaction (async_multi).
struct create_op {
    std::string path;  ///< the node to create (the prefix of its name for sequential modes)
    std::string data;  ///< its data
    create_mode mode = create_mode::persistent;  ///< persistent, ephemeral, sequential or container
};
/// The delete of a transaction.
struct remove_op {
    std::string path;  ///< the node to delete
    std::int32_t version = -1;  ///< -1: any version
};
/// The data write of a transaction.
struct set_data_op {
    std::string path;  ///< the node to write
    std::string data;  ///< its new data
    std::int32_t version = -1;  ///< the version it must have; -1: any
};
/// The check of a transaction: fails the whole transaction unless `path` has `version` (-1: exists at all).
struct check_op {
    std::string path;  ///< the node to check
    std::int32_t version = -1;  ///< the version it must have; -1: any (it must exist)
};
using multi_op = std::variant<create_op, remove_op, set_data_op, check_op>;

/// The outcome of one operation of a transaction.
struct multi_result {
    error_code ec;  ///< this operation's own result (ZooKeeper reports ZRUNTIMEINCONSISTENCY
                         /// for operations rolled back because another one failed)
    std::string path;    ///< create: the created path
    zkcoro::node_stat stat;   ///< create and set_data: the node's new Stat
};

namespace detail {
class client_impl;
struct access;
}  // namespace detail

/// A ZooKeeper client: one session at a time (a new one after expiry), on one executor.
///
/// Every operation is an Asio asynchronous operation taking any completion token; with no token
/// it returns a deferred operation, so `co_await c.async_get_data("/a")` works. Handlers run on
/// their associated executor (the client's when none), never inside the initiating call.
///
/// Per-operation cancellation (all operations but async_connect/async_close): terminal and
/// partial. A request already sent cannot be taken back: the caller completes at once with
/// asio::error::operation_aborted; the reply is still read, and a node that an abandoned
/// ephemeral or sequential create made is deleted.
///
/// \par Thread safety
/// Distinct objects: safe. Shared objects: safe; every member function may be called from any
/// thread. All calls into the ZooKeeper C library, for every client in the process, are
/// serialised by one process-wide lock (the single-threaded C library has global state).
class ZKCORO_API client {
public:
    /// The executor the client's operations complete on by default.
    using executor_type = asio::any_io_executor;

    /// Creates a client; nothing is sent until async_connect. An invalid configuration is
    /// reported by async_connect (see check_config).
    client(executor_type ex, client_config cfg);
    client(const client&) = delete;
    client& operator=(const client&) = delete;
    /// Moves the client; the moved-from object may only be destroyed or assigned to.
    client(client&&) noexcept;
    /// Moves the client; the moved-from object may only be destroyed or assigned to.
    client& operator=(client&&) noexcept;
    /// Calls close(): pending operations complete with client_errc::closed.
    ~client();

    /// The executor the client's operations complete on by default.
    executor_type get_executor() const noexcept;

    /// Establishes the session (or waits until it is). Completes with success once connected,
    /// with client_errc::connect_timeout after client_config::connect_timeout, with
    /// client_errc::auth_failed, client_errc::closed, or a configuration error. The client then
    /// keeps the session, reconnects, and replaces an expired session with a new one, until
    /// close().
    /// Handler signature: void(error_code). Cancellation: terminal; stops waiting only.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code)) CompletionToken = detail::default_token>
    auto async_connect(CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code)>(
            initiation{this}, token, op_connect{});
    }

    /// Closes the session now: every pending operation and watch completes with
    /// client_errc::closed, and the server is told to end the session (ephemeral nodes vanish
    /// at once). Never blocks the calling thread: the C library's close, which can block for
    /// seconds over a dead link, runs on a background thread. Idempotent.
    void close() noexcept;

    /// Like close(), and completes when the server has been told (or the attempt failed), so
    /// that the session's ephemeral nodes are gone when it completes on a healthy link.
    /// Handler signature: void(error_code).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code)) CompletionToken = detail::default_token>
    auto async_close(CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code)>(
            initiation{this}, token, op_close{});
    }

    /// Creates a node. Handler signature: void(error_code, create_result).
    /// Errors: ZooKeeper's ZNODEEXISTS, ZNONODE (parent missing), ZNOCHILDRENFOREPHEMERALS,
    /// ZNOAUTH...; client_errc::invalid_path / data_too_large before anything is sent.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, create_result))
                  CompletionToken = detail::default_token>
    auto async_create(std::string_view path, std::string_view data, create_mode mode,
                      CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code, create_result)>(
            initiation{this}, token, op_create{std::string(path), std::string(data), mode});
    }

    /// Deletes a node if its version matches (-1: any). Handler: void(error_code).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code)) CompletionToken = detail::default_token>
    auto async_remove(std::string_view path, std::int32_t version = -1, CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code)>(
            initiation{this}, token, op_remove{std::string(path), version});
    }

    /// Reads a node's Stat; a missing node is not an error (result.stat is empty).
    /// With leave_watch: the watch fires on created, deleted or data_changed.
    /// Handler signature: void(error_code, exists_result).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, exists_result))
                  CompletionToken = detail::default_token>
        requires(!std::is_same_v<std::decay_t<CompletionToken>, leave_watch_t>)
    auto async_exists(std::string_view path, CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code, exists_result)>(
            initiation{this}, token, op_exists{std::string(path), false});
    }
    /// As async_exists above, and leaves a one-shot watch on `path` (exists_result::watch).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, exists_result))
                  CompletionToken = detail::default_token>
    auto async_exists(std::string_view path, leave_watch_t, CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code, exists_result)>(
            initiation{this}, token, op_exists{std::string(path), true});
    }

    /// Reads a node's data and Stat. With leave_watch: fires on deleted or data_changed.
    /// Handler signature: void(error_code, data_result). Errors: ZNONODE, ...
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, data_result))
                  CompletionToken = detail::default_token>
        requires(!std::is_same_v<std::decay_t<CompletionToken>, leave_watch_t>)
    auto async_get_data(std::string_view path, CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code, data_result)>(
            initiation{this}, token, op_get_data{std::string(path), false});
    }
    /// As async_get_data above, and leaves a one-shot watch on the data (data_result::watch).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, data_result))
                  CompletionToken = detail::default_token>
    auto async_get_data(std::string_view path, leave_watch_t, CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code, data_result)>(
            initiation{this}, token, op_get_data{std::string(path), true});
    }

    /// Replaces a node's data if its version matches (-1: any).
    /// Handler signature: void(error_code, node_stat) with the node's new Stat.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, zkcoro::node_stat))
                  CompletionToken = detail::default_token>
    auto async_set_data(std::string_view path, std::string_view data, std::int32_t version = -1,
                        CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code, zkcoro::node_stat)>(
            initiation{this}, token, op_set_data{std::string(path), std::string(data), version});
    }

    /// Lists a node's children (names) and its Stat. With leave_watch: fires on
    /// children_changed or deleted. Handler signature: void(error_code, children_result).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, children_result))
                  CompletionToken = detail::default_token>
        requires(!std::is_same_v<std::decay_t<CompletionToken>, leave_watch_t>)
    auto async_get_children(std::string_view path, CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code, children_result)>(
            initiation{this}, token, op_get_children{std::string(path), false});
    }
    /// As async_get_children above, and leaves a one-shot watch on the children (children_result::watch).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, children_result))
                  CompletionToken = detail::default_token>
    auto async_get_children(std::string_view path, leave_watch_t, CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code, children_result)>(
            initiation{this}, token, op_get_children{std::string(path), true});
    }

    /// Runs operations as one transaction: all or none. The error_code is the first failing
    /// operation's error (empty if all succeeded); each result carries its own.
    /// Handler signature: void(error_code, std::vector<multi_result>).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::vector<multi_result>))
                  CompletionToken = detail::default_token>
    auto async_multi(std::vector<multi_op> ops, CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code, std::vector<multi_result>)>(
            initiation{this}, token, op_multi{std::move(ops)});
    }

    /// Completes when the session state differs from `known` (at once if it already does), with
    /// the current state. Handler signature: void(error_code, session_state).
    /// Cancellation: terminal and partial.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, session_state))
                  CompletionToken = detail::default_token>
    auto async_wait_state(session_state known, CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code, session_state)>(
            initiation{this}, token, op_wait_state{known});
    }

    /// The current state (may change right after the call).
    session_state state() const noexcept;
    /// The current session's id and password (id 0 before the first connection).
    session_credentials session() const;
    /// The session timeout the server granted (zero before the first connection).
    std::chrono::milliseconds session_timeout() const noexcept;
    /// "ip:port" of the server the client is connected to, empty when not connected.
    std::string connected_server() const;
    /// The number of sessions this client has had (1 after the first connect; +1 per expiry).
    std::uint64_t session_generation() const noexcept;
    /// When the client last received anything from the server (a reply, event or ping).
    std::chrono::steady_clock::time_point last_heard() const noexcept;

    /// Counters since the client was made: requests sent and watch events received. For tests
    /// and metrics (e.g. proving that a lock release woke exactly one waiter).
    struct counters {
        std::uint64_t requests = 0;  ///< requests sent to the server
        std::uint64_t watch_events = 0;  ///< watch events received
        /// Member lists read from the ensemble's configuration that differed from the one in use
        /// (client_config::follow_ensemble).
        std::uint64_t ensemble_changes = 0;
    };
    /// The counters since the client was made.
    counters stats() const noexcept;
    /// The servers ("address:port") the client connects to: the connect string's hosts resolved,
    /// or, once it follows a reconfigured ensemble (client_config::follow_ensemble), the members
    /// the ensemble's configuration lists. Empty before the first connect.
    std::vector<std::string> servers() const;

private:
    friend struct detail::access;
    /// A second handle on the same session, for the lock objects built on it: it does not close
    /// the session when destroyed.
    client(std::shared_ptr<detail::client_impl> impl, bool owning) noexcept;
    void log(log_level level, std::string_view message) const;

    struct op_connect {};
    struct op_close {};
    struct op_create { std::string path, data; create_mode mode; };
    struct op_remove { std::string path; std::int32_t version; };
    struct op_exists { std::string path; bool watch; };
    struct op_get_data { std::string path; bool watch; };
    struct op_set_data { std::string path, data; std::int32_t version; };
    struct op_get_children { std::string path; bool watch; };
    struct op_multi { std::vector<multi_op> ops; };
    struct op_wait_state { session_state known; };

    void start(op_connect, detail::any_handler<void(error_code)>);
    void start(op_close, detail::any_handler<void(error_code)>);
    void start(op_create, detail::any_handler<void(error_code, create_result)>);
    void start(op_remove, detail::any_handler<void(error_code)>);
    void start(op_exists, detail::any_handler<void(error_code, exists_result)>);
    void start(op_get_data, detail::any_handler<void(error_code, data_result)>);
    void start(op_set_data, detail::any_handler<void(error_code, zkcoro::node_stat)>);
    void start(op_get_children, detail::any_handler<void(error_code, children_result)>);
    void start(op_multi, detail::any_handler<void(error_code, std::vector<multi_result>)>);
    void start(op_wait_state, detail::any_handler<void(error_code, session_state)>);

    /// Initiation object with the client's executor, so that partial tokens such as
    /// asio::cancel_after and asio::as_tuple work (they ask the initiation for an executor).
    struct initiation {
        client* self;
        using executor_type = client::executor_type;
        executor_type get_executor() const noexcept { return self->get_executor(); }
        template <class Handler, class Op>
        void operator()(Handler&& h, Op op) const
        {
            detail::start_bound(std::forward<Handler>(h), [&](auto&& bh) {
                self->start(std::move(op), std::forward<decltype(bh)>(bh));
            });
        }
    };

    std::shared_ptr<detail::client_impl> impl_;
    bool owning_ = true;
};

}  // namespace zkcoro

#endif
