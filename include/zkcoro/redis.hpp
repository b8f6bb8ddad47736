// zkcoro::redis_client: a Redis connection driven by an Asio executor (hiredis' asynchronous API,
// no thread of its own), for the Redis lock (redis_mutex.hpp) and for commands of your own.
//
// Built when Debian's libhiredis-dev is found (the Meson option `redis`).
#ifndef ZKCORO_REDIS_HPP
#define ZKCORO_REDIS_HPP

#include <zkcoro/client.hpp>
#include <zkcoro/detail/config.hpp>
#include <zkcoro/error.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace zkcoro {

/// Errors of the Redis connection and lock (category "zkcoro.redis").
enum class redis_errc {
    bad_url = 1,         ///< not redis://[[user]:password@]host:port[/db], redis+sentinel://... nor redis+cluster://...
    connect_failed,      ///< the TCP connection could not be made (refused, unreachable, timed out)
    auth_failed,         ///< AUTH was refused (wrong or missing user or password)
    not_redis,           ///< the peer does not speak Redis' protocol
    connection_lost,     ///< the connection dropped before the reply came
    closed,              ///< the client was closed
    error_reply,         ///< the server answered with an error (its text is in the reply)
    unexpected_reply,    ///< a reply of a type the command cannot give
    bad_key,             ///< a lock key that is empty or too long
    bad_ttl,             ///< a lock TTL out of range
    read_only,           ///< READONLY: the server is a replica (point the client at the master)
    out_of_memory,       ///< OOM: the server reached maxmemory and refuses writes
    wrong_type,          ///< WRONGTYPE: a key of the lock holds a value of another type
    bad_fencing_counter, ///< <key>:fencing holds something that is not a fencing counter
    no_sentinel,         ///< no sentinel of a redis+sentinel:// URL answered (the message names them)
    unknown_master,      ///< the sentinels know no master of that name
    not_master,          ///< the address the sentinels gave is not (or no longer) a master (ROLE)
    not_replicated,      ///< WAIT: fewer replicas than asked confirmed the lock's write in time
    no_permission,       ///< NOPERM (or a script's ACL refusal): the ACL user may not run a command or use a key
    no_replicas,         ///< NOREPLICAS: the master has fewer good replicas than min-replicas-to-write
    loading,             ///< LOADING: the server is loading its data set after a start
    master_down,         ///< MASTERDOWN: a replica lost its master and serves no stale data
    // The semaphore's (redis_semaphore).
    bad_leases,          ///< a semaphore's max_leases below 1, or an acquisition of n < 1 or n > max_leases leases
    leases_mismatch,     ///< the semaphore's P:max holds another max_leases than this participant's
    try_again,           ///< TRYAGAIN (cluster): the keys' slot is migrating with them partly moved, for over 2 s
    cluster_down,        ///< CLUSTERDOWN (cluster): no master serves the key's slot now (a failover under way)
};
/// The code of an error reply's text, by the server's error prefix: read_only (READONLY),
/// out_of_memory (OOM), wrong_type (WRONGTYPE), no_permission (NOPERM, or a script's "ERR The user
/// executing the script can't ..."), no_replicas (NOREPLICAS), loading (LOADING), master_down
/// (MASTERDOWN), leases_mismatch (ZKMAXLEASES, from a semaphore's script), try_again (TRYAGAIN),
/// cluster_down (CLUSTERDOWN), else error_reply. The text itself stays in the reply (and in the
/// throwing acquire()'s what()).
ZKCORO_API error_code redis_error_code(std::string_view error_text) noexcept;
ZKCORO_API const boost::system::error_category& redis_category() noexcept;
inline error_code make_error_code(redis_errc e) noexcept { return {static_cast<int>(e), redis_category()}; }

