// zklock: run a command while holding a ZooKeeper lock (zkcoro, Curator-compatible layouts).
// Shared declarations of the tool's parts: options, exit codes, the queue listing, the child.
#ifndef ZKCORO_TOOLS_ZKLOCK_HPP
#define ZKCORO_TOOLS_ZKLOCK_HPP

#include <zkcoro/client.hpp>

#include <boost/asio/awaitable.hpp>

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace zklock {

namespace asio = boost::asio;

// Exit codes (sysexits.h values where one fits); also listed in --help and README.md.
namespace exit_code {
inline constexpr int usage = 64;        // EX_USAGE: bad options or arguments
inline constexpr int unavailable = 69;  // EX_UNAVAILABLE: could not connect, or the session ended before the lock was held
inline constexpr int lost = 70;         // EX_SOFTWARE: the lock was lost while the command ran
inline constexpr int zk_error = 76;     // EX_PROTOCOL: ZooKeeper refused an operation (e.g. no permission)
inline constexpr int tempfail = 75;     // EX_TEMPFAIL: timed out (-t) or the lock is held (-n)
inline constexpr int cannot_exec = 126; // the command was found but could not be run
inline constexpr int not_found = 127;   // the command was not found
}  // namespace exit_code

enum class recipe { mutex, read, write, semaphore };
enum class on_lost { term, kill, ignore };

struct options {
    std::string connect;
    std::string lock_path;
    std::vector<std::string> command;
    std::optional<double> timeout_s;  // -t; nullopt: wait forever
    bool nonblock = false;
    recipe kind = recipe::mutex;
    int semaphore_leases = 0;
    std::string data;  // empty: "host:pid"
    on_lost lost_action = on_lost::term;
    bool verbose = false;
    std::chrono::milliseconds session_timeout{10000};
    std::string session_file;  // hidden, for tests: "<id hex> <password hex>\n" once connected
    // status subcommand
    bool json = false;
};

// One node of a lock's queue, as `zklock status` shows it.
struct queue_entry {
    std::string node;          // name under the lock path (or under <path>/leases, <path>/locks)
    std::string path;          // full path
    std::string data;
    std::int64_t session = 0;  // ephemeral owner
    std::int64_t ctime_ms = 0; // server clock, ms since the epoch
    std::string mode;          // "" (mutex), "read"/"write", "lease"/"queued" (semaphore)
    std::optional<bool> holding;  // known for mutex and read-write nodes
};

struct queue_listing {
    std::string path;
    std::string recipe;  // "mutex", "read-write", "semaphore" or "none" (no lock nodes)
    std::vector<queue_entry> entries;
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

// The child process.
struct spawn_result {
    pid_t pid = -1;
    int error = 0;  // errno of a failed fork or exec (then pid is -1)
};
// Descriptors open at startup (inherited from the caller): the command inherits these and only
// these; everything zklock opened itself is closed in the child.
std::set<int> open_descriptors();
// Starts `argv` in a process group of its own; `death_signal` (0: none) is sent to it if
// zklock dies first.
spawn_result spawn_command(const std::vector<std::string>& argv, const std::set<int>& inherited, int death_signal);

int run_lock(const options& o);
int run_status(const options& o);

}  // namespace zklock

#endif
