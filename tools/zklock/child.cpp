// Starting the command: fork + exec in the guardian's process group, with a pipe that reports a
// failed exec's errno to the parent (so that "not found" and "cannot run" get exit codes); the
// guardian; the subreaper and the list of zklock's children.
#include "zklock.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
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

bool become_subreaper()
{
    return ::prctl(PR_SET_CHILD_SUBREAPER, 1L, 0L, 0L, 0L) == 0;
}

// Why a guardian as well as the subreaper: the subreaper lets zklock wait for every descendant
// (the command's background jobs included, even those that called setsid()), but it does
// nothing once zklock itself is killed with SIGKILL: the orphans go to init and the lock goes
// to someone else when the session expires. The parent-death signal reaches only a direct
// child, and it is not inherited across fork, so the command's own children never get it. The
// guardian is a direct child that gets it, and it leads the command's process group, so the
// group's id stays valid (cannot be reused) while the guardian lives: its kill(0, ...) can only
// reach the command's group. What it cannot reach after zklock's death is a descendant that
// left the group (setsid, setpgid); while zklock lives, zklock reaches those as their
// subreaper. A cgroup would cover both, but needs a delegated cgroup tree, which an ordinary
// user often lacks.
pid_t spawn_guardian(int signal, std::chrono::milliseconds kill_after)
{
    const pid_t parent = ::getpid();
    const long long after_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(kill_after).count();
    const pid_t pid = ::fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        // zklock may have threads: only async-signal-safe calls from here on.
        ::setpgid(0, 0);
        ::close_range(0, ~0U, 0);  // no terminal, pipe or ZooKeeper socket kept open
        sigset_t all;
        sigfillset(&all);
        ::sigprocmask(SIG_BLOCK, &all, nullptr);  // the group's signals are not for us
        sigset_t death;
        sigemptyset(&death);
        sigaddset(&death, SIGUSR2);
        ::prctl(PR_SET_PDEATHSIG, SIGUSR2);
        // zklock may have died before prctl; a SIGUSR2 from elsewhere is ignored.
        while (::getppid() == parent)
            ::sigwaitinfo(&death, nullptr);
        if (signal != 0) {
            ::kill(0, signal);
            ::kill(0, SIGCONT);  // a stopped process gets the signal only once continued
        }
        if (signal == 0 || signal == SIGKILL || after_ns <= 0)
            ::_exit(0);
        timespec left{static_cast<time_t>(after_ns / 1'000'000'000), static_cast<long>(after_ns % 1'000'000'000)};
        while (::nanosleep(&left, &left) != 0 && errno == EINTR) {
        }
        ::kill(0, SIGKILL);  // the guardian too
        ::_exit(0);
    }
    ::setpgid(pid, pid);  // from this side too, so that the group exists before the command joins
    return pid;
}

spawn_result spawn_command(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                           const std::set<int>& inherited, pid_t pgid)
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
    std::vector<std::string> vars = env;
    std::vector<char*> cenv;
    for (auto& v : vars)
        cenv.push_back(v.data());
    cenv.push_back(nullptr);

    int report[2];
    if (::pipe2(report, O_CLOEXEC) != 0)
        return {-1, errno};
    const pid_t pid = ::fork();
    if (pid < 0) {
        const int err = errno;
        ::close(report[0]);
        ::close(report[1]);
        return {-1, err};
    }
    if (pid == 0) {
        // Only async-signal-safe calls from here to exec.
        ::setpgid(0, pgid);
        for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE, SIGQUIT})
            ::signal(s, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        ::execvpe(cargv[0], cargv.data(), cenv.data());
        const int err = errno;
        ssize_t ignored = ::write(report[1], &err, sizeof err);
        (void)ignored;
        ::_exit(127);
    }
    // Join the group from this side too, so that it holds before any signal is forwarded.
    ::setpgid(pid, pgid);
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

std::optional<std::vector<pid_t>> children_of_self()
{
    // A reparented orphan becomes the child of one of our threads: read every thread's list.
    DIR* d = ::opendir("/proc/self/task");
    if (d == nullptr)
        return std::nullopt;
    std::vector<pid_t> out;
    bool any = false;
    while (dirent* e = ::readdir(d)) {
        if (e->d_name[0] == '.')
            continue;
        std::FILE* f = std::fopen(fmt::format("/proc/self/task/{}/children", e->d_name).c_str(), "r");
        if (f == nullptr)
            continue;
        any = true;
        long pid = 0;
        while (std::fscanf(f, "%ld", &pid) == 1)
            out.push_back(static_cast<pid_t>(pid));
        std::fclose(f);
    }
    ::closedir(d);
    if (!any)
        return std::nullopt;
    return out;
}

}  // namespace zklock
