// The command's process tree (process_tree.hpp): reaping, signalling, the guardian's end.
#include "process_tree.hpp"

#include <fmt/format.h>

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace zklock {

using namespace std::chrono_literals;

namespace {

// What /proc/PID/stat says of a process: its state letter and process group. False if it cannot
// be read (the process is gone, or not a process).
bool read_stat(long pid, char& state, long& pgrp)
{
    std::FILE* f = std::fopen(fmt::format("/proc/{}/stat", pid).c_str(), "r");
    if (f == nullptr)
        return false;
    char buf[1024];
    const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    buf[n] = '\0';
    // "pid (comm) state ppid pgrp ...": comm may hold anything, so parse after the last ')'.
    const char* rp = std::strrchr(buf, ')');
    long ppid = 0;
    return rp != nullptr && std::sscanf(rp + 1, " %c %ld %ld", &state, &ppid, &pgrp) == 3;
}

}  // namespace

int process_tree::reap()
{
    int stopped = 0;
    for (int i = 0; i < 1'000'000; ++i) {  // bounded: at most one round per child
        int st = 0;
        const pid_t r = ::waitpid(-1, &st, WNOHANG | WUNTRACED);
        if (r <= 0)
            break;
        if (WIFSTOPPED(st)) {
            if (r == command)
                stopped = WSTOPSIG(st);
            continue;
        }
        if (r == command) {
            command_done = true;
            command_status = st;
        } else if (r == guardian) {
            guardian_reaped = true;
        } else {
            ++reaped_others;
        }
    }
    return stopped;
}

std::vector<pid_t> process_tree::children() const
{
    auto c = children_of_self();
    if (!c) {
        if (!command_done)
            return {command};
        return {};
    }
    std::erase(*c, guardian);
    return std::move(*c);
}

bool process_tree::any_stopped() const
{
    const auto kids = children();
    DIR* d = ::opendir("/proc");
    if (d == nullptr)
        return true;  // cannot tell: continue them to be sure
    bool stopped = false;
    int scanned = 0;
    while (dirent* e = ::readdir(d)) {
        if (++scanned > 1'000'000 || stopped)
            break;
        char* end = nullptr;
        const long pid = std::strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end != '\0')
            continue;
        char state = 0;
        long pgrp = 0;
        if (!read_stat(pid, state, pgrp))
            continue;
        const bool ours = pgrp == guardian || std::find(kids.begin(), kids.end(), static_cast<pid_t>(pid)) != kids.end();
        stopped = ours && static_cast<pid_t>(pid) != guardian && (state == 'T' || state == 't');
    }
    ::closedir(d);
    return stopped;
}

void process_tree::signal(int sig) const
{
    // The group's id cannot be reused while the guardian is unreaped (even as a zombie).
    if (!guardian_reaped)
        ::kill(-guardian, sig);
    for (pid_t p : children())
        if (guardian_reaped || ::getpgid(p) != guardian)
            ::kill(p, sig);
}

void process_tree::end_guardian()
{
    if (guardian > 0 && !guardian_reaped) {
        ::kill(guardian, SIGKILL);
        int st = 0;
        while (::waitpid(guardian, &st, 0) < 0 && errno == EINTR) {
        }
        guardian_reaped = true;
    }
}

int exit_code_of(int status)
{
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

std::chrono::milliseconds guardian_kill_bound(std::chrono::milliseconds lease)
{
    return std::max<std::chrono::milliseconds>(1ms, lease / 3);
}

}  // namespace zklock
