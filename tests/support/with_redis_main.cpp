// zkcoro-with-redis [--aof] [--password PW] [--replicas N] -- CMD ARGS...
// zkcoro-with-redis --cluster M [--replicas N] -- CMD ARGS...
//
// Starts a throwaway redis-server on a free loopback port (no persistence, or AOF with
// appendfsync always), runs CMD with
//   ZKCORO_TEST_REDIS       redis://[PW@]127.0.0.1:PORT
//   ZKCORO_TEST_REDIS_PORT  PORT
//   ZKCORO_TEST_REDIS_PID   the server's PID
//   ZKCORO_TEST_REDIS_PIDS  the same (with --cluster: every node's)
// forwards SIGINT/SIGTERM/SIGHUP to CMD, then stops the server (by PID) and exits with CMD's exit
// code (128+N if it died from signal N; 125 if the server could not start; 127 if CMD could not
// be run). The server inherits this program's CPU affinity: `taskset -c 0 zkcoro-with-redis --
// taskset -c 1 CMD` pins the server to core 0 and CMD to core 1.
//
// --replicas N: N more servers, replicas of the first (online before CMD starts), for the
// replica-acknowledged grants' benchmark.
// --cluster M: a Redis Cluster of M masters (3 to 8) with N replicas each (--replicas, default
// 0) instead of one server, for the benchmarks on a cluster: zktest::redis_cluster
// (redis_cluster.hpp, what the cluster tests start), no persistence, no password; CMD starts once
// every node says cluster_state:ok, with
//   ZKCORO_TEST_REDIS       redis+cluster://127.0.0.1:P1,127.0.0.1:P2,... (every node a seed)
//   ZKCORO_TEST_REDIS_PORT  the first node's port
//   ZKCORO_TEST_REDIS_PID   the first node's PID
//   ZKCORO_TEST_REDIS_PIDS  every node's PID, separated by spaces
// and every node is stopped by PID after it, as the one server is.
#include "redis_cluster.hpp"
#include "redis_server.hpp"
#include "run_child.hpp"

#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <vector>


namespace {

void usage()
{
    std::fputs("usage: zkcoro-with-redis [--aof] [--password PW] [--replicas N] -- CMD [ARGS...]\n"
               "       zkcoro-with-redis --cluster MASTERS [--replicas N] -- CMD [ARGS...]\n",
               stderr);
}

// --cluster: CMD under a cluster of `masters` masters with `replicas` replicas each; the nodes are
// stopped (by PID, by their zktest::redis_server) when CMD has ended.
int run_on_cluster(int masters, int replicas, const std::vector<std::string>& cmd)
{
    std::unique_ptr<zktest::redis_cluster> cluster;
    try {
        zktest::redis_cluster_options co;
        co.masters = masters;
        co.replicas_per_master = replicas;
        cluster = std::make_unique<zktest::redis_cluster>(co);
    } catch (const std::exception& e) {
        fmt::print(stderr, "zkcoro-with-redis: cluster: {}\n", e.what());
        return 125;
    }
    std::string pids;
    for (const auto& n : cluster->nodes())
        pids += fmt::format("{}{}", pids.empty() ? "" : " ", n->pid());
    const auto& first = *cluster->nodes().front();
    fmt::print(stderr, "zkcoro-with-redis: Redis Cluster of {} masters, {} replica(s) each, {} (pids {}), ready in {} ms\n",
               masters, replicas, cluster->url(), pids, cluster->start_time().count());
    setenv("ZKCORO_TEST_REDIS", cluster->url().c_str(), 1);
    setenv("ZKCORO_TEST_REDIS_PORT", std::to_string(first.port()).c_str(), 1);
    setenv("ZKCORO_TEST_REDIS_PID", std::to_string(first.pid()).c_str(), 1);
    setenv("ZKCORO_TEST_REDIS_PIDS", pids.c_str(), 1);
    const int code = zktest::run_child(cmd, "zkcoro-with-redis");
    cluster.reset();  // every node: SIGTERM by PID, reap, rm -r
    return code;
}

}  // namespace