/// redis://[[user]:password@]host:port[/db] (host: a name, an IPv4 address or [an IPv6 address];
/// port 1-65535; db any int from 0: the server's SELECT refuses one beyond its `databases`, 16 by
/// default). A password alone may be given as "password@" or
/// ":password@" (AUTH password); "user:password@" sends AUTH user password (an ACL user, Redis 6+).
/// redis+sentinel://[[user]:password@]host:port[,host:port...]/MASTER[/db]: the sentinels to ask
/// for the master named MASTER (port 26379 when left out); the credentials are the master's (and
/// its replicas'), the sentinels are asked without any.
/// redis+cluster://[[user]:password@]host:port[,host:port...]: seed nodes of a Redis Cluster
/// (port 6379 when left out), any of them, master or replica: the client asks them for the slot
/// map and talks to every master (each command to the master of its key's slot). The credentials
/// are every node's; there is no /db (a cluster has database 0 only).
/// The scheme is case-insensitive; rediss:// (TLS) is refused: Debian's hiredis 0.14 has no TLS.
struct redis_url {
    /// A sentinel's address.
    struct endpoint {
        std::string host;  ///< a name, an IPv4 address or an IPv6 address (without brackets)
        std::uint16_t port = 0;  ///< 1-65535
    };
    std::string host;  ///< the server (empty with sentinels: the master is found at each connection)
    std::uint16_t port = 6379;  ///< 1-65535 (0 with sentinels)
    std::string user;  ///< an ACL user (empty: AUTH with the password alone)
    std::string password;  ///< empty: no AUTH
    int db = 0;  ///< the database SELECTed after connecting
    std::vector<endpoint> sentinels;  ///< redis+sentinel:// only: the sentinels, in the order asked
    std::string master_name;          ///< redis+sentinel:// only: the master's name
    std::vector<endpoint> cluster_nodes;  ///< redis+cluster:// only: the seed nodes, in the order asked
};
/// Parses and checks `text`. On failure, ec is redis_errc::bad_url and `why` says what is wrong
/// (the URL in it with its password shown as ***, see redact_url).
ZKCORO_API redis_url parse_redis_url(std::string_view text, error_code& ec, std::string* why = nullptr);
/// `text` (a URL or a connect string) as messages and logs may show it: the password of its user
/// info replaced by "***". User info is what comes before the last '@' after a scheme ("redis://",
/// or any "word:" not followed by a digit), as parse_redis_url reads it; in a connect string
/// without a scheme, what comes before an '@' ahead of the first '/'. Its user (before the first
/// ':') stays: "redis://user:pw@h:1/2" -> "redis://user:***@h:1/2",
/// "redis://pw@h" -> "redis://***@h". Text without user info is returned as it is.
ZKCORO_API std::string redact_url(std::string_view text);

/// One reply, copied out of hiredis'.
struct redis_reply {
    /// The kind of a reply.
    enum class kind { nil, status, error, integer, string, array };
    kind type = kind::nil;  ///< the kind of this reply
    std::int64_t integer = 0;  ///< integer replies
    std::string str;  ///< status, error and string replies
    std::vector<redis_reply> elements;  ///< array replies
};

enum class redis_state {
    idle,          ///< not connected yet (no async_connect and no command so far)
    connecting,    ///< the first connection is being made
    connected,
    reconnecting,  ///< the connection dropped; reconnecting with backoff
    closed,        ///< close() was called, or the first connection failed
};
ZKCORO_API std::string_view to_string(redis_state s) noexcept;

/// Options of a redis_client: timeouts, reconnection backoff, logging.
struct redis_options {
    /// Bound on one connection attempt: TCP connect plus AUTH, SELECT and PING.
    std::chrono::milliseconds connect_timeout{5000};
    /// Reconnection backoff after a drop: from min, doubling, up to max.
    std::chrono::milliseconds reconnect_min{50};
    std::chrono::milliseconds reconnect_max{2000};  ///< the longest backoff between attempts
    /// How long a first connection keeps trying after a transient failure: refused, dropped or
    /// timed out, no sentinel answering, the address the sentinels named not (yet) a master, a
    /// PING answered with LOADING (a server loading its data) or MASTERDOWN. It
    /// tries again with the reconnection backoff (shortened to what is left) until this much time
    /// has passed since it began, then the client closes with the last failure. Refused
    /// credentials, an unknown master name, a peer that does not speak Redis fail at once.
    /// 0 (the default): a redis:// client gives up at the first failure, a redis+sentinel:// one
    /// after 6 attempts (about 3 s with the default backoff). Negative: one attempt, also through
    /// Sentinel (zklock -n). An acquisition waits through a
    /// failover only on a client that is connected or still connecting: set this to its timeout
    /// when the first connection may meet one (zklock sets it to -t).
    std::chrono::milliseconds first_connect_wait{0};
    /// Where the client's log lines go (none when empty).
    std::function<void(log_level, std::string_view)> log;
    /// Replica-acknowledged lock writes: a redis_mutex's grant and renewal complete only once
    /// `WAIT replica_acks replica_ack_timeout` has confirmed that many replicas have them (else the
    /// grant is given back and fails with redis_errc::not_replicated; the renewal counts as not
    /// confirmed). -1 (the default): 1 with a redis+sentinel:// or redis+cluster:// URL (on a
    /// cluster, WAIT goes to the master that ran the lock's script, on that connection), 0 (off)
    /// with redis://.
    /// WAIT holds the client's command connection: while replicas do not answer, every command of
    /// this client waits up to replica_ack_timeout behind a grant or renewal.
    int replica_acks = -1;
    std::chrono::milliseconds replica_ack_timeout{500};  ///< the WAIT's timeout
};

