// Test support: real ZooKeeper servers (Debian `zookeeper` package) run as
// child JVM processes on loopback, one standalone server or a small ensemble.
//
// Every child is ended by PID only. Children are killed if the test process
// dies: PR_SET_PDEATHSIG in the child, plus SIGINT/SIGTERM/SIGHUP handlers and
// an atexit hook in the parent. Caveat of PR_SET_PDEATHSIG: it fires when the
// *thread* that started the JVM exits, so construct/restart servers from a
// thread that outlives them (normally the test's main thread).
#pragma once

#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace zktest {

struct server_options {
    // ZooKeeper tickTime; session timeouts are clamped to [2, 20] ticks
    // (0.4 s to 4 s at 200 ms) unless max_session_timeout_ms is set.
    int tick_ms = 200;
    // maxSessionTimeout in ms; 0 keeps ZooKeeper's default of 20 ticks.
    int max_session_timeout_ms = 0;
    // Bound on the wait for a server (or the whole ensemble) to serve.
    std::chrono::seconds start_timeout{60};
    // Grace period after SIGTERM before SIGKILL in stop().
    std::chrono::seconds stop_timeout{10};
    // Extra `key=value` lines appended to the generated zoo.cfg.
    std::vector<std::string> extra_config{};
    // zk_ensemble only: dynamic reconfiguration (ZooKeeper 3.5+). zoo.cfg gets
    // reconfigEnabled=true, standaloneEnabled=false and skipACL=yes (anyone may
    // reconfig), and the member list goes to a dynamicConfigFile as
    // `server.N=127.0.0.1:QUORUM:ELECTION:participant;127.0.0.1:CLIENT` lines.
    // Members can then be added (zk_ensemble::add_member) and removed with a
    // `reconfig` request (the C client's zoo_areconfig, or zkCli's reconfig).
    bool reconfig = false;
    // zk_ensemble only: how many of the members (the last ones) are observers: they serve
    // clients and follow the leader's log but do not vote, so they add read capacity without
    // slowing writes (the ZooKeeper observers guide). Their server lines end in ":observer"
    // and their own zoo.cfg says peerType=observer. At least one member must vote.
    int observers = 0;
};

// Sends a ZooKeeper four-letter word to 127.0.0.1:port and returns the whole
// reply (read until the server closes), or "" on any failure or timeout.
std::string four_letter(std::uint16_t port, std::string_view cmd,
                        std::chrono::milliseconds timeout = std::chrono::milliseconds{2000});

// A free loopback TCP port (bound to 127.0.0.1:0, read back, closed).
std::uint16_t free_loopback_port();

// Default JVM flags used for every server; overridable with the environment
// variable ZKTEST_JVM_FLAGS (space separated).
std::vector<std::string> default_jvm_flags();

// For a child between fork and exec (async-signal-safe): dies with `parent`, even if it is
// SIGKILLed (exits 127 at once when it is already gone), and resets the signal mask and the
// handlers a test program installs, so that the exec'd program starts with default handling.
void prepare_child_after_fork(pid_t parent) noexcept;

namespace detail {
class server_process;
}

class zk_server {
public:
    // Starts the server and waits until it serves; throws std::runtime_error
    // (with the tail of server.log) on failure or timeout.
    explicit zk_server(server_options opts = {});
    ~zk_server();
    zk_server(const zk_server&) = delete;
    zk_server& operator=(const zk_server&) = delete;

    std::string connect_string() const;  // "127.0.0.1:PORT"
    std::uint16_t port() const;
    pid_t pid() const;                   // -1 while stopped
    bool running() const;
    std::string dir() const;             // temp dir holding zoo.cfg, data/, server.log
    std::string log_path() const;

    void stop();     // SIGTERM, bounded wait, then SIGKILL; reaps the process
    void kill();     // SIGKILL at once (a crash); reaps the process
    void restart();  // stop if running, start again on the same port and data, wait ready
    void pause();    // SIGSTOP: the process hangs, sockets stay open
    void resume();   // SIGCONT

    std::string four_letter(std::string_view cmd,
                            std::chrono::milliseconds timeout = std::chrono::milliseconds{2000}) const;

private:
    server_options opts_;
    std::unique_ptr<detail::server_process> proc_;
};

class zk_ensemble {
public:
    // Starts all members in parallel, waits until every member serves
    // (one leader, the rest followers); throws std::runtime_error on failure.
    explicit zk_ensemble(int members = 3, server_options opts = {});
    ~zk_ensemble();
    zk_ensemble(const zk_ensemble&) = delete;
    zk_ensemble& operator=(const zk_ensemble&) = delete;

    std::string connect_string() const;  // all members, comma separated
    std::string member_connect_string(int i) const;
    std::uint16_t member_port(int i) const;
    pid_t member_pid(int i) const;                // -1 while stopped
    std::string member_log_path(int i) const;     // member i's server.log
    std::string dir() const;                      // temp dir holding member0..N-1/
    int size() const;

    // Index of the member reporting `Mode: leader`, -1 if none. Skips stopped
    // and paused members (a paused JVM would only time out).
    int leader() const;

    void stop(int i);
    void kill(int i);
    // Starts member i again and waits until it serves; if fewer than a
    // majority would then be running it only waits until it answers ruok.
    void restart(int i);
    void pause(int i);
    void resume(int i);

    // Waits until a leader is elected and a majority of members serve;
    // throws std::runtime_error (with each member's state) on timeout.
    void wait_for_quorum(std::chrono::seconds timeout) const;

    std::string four_letter(int i, std::string_view cmd,
                            std::chrono::milliseconds timeout = std::chrono::milliseconds{2000}) const;

    // --- Dynamic reconfiguration (server_options::reconfig) ---
    // Member i's server id in the ZooKeeper configuration (i + 1).
    int member_id(int i) const;
    // Member i's line, as in a dynamic config file and in a reconfig's joining
    // list: "server.N=127.0.0.1:QUORUM:ELECTION:ROLE;127.0.0.1:CLIENT".
    std::string member_spec(int i, std::string_view role = "participant") const;
    // Starts a new member (its index is returned: size() before the call) that is
    // not in the configuration yet: its dynamic config lists the members `current`
    // (indices, as participants) and itself as an observer, as the ZooKeeper
    // reconfig documentation describes for a joining server. Waits until the
    // process answers ruok; it becomes a voting member once a reconfig adds it
    // (joining: member_spec(i)). Needs server_options::reconfig.
    int add_member(const std::vector<int>& current);
    // Waits until member i serves (leader, follower or observer); throws with its
    // log's tail on timeout.
    void wait_serving(int i, std::chrono::seconds timeout) const;

private:
    void check_index(int i) const;
    server_options opts_;
    std::string root_;
    std::vector<std::unique_ptr<detail::server_process>> members_;
    // Client, quorum and election port of each member, and every port handed out.
    std::vector<std::array<std::uint16_t, 3>> ports_;
    std::vector<std::uint16_t> taken_;
};

}  // namespace zktest