int main(int argc, char** argv)
{
    zktest::redis_options opts;
    std::vector<std::string> cmd;
    int replicas = 0;
    int cluster_masters = 0;  // 0: one server
    for (int i = 1; i < argc; ++i) {
        std::string_view a = argv[i];
        if (a == "--") {
            for (++i; i < argc; ++i)
                cmd.emplace_back(argv[i]);
            break;
        }
        if (a == "--aof") {
            opts.persist = zktest::redis_options::persistence::aof;
        } else if (a == "--replicas" && i + 1 < argc) {
            replicas = std::atoi(argv[++i]);
            if (replicas < 0 || replicas > 4) {
                std::fputs("zkcoro-with-redis: --replicas must be 0 to 4\n", stderr);
                return 2;
            }
        } else if (a == "--cluster" && i + 1 < argc) {
            cluster_masters = std::atoi(argv[++i]);
            if (cluster_masters < 3 || cluster_masters > 8) {
                std::fputs("zkcoro-with-redis: --cluster must be 3 to 8 (masters; redis-cli --cluster create wants "
                           "at least 3)\n",
                           stderr);
                return 2;
            }
        } else if (a == "--password" && i + 1 < argc) {
            opts.password = argv[++i];
        } else if (a == "-h" || a == "--help") {
            usage();
            return 0;
        } else if (!a.empty() && a[0] == '-') {
            usage();
            return 2;
        } else {
            for (; i < argc; ++i)
                cmd.emplace_back(argv[i]);
            break;
        }
    }
    if (cmd.empty()) {
        usage();
        return 2;
    }
    if (cluster_masters > 0) {
        if (opts.persist != zktest::redis_options::persistence::none || !opts.password.empty()) {
            std::fputs("zkcoro-with-redis: --cluster takes neither --aof nor --password\n", stderr);
            return 2;
        }
        if (replicas > 2) {
            std::fputs("zkcoro-with-redis: with --cluster, --replicas (per master) must be 0 to 2\n", stderr);
            return 2;
        }
        return run_on_cluster(cluster_masters, replicas, cmd);
    }

    std::unique_ptr<zktest::redis_server> server;
    try {
        const auto t0 = std::chrono::steady_clock::now();
        server = std::make_unique<zktest::redis_server>(opts);
        const auto ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
        fmt::print(stderr, "zkcoro-with-redis: redis-server on 127.0.0.1:{} (pid {}{}), ready in {} ms\n",
                   server->port(), server->pid(),
                   opts.persist == zktest::redis_options::persistence::aof ? ", AOF" : ", no persistence", ms);
    } catch (const std::exception& e) {
        fmt::print(stderr, "zkcoro-with-redis: {}\n", e.what());
        return 125;
    }

    std::vector<std::unique_ptr<zktest::redis_server>> replica_servers;
    try {
        if (replicas > 0)  // a full sync at once (the default waits 5 s for more replicas)
            server->command({"CONFIG", "SET", "repl-diskless-sync-delay", "0"});
        for (int r = 0; r < replicas; ++r) {
            zktest::redis_options ro = opts;
            ro.extra_args = {"--replicaof", "127.0.0.1", std::to_string(server->port())};
            if (!opts.password.empty())
                ro.extra_args.insert(ro.extra_args.end(), {"--masterauth", opts.password});
            replica_servers.push_back(std::make_unique<zktest::redis_server>(ro));
        }
        // Online (past the full sync), else WAIT counts them out. Bounded: 20 s.
        for (int t = 0; replicas > 0; ++t) {
            int online = 0;
            for (const auto& [k, v] : server->info("replication"))
                if (k.starts_with("slave") && v.find("state=online") != std::string::npos)
                    ++online;
            if (online >= replicas)
                break;
            if (t == 1000)
                throw std::runtime_error(fmt::format("{} of {} replicas online after 20 s", online, replicas));
            usleep(20'000);
        }
        if (replicas > 0)
            fmt::print(stderr, "zkcoro-with-redis: {} replica(s) online\n", replicas);
    } catch (const std::exception& e) {
        fmt::print(stderr, "zkcoro-with-redis: replicas: {}\n", e.what());
        return 125;
    }
    setenv("ZKCORO_TEST_REDIS", server->url().c_str(), 1);
    setenv("ZKCORO_TEST_REDIS_PORT", std::to_string(server->port()).c_str(), 1);
    setenv("ZKCORO_TEST_REDIS_PID", std::to_string(server->pid()).c_str(), 1);
    setenv("ZKCORO_TEST_REDIS_PIDS", std::to_string(server->pid()).c_str(), 1);
    const int code = zktest::run_child(cmd, "zkcoro-with-redis");
    // Stop the server before exiting (the destructor: SIGTERM by PID, reap, rm -r).
    replica_servers.clear();
    server.reset();
    return code;
}
