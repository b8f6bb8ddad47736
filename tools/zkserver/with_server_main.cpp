// zkcoro-with-server [--ensemble] [--members N] [--observers K] [--tick-ms MS] -- CMD ARGS...
//
// Starts a throwaway ZooKeeper (standalone, or an ensemble), runs CMD with
// ZK_CONNECT set to its connect string, forwards SIGINT/SIGTERM/SIGHUP to
// CMD, then stops the server(s) and exits with CMD's exit code (128+N if it
// died from signal N; 125 if ZooKeeper could not start; 127 if CMD could not
// be run).
#include "run_child.hpp"
#include "zk_server.hpp"

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

void usage() {
    std::fputs("usage: zkcoro-with-server [--ensemble] [--members N] [--observers K] [--tick-ms MS] -- CMD [ARGS...]\n"
               "  --observers K: the last K of the N members are observers (no vote)\n",
               stderr);
}


std::string join_pids(const zktest::zk_ensemble& e) {
    std::string s;
    for (int i = 0; i < e.size(); ++i) s += fmt::format("{}{}", i == 0 ? "" : ", ", e.member_pid(i));
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    bool ensemble = false;
    int members = 3;
    zktest::server_options opts;
    std::vector<std::string> cmd;
    for (int i = 1; i < argc; ++i) {
        std::string_view a = argv[i];
        if (a == "--") {
            for (++i; i < argc; ++i) cmd.emplace_back(argv[i]);
            break;
        }
        if (a == "--ensemble") {
            ensemble = true;
        } else if (a == "--members" && i + 1 < argc) {
            members = std::atoi(argv[++i]);
            ensemble = true;
        } else if (a == "--observers" && i + 1 < argc) {
            opts.observers = std::atoi(argv[++i]);
            ensemble = true;
        } else if (a == "--tick-ms" && i + 1 < argc) {
            opts.tick_ms = std::atoi(argv[++i]);
        } else if (a == "-h" || a == "--help") {
            usage();
            return 0;
        } else if (!a.empty() && a[0] == '-') {
            usage();
            return 2;
        } else {
            // No "--": the first non-option starts the command.
            for (; i < argc; ++i) cmd.emplace_back(argv[i]);
            break;
        }
    }
    if (cmd.empty()) {
        usage();
        return 2;
    }

    std::unique_ptr<zktest::zk_server> server;
    std::unique_ptr<zktest::zk_ensemble> quorum;
    std::string connect;
    try {
        const auto t0 = std::chrono::steady_clock::now();
        if (ensemble) {
            quorum = std::make_unique<zktest::zk_ensemble>(members, opts);
            connect = quorum->connect_string();
        } else {
            server = std::make_unique<zktest::zk_server>(opts);
            connect = server->connect_string();
        }
        const auto ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
        if (quorum)
            fmt::print(stderr, "zkcoro-with-server: ZooKeeper ensemble on {} (pids {}), ready in {} ms\n", connect,
                       join_pids(*quorum), ms);
        else
            fmt::print(stderr, "zkcoro-with-server: ZooKeeper on {} (pid {}), ready in {} ms\n", connect,
                       server->pid(), ms);
    } catch (const std::exception& e) {
        fmt::print(stderr, "zkcoro-with-server: {}\n", e.what());
        return 125;
    }

    setenv("ZK_CONNECT", connect.c_str(), 1);
    const int code = zktest::run_child(cmd, "zkcoro-with-server");
    // Stop the server(s) before exiting (destructors: SIGTERM, reap, rm -r).
    server.reset();
    quorum.reset();
    return code;
}