namespace detail {
class redis_impl;
}  // namespace detail

/// One Redis connection for commands, plus one in subscribe mode (opened at the first
/// subscription) for release notifications. Reconnects with backoff after a drop once it has
/// connected; a first connection that fails closes the client with the reason.
///
/// \par Thread safety
/// Distinct objects: safe. Shared objects: safe (operations are carried out on a strand of the
/// executor).
class ZKCORO_API redis_client {
public:
    /// The executor the client's operations complete on by default.
    using executor_type = asio::any_io_executor;

    /// `url`: redis://[[user]:password@]host:port[/db], or
    /// redis+sentinel://[[user]:password@]host:port[,host:port...]/MASTER[/db] (see redis_url above
    /// for every form); a bad one makes every operation fail with redis_errc::bad_url (see
    /// last_error()).
    redis_client(executor_type ex, std::string_view url, redis_options opts = {});
    redis_client(const redis_client&) = delete;
    redis_client& operator=(const redis_client&) = delete;
    ~redis_client();  ///< closes

    /// The executor the client's operations complete on by default.
    executor_type get_executor() const noexcept;
    /// Where the connection stands.
    redis_state state() const noexcept;
    /// Why the first connection failed, or the URL was refused ("" otherwise).
    std::string last_error() const;
    /// The parsed URL (its password included).
    const redis_url& url() const noexcept;
    /// The server the command connection last connected to, "HOST:PORT" ("[V6]:PORT"): with
    /// redis+sentinel://, the master the sentinels named; "" before the first connection.
    std::string server() const;

    /// Connects (AUTH, SELECT, PING). Completes when connected, or with the first attempt's error
    /// (the client is then closed). Handler: void(error_code).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code)) CompletionToken = detail::default_token>
    auto async_connect(CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code)>(
            detail::make_initiation(get_executor(), [this](auto h) { start_connect(std::move(h)); }), token);
    }

    /// Runs one command (arguments binary-safe). Sent once connected; a command whose reply the
    /// connection's drop swallowed fails with connection_lost (it may or may not have run). An
    /// error reply completes with redis_error_code(its text) (read_only, out_of_memory,
    /// wrong_type, no_permission, ... or error_reply) and the reply (its text in str).
    /// Per-operation cancellation (terminal, partial): completes at once with operation_aborted;
    /// the command may still run on the server. Handler: void(error_code, redis_reply).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, redis_reply)) CompletionToken = detail::default_token>
    auto async_exec(std::vector<std::string> args, CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code, redis_reply)>(
            detail::make_initiation(get_executor(),
                                    [this](auto h, std::vector<std::string> a) { start_exec(std::move(a), std::move(h)); }),
            token, std::move(args));
    }

    /// Completes when the state differs from `known` (at once if it already does), with the new
    /// state. Handler: void(error_code, redis_state).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, redis_state)) CompletionToken = detail::default_token>
    auto async_wait_state(redis_state known, CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code, redis_state)>(
            detail::make_initiation(get_executor(),
                                    [this](auto h, redis_state k) { start_wait_state(k, std::move(h)); }),
            token, known);
    }

    /// Closes both connections; pending commands and the acquisitions of its redis_mutexes fail
    /// with redis_errc::closed at once.
    void close();

    /// How many times the command connection was (re)established, and how many commands were sent.
    std::uint64_t connects() const noexcept;
    /// How many commands were sent.
    std::uint64_t commands_sent() const noexcept;

private:
    friend struct detail::access;
    void start_connect(detail::any_handler<void(error_code)> h);
    void start_exec(std::vector<std::string> args, detail::any_handler<void(error_code, redis_reply)> h);
    void start_wait_state(redis_state known, detail::any_handler<void(error_code, redis_state)> h);

    std::shared_ptr<detail::redis_impl> impl_;
};

}  // namespace zkcoro

// Boost.System traits: not part of the reference.
/// @cond
template <>
struct boost::system::is_error_code_enum<zkcoro::redis_errc> : std::true_type {};
/// @endcond

#endif
