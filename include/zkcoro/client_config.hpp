// Everything a client needs to know to establish and keep a ZooKeeper session.
#ifndef ZKCORO_CLIENT_CONFIG_HPP
#define ZKCORO_CLIENT_CONFIG_HPP

#include <zkcoro/detail/api.hpp>
#include <zkcoro/error.hpp>
#include <zkcoro/types.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zkcoro {

/// A session's identity: enough to re-attach to it from another handle.
struct session_credentials {
    std::int64_t id = 0;  ///< the session id
    std::string password;  ///< 16 opaque bytes
};

/// One authentication to send on every connection, e.g. {"digest", "user:secret"}.
struct auth_info {
    std::string scheme;  ///< e.g. "digest"
    std::string credentials;  ///< e.g. "user:secret" for digest
};

/// How a client connects: the ensemble, the session timeout, liveness checks, credentials and logging.
struct client_config {
    /// "host:port[,host:port...][/chroot]"; a host is a name, an IPv4 address or a bracketed IPv6
    /// address. Names are resolved with Asio's asynchronous resolver before the C library sees
    /// them (at the first connect and after each expiry), so no thread blocks in a lookup; Asio's
    /// resolver does that on a thread of its own, started at the first name (numeric addresses
    /// need none).
    std::string connect_string = "127.0.0.1:2181";

    /// Asked of the server, which clamps it to [2, 20] x its tickTime; see negotiated value with
    /// client::session_timeout().
    std::chrono::milliseconds session_timeout{10000};

    /// async_connect fails with client_errc::connect_timeout after this long. Zero disables.
    std::chrono::milliseconds connect_timeout{15000};

    /// Our own liveness check of the server we are connected to. The C library gives a silent
    /// server 2/3 of the session timeout before it moves on; a stopped (SIGSTOP) or hung member
    /// would use most of the session. When nothing has been heard from the server for
    /// ping_interval, the client sends a request of its own (exists on "/"); when nothing at all
    /// comes back within ping_timeout, it drops that connection and moves to the next member of
    /// the connect string, keeping the session. Zero (the default): 1/6 of the negotiated session
    /// timeout each, so a frozen member costs at most about 1/3 of it. A negative ping_interval
    /// turns the check off (only the C library's own timeout is left).
    std::chrono::milliseconds ping_interval{0};
    std::chrono::milliseconds ping_timeout{0};  ///< see ping_interval; zero: 1/6 of the negotiated session timeout

    /// Sent on every connection (e.g. digest auth). Failure ends the client (client_errc::auth_failed).
    std::vector<auth_info> auth{};

    /// ACL given to nodes this client creates. Default: world:anyone, all permissions.
    acl default_acl = open_acl_unsafe();

    /// Largest node data accepted before sending (the server's jute.maxbuffer is 1 MiB by default).
    std::size_t max_data_size = 1024 * 1024;

    /// Where log lines go, the C library's own included. Called on a thread that runs the
    /// client's executor, with no zkcoro lock held. Empty: nothing is logged.
    std::function<void(log_level, std::string_view)> log{};

    /// Lines above this level are not produced. The C library's level is process-wide: the most
    /// verbose level of all live clients applies to it.
    log_level log_threshold = log_level::warn;

    /// The label in the default data of this client's lock nodes (zkcoro/holder_data.hpp:
    /// "host=... pid=... program=... label=..."), e.g. a job or service name. Empty: none.
    std::string holder_label{};

    /// Debug: exact in-process deadlock detection for this client's mutexes. The engine records
    /// which task of this process holds which lock and which waits for which; an acquisition that
    /// would close a cycle (its task holds a lock that the holder of the asked lock waits for,
    /// directly or through other tasks) fails at once with client_errc::would_deadlock, and the
    /// tasks are logged, instead of waiting forever. Tasks of other processes are not seen (their
    /// cycles are candidates for `zklock status -r --cycles`). Off: nothing is recorded.
    bool detect_deadlocks = false;

    /// Re-attach to an existing session instead of creating one (tests, hand-over).
    std::optional<session_credentials> resume_session{};

    /// Follow the ensemble as it is reconfigured (ZooKeeper 3.5+ dynamic reconfiguration), as
    /// Curator's EnsembleTracker does. On (the default), the client reads `/zookeeper/config`
    /// (outside any chroot) with a watch at each connection and at each change, and connects to
    /// the members it lists (participants and observers, at their client addresses; host names
    /// resolved like the connect string's) instead of the connect string's hosts, keeping the
    /// connect string's chroot: a long-running client keeps reaching the ensemble after every
    /// member it was started with has been replaced, and a new session after an expiry starts
    /// from the members last read.
    ///
    /// \par What a change does
    /// The session stays where it is while its server is still a member; when members were added
    /// it moves with probability 1 - old count / new count, to spread the sessions (ZooKeeper's
    /// own rule). When its server left the ensemble the client moves at once to a member of the
    /// new list, with the same session: requests in flight fail with a connection loss, as at any
    /// failover, and a held lock is not lost (its lost policy judges the disconnection). Each
    /// change is logged at info level and counted (client::counters::ensemble_changes);
    /// client::servers() shows the list in use.
    ///
    /// A static configuration (`version=0`: the servers run without `reconfigEnabled`) and a
    /// standalone server are not followed: the connect string is used as given. Off: the connect
    /// string is used as given in every case (after the last of its members has left the ensemble
    /// the session cannot reconnect, and expires). Turn it off where the client reaches the
    /// members through addresses of its own (a proxy, NAT, port forwarding): the configuration
    /// lists the members' own client addresses, which such a client may not reach.
    bool follow_ensemble = true;
};

/// Checks the values of a configuration: connect string syntax (each host:port, port 1-65535,
/// chroot a valid path), durations, sizes. Returns an empty error_code when usable; otherwise
/// client_errc::invalid_connect_string or client_errc::invalid_argument, with `why` set.
ZKCORO_API error_code check_config(const client_config& cfg, std::string* why = nullptr);

}  // namespace zkcoro

#endif
