// zkcoro-with-server [--ensemble] [--members N] [--tick-ms MS] -- CMD ARGS...
//
// Starts a throwaway ZooKeeper (standalone, or an ensemble), runs CMD with
// ZK_CONNECT set to its connect string, forwards SIGINT/SIGTERM/SIGHUP to
// CMD, then stops the server(s) and exits with CMD's exit code (128+N if it
// died from signal N; 125 if ZooKeeper could not start; 127 if CMD could not
// be run).
#include "zk_server.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
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

extern char** environ;

namespace {

void usage() {
    std::fputs("usage: zkcoro-with-server [--ensemble] [--members N] [--tick-ms MS] -- CMD [ARGS...]\n", stderr);
}

int run_child(const std::vector<std::string>& cmd) {
    // Signals are taken synchronously with sigwaitinfo(): block them first so
    // none is lost between spawning the child and waiting.
    sigset_t wait_set;
    sigemptyset(&wait_set);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&wait_set, s);
    sigset_t old_mask;
    pthread_sigmask(SIG_BLOCK, &wait_set, &old_mask);

    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t empty;
    sigemptyset(&empty);
    posix_spawnattr_setsigmask(&attr, &empty);
    sigset_t defaults;
    sigemptyset(&defaults);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE}) sigaddset(&defaults, s);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

    std::vector<std::string> args = cmd;
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    pid_t child = -1;
    int rc = posix_spawnp(&child, argv[0], nullptr, &attr, argv.data(), environ);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
        fmt::print(stderr, "zkcoro-with-server: cannot run {}: {}\n", cmd[0], std::strerror(rc));
        return 127;
    }

    int status = 0;
    for (;;) {
        pid_t r = waitpid(child, &status, WNOHANG);
        if (r == child) break;
        if (r < 0 && errno != EINTR) {
            status = 0;
            break;
        }
        siginfo_t info{};
        int sig = sigwaitinfo(&wait_set, &info);
        if (sig < 0 || sig == SIGCHLD) continue;
        // A terminal's Ctrl-C (si_code SI_KERNEL) already reached the child,
        // which shares our process group; forward only the others.
        if (info.si_code != SI_KERNEL) kill(child, sig);
    }
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
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
    const int code = run_child(cmd);
    // Stop the server(s) before exiting (destructors: SIGTERM, reap, rm -r).
    server.reset();
    quorum.reset();
    return code;
}
