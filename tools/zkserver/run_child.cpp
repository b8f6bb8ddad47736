// The command a launcher (zkcoro-with-server, zkcoro-with-redis) runs beside its server.
#include "run_child.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

extern char** environ;

namespace zktest {

int run_child(const std::vector<std::string>& cmd, std::string_view program) {
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
        fmt::print(stderr, "{}: cannot run {}: {}\n", program, cmd[0], std::strerror(rc));
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

}  // namespace zktest
