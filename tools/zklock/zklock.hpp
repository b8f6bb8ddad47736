// zklock: run a command while holding a ZooKeeper lock (zkcoro, Curator-compatible layouts).
// Shared declarations of the tool's parts: options, exit codes, the queue listing, the child.
#ifndef ZKCORO_TOOLS_ZKLOCK_HPP
#define ZKCORO_TOOLS_ZKLOCK_HPP

#include "exit_codes.hpp"

#include <zkcoro/client.hpp>
#ifdef ZKLOCK_REDIS
#include <zkcoro/redis.hpp>
#endif

#include <boost/asio/awaitable.hpp>

#include <fmt/format.h>

#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace zklock {

namespace asio = boost::asio;

enum class recipe { mutex, read, write, semaphore };
enum class on_lost { term, kill, ignore };
enum class acl_kind { open, creator };

struct options {
    std::string connect;
    std::string connect_origin = "--connect";  // where `connect` came from, for messages
    std::string lock_path;
    std::vector<std::string> command;
    std::optional<double> timeout_s;  // -t; nullopt: wait forever
    bool nonblock = false;
    recipe kind = recipe::mutex;
    int semaphore_leases = 0;
    std::string data;  // empty: "host=H pid=P program=zklock label=COMMAND" (zkcoro/holder_data.hpp)
    on_lost lost_action = on_lost::term;
    // After the --on-lost SIGTERM (or zklock's own death), SIGKILL the command's whole process
    // tree if it is still running after this long. Zero: never.
    std::chrono::milliseconds kill_after{5000};
    int lost_exit_code = exit_code::lost;
    int conflict_exit_code = exit_code::tempfail;  // -E: timed out or would block
    std::vector<zkcoro::auth_info> auth;  // from --auth-file or $ZK_AUTH
    std::string auth_origin;              // "--auth-file FILE" or "$ZK_AUTH"
    acl_kind acl = acl_kind::open;
    bool verbose = false;
    std::chrono::milliseconds session_timeout{10000};
    // With a redis:// connect string: the key's TTL (renewed every third of it while held).
    std::chrono::milliseconds redis_ttl{10000};
    // --fair with a redis:// connect string: the fair lock (zkcoro::redis_fair_mutex), whose
    // waiters are granted in arrival order (a ZooKeeper lock always is).
    bool redis_fair = false;
    std::string session_file;  // hidden, for tests: "<id hex> <password hex>\n" once connected
    // --revocable: the lock node takes revocation requests (Curator's makeRevocable); what to
    // do to the command when one comes (--on-revoke term|ignore).
    bool revocable = false;
    bool revoke_term = true;
    // status subcommand
    bool json = false;
    bool recursive = false;             // -r: every lock under LOCKPATH (tree.cpp)
    bool cycles = false;                // --cycles: the wait-for cycles only; exit 1 if any
    bool dot = false;                   // --dot: the wait-for graph for Graphviz
    std::optional<double> older_than_s; // --older-than: only holds and waits at least this old
    // revoke subcommand: the node to ask (empty: the holder)
    bool revoke = false;
    std::string revoke_node;
};

// A line on stderr with -v.
// Writes a message to stderr. A stderr that cannot take it (a terminal that hung up: EIO) loses
// the message, not the run: fmt::print throws there, and zklock aborted, its command and lock left
// to the session's expiry (a -v message after the terminal closed, or the SIGHUP that says so).
template <typename... T>
void tell(fmt::format_string<T...> f, T&&... args)
{
    try {
        fmt::print(stderr, f, std::forward<T>(args)...);
    } catch (const std::system_error&) {
        std::clearerr(stderr);
    }
}

inline void say(const options& o, std::string_view msg)
{
    if (o.verbose)
        tell("zklock: {}\n", msg);
}

// One node of a lock's queue, as `zklock status` shows it.
struct queue_entry {
    std::string node;          // name under the lock path (or under <path>/leases, <path>/locks)
    std::string path;          // full path
    std::string data;
    std::int64_t session = 0;  // ephemeral owner
    std::int64_t ctime_ms = 0; // server clock, ms since the epoch
    std::string mode;          // "" (mutex), "read"/"write", "lease"/"queued" (semaphore),
                               // "foreign" (a child of no known recipe: it still takes a place
                               // in Curator's order)
    std::string recipe;        // the recipe this entry belongs to (see queue_listing::recipe)
    std::optional<bool> holding;  // known for mutex and read-write nodes
};

struct queue_listing {
    std::string path;
    // "mutex", "read-write", "semaphore" or "none" (no lock nodes); several recipes on one path
    // are joined with '+', e.g. "mutex+semaphore" (they do not exclude each other).
    std::string recipe;
    std::vector<queue_entry> entries;
    // What a reader must know: foreign nodes that block the lock, recipes that do not exclude
    // each other. Printed by `status` and, for the waiting process, on its waiting line.
    std::vector<std::string> notes;
};

// Lists the queue at `path`, holder(s) first, whatever the recipe (detected from the children).
asio::awaitable<queue_listing> list_queue(zkcoro::client& zk, std::string path);

