// zkcoro-with-redis [--aof] [--password PW] -- CMD ARGS...
//
// Starts a throwaway redis-server on a free loopback port (no persistence, or AOF with
// appendfsync always), runs CMD with
//   ZKCORO_TEST_REDIS       redis://[PW@]127.0.0.1:PORT
//   ZKCORO_TEST_REDIS_PORT  PORT
//   ZKCORO_TEST_REDIS_PID   the server's PID
// forwards SIGINT/SIGTERM/SIGHUP to CMD, then stops the server (by PID) and exits with CMD's exit
// code (128+N if it died from signal N; 125 if the server could not start; 127 if CMD could not
// be run). The server inherits this program's CPU affinity: `taskset -c 0 zkcoro-with-redis --
// taskset -c 1 CMD` pins the server to core 0 and CMD to core 1.
#include "redis_server.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
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

void usage()
{
    std::fputs("usage: zkcoro-with-redis [--aof] [--password PW] -- CMD [ARGS...]\n", stderr);
}

int run_child(const std::vector<std::string>& cmd)
{
    // Signals are taken synchronously with sigwaitinfo(): block them first so that none is lost
    // between spawning the child and waiting.
    sigset_t wait_set;
    sigemptyset(&wait_set);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD})
        sigaddset(&wait_set, s);
    sigset_t old_mask;
    pthread_sigmask(SIG_BLOCK, &wait_set, &old_mask);

    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t empty;
    sigemptyset(&empty);
    posix_spawnattr_setsigmask(&attr, &empty);
    sigset_t defaults;
    sigemptyset(&defaults);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE})
        sigaddset(&defaults, s);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

    std::vector<std::string> args = cmd;
    std::vector<char*> argv;
    for (auto& a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);

    pid_t child = -1;
    int rc = posix_spawnp(&child, argv[0], nullptr, &attr, argv.data(), environ);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
        fmt::print(stderr, "zkcoro-with-redis: cannot run {}: {}\n", cmd[0], std::strerror(rc));
        return 127;
    }

    int status = 0;
    for (;;) {
        pid_t r = waitpid(child, &status, WNOHANG);
        if (r == child)
            break;
        if (r < 0 && errno != EINTR) {
            status = 0;
            break;
        }
        siginfo_t info{};
        int sig = sigwaitinfo(&wait_set, &info);
        if (sig < 0 || sig == SIGCHLD)
            continue;
        // A terminal's Ctrl-C (si_code SI_KERNEL) already reached the child, which shares our
        // process group; forward only the others.
        if (info.si_code != SI_KERNEL)
            kill(child, sig);
    }
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace

int main(int argc, char** argv)
{
    zktest::redis_options opts;
    std::vector<std::string> cmd;
    for (int i = 1; i < argc; ++i) {
        std::string_view a = argv[i];
        if (a == "--") {
            for (++i; i < argc; ++i)
                cmd.emplace_back(argv[i]);
            break;
        }
        if (a == "--aof") {
            opts.persist = zktest::redis_options::persistence::aof;
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

    setenv("ZKCORO_TEST_REDIS", server->url().c_str(), 1);
    setenv("ZKCORO_TEST_REDIS_PORT", std::to_string(server->port()).c_str(), 1);
    setenv("ZKCORO_TEST_REDIS_PID", std::to_string(server->pid()).c_str(), 1);
    const int code = run_child(cmd);
    // Stop the server before exiting (the destructor: SIGTERM by PID, reap, rm -r).
    server.reset();
    return code;
}
