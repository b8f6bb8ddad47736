#include "process.hpp"

#include <zk_server.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <cstdlib>
#include <stdexcept>
#include <string_view>
#include <thread>

extern char** environ;

namespace zkfault {

namespace {

// Live children, readable from the signal path without locks or allocation.
std::array<std::atomic<pid_t>, 256> g_children{};

void register_child(pid_t pid)
{
    for (auto& slot : g_children) {
        pid_t expected = 0;
        if (slot.compare_exchange_strong(expected, pid))
            return;
    }
    // Full: the child still dies with us through PR_SET_PDEATHSIG.
}

void unregister_child(pid_t pid)
{
    for (auto& slot : g_children) {
        pid_t expected = pid;
        if (slot.compare_exchange_strong(expected, 0))
            return;
    }
}

int shell_status(int status)
{
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

// Reaps a child known to have exited (or about to): unregister first, so that the signal path
// never kills a recycled PID.
int reap(pid_t pid)
{
    siginfo_t info{};
    while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
    }
    unregister_child(pid);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return 1;
    }
    return shell_status(status);
}

bool has_exited(pid_t pid)
{
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0)
        return errno == ECHILD;
    return info.si_pid == pid;
}

// argv[0] as a path: looked up in PATH before fork(), since the search allocates.
std::string resolve_program(const std::string& name)
{
    if (name.find('/') != std::string::npos)
        return name;
    const char* path = std::getenv("PATH");
    std::string_view rest = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";
    while (!rest.empty()) {
        const auto colon = rest.find(':');
        const std::string dir(rest.substr(0, colon));
        rest = colon == std::string_view::npos ? std::string_view{} : rest.substr(colon + 1);
        const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
        if (::access(candidate.c_str(), X_OK) == 0)
            return candidate;
    }
    throw std::runtime_error(fmt::format("{} not found in PATH", name));
}

}  // namespace

pid_t spawn(const std::vector<std::string>& argv_in, const std::string& out_file, const std::string& err_file,
            const std::vector<std::string>& extra_env)
{
    if (argv_in.empty())
        throw std::invalid_argument("spawn: empty command");
    // Everything the child needs is built before fork(): afterwards only async-signal-safe calls.
    std::vector<std::string> args = argv_in;
    const std::string program = resolve_program(args[0]);
    std::vector<char*> argv;
    for (auto& a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_strings = extra_env;
    std::vector<char*> envp;
    for (auto& e : env_strings)
        envp.push_back(e.data());
    for (char** e = environ; *e != nullptr; ++e)
        envp.push_back(*e);
    envp.push_back(nullptr);
    const std::string out = out_file.empty() ? "/dev/null" : out_file;
    const std::string err = err_file.empty() ? "/dev/null" : err_file;
    const pid_t parent = ::getpid();

    const pid_t pid = ::fork();
    if (pid < 0)
        throw std::runtime_error(fmt::format("fork: {}", std::strerror(errno)));
    if (pid == 0) {
        zktest::prepare_child_after_fork(parent);
        const int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (in < 0 || o < 0 || e < 0)
            ::_exit(126);
        ::dup2(in, 0);
        ::dup2(o, 1);
        ::dup2(e, 2);
        ::close_range(3, ~0U, 0);
        ::execve(program.c_str(), argv.data(), envp.data());
        static const char msg[] = "fault-suite: exec failed\n";
        [[maybe_unused]] auto n = ::write(2, msg, sizeof msg - 1);
        ::_exit(127);
    }
    register_child(pid);
    return pid;
}

std::optional<int> wait_exit(pid_t pid, std::chrono::milliseconds timeout)
{
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (pidfd >= 0) {
        // The pidfd becomes readable when the process exits: an event, not a poll loop.
        for (;;) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - std::chrono::steady_clock::now());
            pollfd p{pidfd, POLLIN, 0};
            const int r = ::poll(&p, 1, static_cast<int>(std::max<long long>(left.count(), 0)));
            if (r < 0 && errno == EINTR)
                continue;
            ::close(pidfd);
            if (r <= 0)
                return std::nullopt;
            return reap(pid);
        }
    }
    // No pidfd (old kernel): a bounded poll.
    while (!has_exited(pid)) {
        if (std::chrono::steady_clock::now() >= deadline)
            return std::nullopt;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return reap(pid);
}

int end_process(pid_t pid, std::chrono::milliseconds grace)
{
    if (!has_exited(pid)) {
        ::kill(pid, SIGTERM);
        ::kill(pid, SIGCONT);
    }
    if (auto st = wait_exit(pid, grace))
        return *st;
    ::kill(pid, SIGKILL);
    return reap(pid);
}

char process_state(pid_t pid)
{
    std::ifstream in(fmt::format("/proc/{}/stat", pid));
    std::string s;
    std::getline(in, s);
    // The command name may hold spaces or ')': the state follows the last ')'.
    const auto rp = s.rfind(')');
    if (rp == std::string::npos || rp + 2 >= s.size())
        return 0;
    return s[rp + 2];
}

void kill_registered() noexcept
{
    for (auto& slot : g_children) {
        const pid_t p = slot.load();
        if (p > 0) {
            ::kill(p, SIGKILL);
            ::kill(p, SIGCONT);
        }
    }
}

}  // namespace zkfault
