// Test and benchmark support: a real `redis-server` (Debian package) run as a child process on a
// free loopback port, with its own temporary directory.
//
// The child is ended by PID only. It dies with the thread that started it (PR_SET_PDEATHSIG, as
// for zk_server: start and restart servers from a thread that outlives them), and the destructor
// stops it (SIGTERM, bounded wait, SIGKILL) and removes the directory.
//
// A few blocking helpers talk to the server through hiredis' synchronous API (loopback, bounded
// by a timeout): PING, INFO, command counts. They are for tests, not for the library.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zktest {

struct redis_options {
    enum class persistence {
        none,  // --save "" --appendonly no: a restart forgets everything
        aof,   // --appendonly yes --appendfsync always: every write is on disk before the reply
    };
    persistence persist = persistence::none;
    // --requirepass; empty: no password.
    std::string password{};
    // Bound on the wait for the server to answer PING after a start.
    std::chrono::seconds start_timeout{20};
    // Grace after SIGTERM before SIGKILL in stop().
    std::chrono::seconds stop_timeout{10};
    // More command-line arguments, appended as given (e.g. {"--maxclients", "100"}).
    std::vector<std::string> extra_args{};
    // A configuration file's text, written to <dir>/redis.conf and given as the first argument
    // (a sentinel needs one it can rewrite: with extra_args {"--sentinel"}). Empty: none.
    std::string config_text{};
};

// The redis-server program: $ZKTEST_REDIS_SERVER if set, else `redis-server` found on PATH, else
// /usr/bin/redis-server. Empty if none is executable.
std::string find_redis_server();

// Runs one command (argument vector, binary-safe) on 127.0.0.1:port with a blocking hiredis
// connection (AUTH first when `password` is not empty). Returns the reply as text: a status or
// bulk string as is, an integer in decimal, nil as "(nil)", an array's elements one per line.
// Throws std::runtime_error on a connection failure, a timeout or an error reply.
std::string redis_command(std::uint16_t port, const std::vector<std::string>& args, const std::string& password = {},
                          std::chrono::milliseconds timeout = std::chrono::milliseconds{2000});

// Whether 127.0.0.1:port answers PING with PONG within `timeout` (never throws).
bool redis_ping(std::uint16_t port, const std::string& password = {},
                std::chrono::milliseconds timeout = std::chrono::milliseconds{500});

class redis_server {
public:
    // Starts the server and waits until it answers PING; throws std::runtime_error (with the tail
    // of its log) on failure or timeout.
    explicit redis_server(redis_options opts = {});
    ~redis_server();
    redis_server(const redis_server&) = delete;
    redis_server& operator=(const redis_server&) = delete;

    std::uint16_t port() const { return port_; }
    pid_t pid() const { return pid_; }  // -1 while stopped
    bool running() const { return pid_ > 0; }
    const std::string& dir() const { return dir_; }  // temp dir: redis.log, appendonlydir/
    std::string log_path() const;
    const redis_options& options() const { return opts_; }
    // "redis://127.0.0.1:PORT", or "redis://PASSWORD@127.0.0.1:PORT" with a password.
    std::string url() const;

    void stop();     // SIGTERM (and SIGCONT), bounded wait, then SIGKILL; reaps the process
    void kill9();    // SIGKILL at once (a crash); reaps the process
    void restart();  // stop if running, start again on the same port and directory, wait for PING
    void pause();    // SIGSTOP: the process hangs, its sockets stay open
    void resume();   // SIGCONT

    // A command on this server (see redis_command), with its password.
    std::string command(const std::vector<std::string>& args,
                        std::chrono::milliseconds timeout = std::chrono::milliseconds{2000}) const;
    // INFO <section> parsed into field -> value (comment and empty lines skipped).
    std::map<std::string, std::string> info(const std::string& section) const;
    // total_commands_processed from INFO stats (this query itself included: read it before and
    // after and subtract 1 for the second query).
    std::int64_t total_commands_processed() const;
    // calls per command from INFO commandstats ("set", "eval", "evalsha", ...); 0 when absent.
    std::int64_t command_calls(const std::string& command) const;

private:
    void start();
    void wait_ready();
    bool has_exited() const;
    void reap();
    std::string failure_report(const std::string& what) const;

    redis_options opts_;
    std::string program_;
    std::string dir_;
    std::uint16_t port_ = 0;
    pid_t pid_ = -1;
};

}  // namespace zktest
