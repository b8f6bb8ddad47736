// A Redis Cluster of 3 masters and 3 replicas on free loopback ports (the cluster tests; and
// zkcoro-with-redis --cluster, the benchmarks', with the numbers it is given): real
// redis-server processes started with --cluster-enabled yes (no persistence), joined by
// `redis-cli --cluster create ... --cluster-replicas 1 --cluster-yes`, each ended by PID by its
// zktest::redis_server (SIGTERM, bounded wait, SIGKILL; its directory, nodes.conf included,
// removed). redis-cli is run by PID too, with a bound, and killed if it overruns. Each node's
// cluster bus gets its own free port (--cluster-port), not port + 10000, which may be taken.
// The constructor returns once CLUSTER INFO says cluster_state:ok on every node, every node
// sees the same 6 nodes and every master has its replica online (synced, so WAIT counts it), or
// throws (the nodes it started are stopped by their destructors).
#pragma once

#include <redis_server.hpp>
#include <zk_server.hpp>  // free_loopback_port, prepare_child_after_fork

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace zktest {

struct redis_cluster_options {
    int masters = 3;
    int replicas_per_master = 1;
    // A master not heard from for this long is failed over by its replica.
    std::chrono::milliseconds node_timeout{2000};
    std::chrono::seconds start_timeout{20};
};

class redis_cluster {
public:
    explicit redis_cluster(redis_cluster_options o = {}) : opts_(o)
    {
        const auto t0 = std::chrono::steady_clock::now();
        const int n = opts_.masters * (1 + opts_.replicas_per_master);
        for (int i = 0; i < n; ++i) {
            redis_options ro;
            ro.extra_args = {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-port",
                             std::to_string(free_loopback_port()), "--cluster-node-timeout",
                             std::to_string(opts_.node_timeout.count()),
                             // The replicas' first sync at once (the default waits 5 s for more).
                             "--repl-diskless-sync-delay", "0"};
            ro.start_timeout = opts_.start_timeout;
            nodes_.push_back(std::make_unique<redis_server>(ro));
        }
        std::vector<std::string> cmd{redis_cli(), "--cluster", "create"};
        for (const auto& s : nodes_)
            cmd.push_back(fmt::format("127.0.0.1:{}", s->port()));
        cmd.insert(cmd.end(), {"--cluster-replicas", std::to_string(opts_.replicas_per_master), "--cluster-yes"});
        run_cli(cmd, std::chrono::seconds(20));
        wait_ok(opts_.start_timeout);
        start_time_ = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    }

    // How long the constructor took (servers, create, all nodes ok).
    std::chrono::milliseconds start_time() const { return start_time_; }
    std::vector<std::unique_ptr<redis_server>>& nodes() { return nodes_; }

    // redis+cluster://[userinfo@]127.0.0.1:P1,127.0.0.1:P2,... (every node, or the first `seeds`).
    std::string url(std::size_t seeds = 0) const
    {
        std::string hosts;
        for (std::size_t i = 0; i < nodes_.size() && (seeds == 0 || i < seeds); ++i)
            hosts += fmt::format("{}127.0.0.1:{}", hosts.empty() ? "" : ",", nodes_[i]->port());
        return "redis+cluster://" + hosts;
    }

    redis_server& node_at(std::uint16_t port)
    {
        for (auto& s : nodes_)
            if (s->port() == port)
                return *s;
        throw std::runtime_error(fmt::format("zktest: no cluster node on port {}", port));
    }

    // The slot of `key` as the cluster computes it (CLUSTER KEYSLOT).
    int keyslot(const std::string& key) const { return std::stoi(any().command({"CLUSTER", "KEYSLOT", key})); }

    // The port of the master serving `slot`, from CLUSTER NODES of a running node (0 if none).
    std::uint16_t master_of_slot(int slot) const
    {
        std::istringstream in(any().command({"CLUSTER", "NODES"}));
        std::string line;
        while (std::getline(in, line)) {
            std::istringstream l(line);
            std::string id, addr, flags, master, ping, pong, epoch, state, range;
            l >> id >> addr >> flags >> master >> ping >> pong >> epoch >> state;
            if (flags.find("master") == std::string::npos || flags.find("fail") != std::string::npos)
                continue;
            while (l >> range) {
                if (range.starts_with('['))
                    continue;  // a slot being migrated or imported
                auto dash = range.find('-');
                int lo = std::stoi(range.substr(0, dash));
                int hi = dash == std::string::npos ? lo : std::stoi(range.substr(dash + 1));
                if (slot >= lo && slot <= hi)
                    return port_of(addr);
            }
        }
        return 0;
    }

    // The port of a replica of the master on `master_port` (0 if none), from the master's own
    // INFO replication (what wait_ok waited for; another node's CLUSTER NODES may lag behind).
    std::uint16_t replica_of(std::uint16_t master_port)
    {
        auto repl = node_at(master_port).info("replication");
        const auto& s0 = repl["slave0"];  // ip=127.0.0.1,port=P,state=online,...
        const auto at = s0.find("port=");
        return at == std::string::npos ? 0 : static_cast<std::uint16_t>(std::stoi(s0.substr(at + 5)));
    }

    // The ports of the masters, in slot order.
    std::vector<std::uint16_t> master_ports() const
    {
        std::vector<std::uint16_t> out;
        for (int slot : {0, 16383 / 2, 16383})
            out.push_back(master_of_slot(slot));
        return out;
    }

    std::string node_id(std::uint16_t port) const
    {
        for (const auto& s : nodes_)
            if (s->port() == port)
                return s->command({"CLUSTER", "MYID"});
        throw std::runtime_error(fmt::format("zktest: no cluster node on port {}", port));
    }

    // Waits until every running node says cluster_state:ok and knows all the nodes, and every
    // running master has replicas_per_master replicas online.
    void wait_ok(std::chrono::milliseconds limit) const
    {
        const auto until = std::chrono::steady_clock::now() + limit;
        std::string last;
        while (std::chrono::steady_clock::now() < until) {
            bool ok = true;
            for (const auto& s : nodes_) {
                if (!s->running())
                    continue;
                try {
                    auto info = s->command({"CLUSTER", "INFO"});
                    if (info.find("cluster_state:ok") == std::string::npos ||
                        info.find(fmt::format("cluster_known_nodes:{}", nodes_.size())) == std::string::npos) {
                        ok = false;
                        last = fmt::format("node {}: {}", s->port(), info.substr(0, info.find("cluster_slots_pfail")));
                        break;
                    }
                    // A master's replicas online (synced): WAIT counts them from then on.
                    auto repl = s->info("replication");
                    int online = 0;
                    for (const auto& [k, v] : repl)
                        if (k.starts_with("slave") && v.find("state=online") != std::string::npos)
                            ++online;
                    if (repl["role"] == "master" && online < opts_.replicas_per_master) {
                        ok = false;
                        last = fmt::format("master {}: {} replica(s) online", s->port(), online);
                        break;
                    }
                } catch (const std::exception& e) {
                    ok = false;
                    last = e.what();
                    break;
                }
            }
            if (ok)
                return;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        throw std::runtime_error("zktest: the Redis cluster is not ok: " + last);
    }

    // redis-cli next to the redis-server in use.
    static std::string redis_cli()
    {
        auto server = find_redis_server();
        auto cli = std::filesystem::path(server).parent_path() / "redis-cli";
        if (server.empty() || ::access(cli.c_str(), X_OK) != 0)
            throw std::runtime_error("zktest: redis-cli not found next to redis-server (Debian package redis-tools)");
        return cli.string();
    }

    // Runs a command (the first word a path) with stdout and stderr to a file in the first node's
    // directory; throws with its output when it fails or overruns `limit` (then it is SIGKILLed).
    std::string run_cli(const std::vector<std::string>& cmd, std::chrono::milliseconds limit) const
    {
        const auto out_path = (std::filesystem::path(nodes_.at(0)->dir()) / "redis-cli.out").string();
        const pid_t pid = start_process(cmd, out_path);
        const int status = wait_process(pid, limit);
        std::ifstream f(out_path);
        std::stringstream text;
        text << f.rdbuf();
        if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            throw std::runtime_error(fmt::format("zktest: {} {} (status {}): {}", cmd.at(0),
                                                 status != -1 ? "failed" : "overran", status, text.str()));
        return text.str();
    }

    // Starts a command (the first word a path) in the background, stdin /dev/null, stdout and
    // stderr to `out_path`: its PID, for wait_process.
    static pid_t start_process(const std::vector<std::string>& cmd, const std::string& out_path)
    {
        std::vector<std::string> args = cmd;
        std::vector<char*> argv;
        for (auto& a : args)
            argv.push_back(a.data());
        argv.push_back(nullptr);
        const pid_t parent = ::getpid();
        const pid_t pid = ::fork();
        if (pid < 0)
            throw std::runtime_error("zktest: fork failed");
        if (pid == 0) {
            prepare_child_after_fork(parent);
            int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
            int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            if (in < 0 || out < 0)
                ::_exit(126);
            ::dup2(in, 0);
            ::dup2(out, 1);
            ::dup2(out, 2);
            ::close_range(3, ~0U, 0);
            ::execv(argv[0], argv.data());
            ::_exit(127);
        }
        return pid;
    }

    // Waits up to `limit` for the process `pid` started by start_process: its wait status, or -1
    // when it overran (it is then SIGKILLed and reaped).
    static int wait_process(pid_t pid, std::chrono::milliseconds limit)
    {
        const auto until = std::chrono::steady_clock::now() + limit;
        int status = 0;
        while (std::chrono::steady_clock::now() < until) {
            if (::waitpid(pid, &status, WNOHANG) == pid)
                return status;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        return -1;
    }

private:
    const redis_server& any() const
    {
        for (const auto& s : nodes_)
            if (s->running())
                return *s;
        throw std::runtime_error("zktest: no cluster node is running");
    }
    static std::uint16_t port_of(const std::string& addr)
    {
        // 127.0.0.1:PORT@BUSPORT
        auto colon = addr.rfind(':');
        return static_cast<std::uint16_t>(std::stoi(addr.substr(colon + 1, addr.find('@') - colon - 1)));
    }

    redis_cluster_options opts_;
    std::vector<std::unique_ptr<redis_server>> nodes_;
    std::chrono::milliseconds start_time_{0};
};

}  // namespace zktest