// Lists a semaphore's or a lock's queue assuming `r` (used while waiting, the recipe being known).
asio::awaitable<queue_listing> list_queue_as(zkcoro::client& zk, std::string path, recipe r);

// The human and JSON renderings of `zklock status`.
std::string render_text(const queue_listing& q);
std::string render_json(const queue_listing& q);

// Age in seconds of a node created at ctime_ms (server clock) by the local clock, >= 0.
double age_seconds(std::int64_t ctime_ms);

// Hex session id as ZooKeeper prints it (0x...).
std::string session_hex(std::int64_t id);

// Text from outside (paths, node names, node data, --data, the command's name) made safe for a
// terminal: control characters and invalid UTF-8 are written as \n, \t, \xHH escapes, and a
// backslash as \\. Printable text, UTF-8 included, is unchanged.
std::string escape(std::string_view text);
// The connect string (-c, $ZK_CONNECT) as messages show it: escaped, with a URL's password as ***
// (zkcoro::redact_url). Every message that names the connect string uses it (connection.cpp).
std::string shown_connect(std::string_view connect);

// The child processes (child.cpp).
struct spawn_result {
    pid_t pid = -1;
    int error = 0;  // errno of a failed fork or exec (then pid is -1 for a failed fork)
};
// Descriptors open at startup (inherited from the caller): the command inherits these and only
// these; everything zklock opened itself is closed in the child.
std::set<int> open_descriptors();

// Makes zklock a child subreaper (PR_SET_CHILD_SUBREAPER): every orphaned descendant of the
// command, even one that called setsid(), becomes zklock's child, so zklock can wait for the
// whole tree. False if the kernel refused.
bool become_subreaper();

// Starts the guardian: a process that leads a new process group (the command's group), does
// nothing while zklock lives, and when zklock dies (even of SIGKILL: parent-death signal)
// sends `signal` (0: none) and SIGCONT to the group, then after `kill_after` (zero: never)
// SIGKILL. It keeps no descriptor open. Returns its pid (= the group's id), or -errno.
pid_t spawn_guardian(int signal, std::chrono::milliseconds kill_after);

// Starts `argv` in process group `pgid` with environment `env` ("NAME=value").
spawn_result spawn_command(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                           const std::set<int>& inherited, pid_t pgid);

// zklock's live children (zombies included until reaped), from /proc/self/task/*/children;
// nullopt if the kernel does not provide that file.
std::optional<std::vector<pid_t>> children_of_self();

// The client configuration of a run: connect string, session timeout, credentials, ACL, log.
zkcoro::client_config make_config(const options& o);
// The message for a failed connect (names the host, the chroot, or where the string came from).
std::string connect_failure(const options& o, const zkcoro::error_code& ec);
// ZooKeeper's ZNOAUTH, and what to tell the user about it (names LOCKPATH and the fix).
bool is_noauth(const zkcoro::error_code& ec);
std::string noauth_hint(const options& o);

// Whether a connect string names a Redis server (redis://...): then LOCKPATH is a Redis key.
// Whether -c names a Redis server: redis:// or rediss:// in any case (rediss:// is then refused by
// parse_redis_url with the reason).
inline bool is_redis_url(std::string_view connect)
{
    auto starts_nocase = [connect](std::string_view prefix) {
        if (connect.size() < prefix.size())
            return false;
        for (std::size_t i = 0; i < prefix.size(); ++i)
            if ((connect[i] | 0x20) != prefix[i])  // prefix: lower-case letters, ':' and '/'
                return false;
        return true;
    };
    return starts_nocase("redis://") || starts_nocase("rediss://") || starts_nocase("redis+sentinel://") ||
           starts_nocase("redis+cluster://");
}

// The Redis connect bound: 5 s, shortened by -t (at least 100 ms) and by -n (1 s).
inline std::chrono::milliseconds redis_connect_timeout(const options& o)
{
    std::chrono::milliseconds t{5000};
    if (o.timeout_s)
        t = std::clamp(std::chrono::milliseconds(static_cast<long long>(*o.timeout_s * 1000.0)),
                       std::chrono::milliseconds{100}, t);
    if (o.nonblock)
        t = std::min(t, std::chrono::milliseconds{1000});
    return t;
}

// Runs `body` with a client of the run's configuration on a private io_context, then closes the
// session (bounded: 3 s, then _Exit). An exception out of `body` is reported as "zklock: WHAT
// LOCKPATH: ..." and exits by exit_for_exception. For the subcommands that need one request or a few (status, revoke).
int run_with_client(const options& o, std::string_view what,
                    const std::function<asio::awaitable<int>(zkcoro::client&)>& body);

// `zklock status -r` (tree.cpp): connected client in, exit status out.
asio::awaitable<int> tree_status(zkcoro::client& zk, const options& o);
// "30s", "5m", "1h", "1.5d", "250ms", or a bare number of seconds; nullopt if malformed.
std::optional<double> parse_duration(std::string_view text);

int run_lock(const options& o);
int run_status(const options& o);
#ifdef ZKLOCK_REDIS
// `zklock -c redis://... status KEY` (redis_status.cpp): the Redis recipes' keys of KEY.
int run_redis_status(const options& o);
#endif
int run_revoke(const options& o);

}  // namespace zklock

#endif
