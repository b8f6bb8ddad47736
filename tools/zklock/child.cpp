// Starting the command: fork + exec in a process group of its own, with a pipe that reports a
// failed exec's errno to the parent (so that "not found" and "cannot run" get exit codes).
#include "zklock.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace zklock {

std::set<int> open_descriptors()
{
    std::set<int> fds;
    DIR* d = ::opendir("/proc/self/fd");
    if (d == nullptr) {
        for (int fd = 0; fd < 3; ++fd)
            if (::fcntl(fd, F_GETFD) != -1)
                fds.insert(fd);
        return fds;
    }
    const int own = ::dirfd(d);
    while (dirent* e = ::readdir(d)) {
        char* end = nullptr;
        const long fd = std::strtol(e->d_name, &end, 10);
        if (end != e->d_name && *end == '\0' && fd != own)
            fds.insert(static_cast<int>(fd));
    }
    ::closedir(d);
    return fds;
}

spawn_result spawn_command(const std::vector<std::string>& argv, const std::set<int>& inherited, int death_signal)
{
    // Everything opened since startup (ZooKeeper's socket, Asio's pipes) is not for the command.
    for (int fd : open_descriptors())
        if (!inherited.contains(fd))
            ::fcntl(fd, F_SETFD, ::fcntl(fd, F_GETFD) | FD_CLOEXEC);

    std::vector<std::string> args = argv;
    std::vector<char*> cargv;
    for (auto& a : args)
        cargv.push_back(a.data());
    cargv.push_back(nullptr);

    int report[2];
    if (::pipe2(report, O_CLOEXEC) != 0)
        return {-1, errno};
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) {
        const int err = errno;
        ::close(report[0]);
        ::close(report[1]);
        return {-1, err};
    }
    if (pid == 0) {
        // Only async-signal-safe calls from here to exec.
        ::setpgid(0, 0);
        for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE, SIGQUIT})
            ::signal(s, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        if (death_signal != 0) {
            ::prctl(PR_SET_PDEATHSIG, death_signal);
            if (::getppid() != parent)  // zklock died before prctl took effect
                ::raise(death_signal);
        }
        ::execvp(cargv[0], cargv.data());
        const int err = errno;
        ssize_t ignored = ::write(report[1], &err, sizeof err);
        (void)ignored;
        ::_exit(127);
    }
    // Set the group from this side too, so that it exists before any signal is forwarded.
    ::setpgid(pid, pid);
    ::close(report[1]);
    int err = 0;
    ssize_t n;
    do {
        n = ::read(report[0], &err, sizeof err);
    } while (n < 0 && errno == EINTR);
    ::close(report[0]);
    if (n == static_cast<ssize_t>(sizeof err))
        return {pid, err};  // exec failed: the child exits 127 at once; the caller reaps it
    return {pid, 0};
}

}  // namespace zklock
