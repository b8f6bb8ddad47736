// fault-child: the command the fault suite runs under zklock, one hold per run.
//
//   zklock ... LOCKPATH -- fault-child --id ID --log HOLDS --events EVENTS --hold-ms N
//                          [--fence-store FILE] [--control-store FILE]
//
// It reads the lock's fencing token, node and session from zklock's environment
// (ZKLOCK_FENCING_TOKEN, ZKLOCK_NODE, ZKLOCK_SESSION_ID), logs "enter <token> <session>" to the
// events file, waits --hold-ms (sigtimedwait, so zklock's SIGTERM on a lost lock ends the wait),
// then writes the token to the fence store and the control store (tests/support/fence_store.hpp)
// and logs the hold "<id> X <enter_ns> <exit_ns>" in interval-check's format. A signal ends the
// hold at once, with no write: "signal <N>" is logged and the exit status is 128+N.
//
// Without ZKLOCK_FENCING_TOKEN (a zklock that does not export it) the token is logged as -1 and
// nothing is written to the stores; the suite fails on such holds (its stale-write check would
// not have covered zklock).
//
// Every line is one write(2) on an O_APPEND descriptor. Exit 0 after a full hold, 2 on bad usage
// or an I/O error.
#include "fence_store.hpp"

#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>

namespace {

std::int64_t monotonic_ns()
{
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void append(const std::string& file, const std::string& line)
{
    if (file.empty())
        return;
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        throw std::runtime_error(fmt::format("cannot open {}: {}", file, std::strerror(errno)));
    const ssize_t n = ::write(fd, line.data(), line.size());
    ::close(fd);
    if (n != static_cast<ssize_t>(line.size()))
        throw std::runtime_error(fmt::format("cannot write to {}", file));
}

std::string env_or(const char* name, const char* fallback)
{
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? v : fallback;
}

}  // namespace

int main(int argc, char** argv)
{
    std::string id, log, events, fence_store, control_store;
    long long hold_ms = -1;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string_view k = argv[i];
        const std::string v = argv[i + 1];
        if (k == "--id") id = v;
        else if (k == "--log") log = v;
        else if (k == "--events") events = v;
        else if (k == "--fence-store") fence_store = v;
        else if (k == "--control-store") control_store = v;
        else if (k == "--hold-ms") hold_ms = std::atoll(v.c_str());
        else {
            fmt::print(stderr, "fault-child: unknown option {}\n", k);
            return 2;
        }
    }
    if (argc % 2 != 1 || id.empty() || log.empty() || hold_ms < 0) {
        fmt::print(stderr, "usage: fault-child --id ID --log HOLDS --events EVENTS --hold-ms N "
                           "[--fence-store FILE] [--control-store FILE]\n");
        return 2;
    }
    // Block the signals first: sigtimedwait takes them synchronously.
    sigset_t set;
    sigemptyset(&set);
    for (int s : {SIGTERM, SIGINT, SIGHUP})
        sigaddset(&set, s);
    sigprocmask(SIG_BLOCK, &set, nullptr);

    try {
        const std::string token_text = env_or("ZKLOCK_FENCING_TOKEN", "-1");
        std::int64_t token = -1;
        std::from_chars(token_text.data(), token_text.data() + token_text.size(), token);
        const std::string session = env_or("ZKLOCK_SESSION_ID", "?");
        const std::int64_t enter = monotonic_ns();
        append(events, fmt::format("{} {} enter {} {}\n", enter, id, token, session));

        timespec wait{static_cast<time_t>(hold_ms / 1000), static_cast<long>(hold_ms % 1000) * 1'000'000};
        int sig = -1;
        const std::int64_t until = enter + hold_ms * 1'000'000;
        for (;;) {
            sig = sigtimedwait(&set, nullptr, &wait);
            if (sig >= 0 || errno != EINTR)
                break;
            // Interrupted by another signal: wait for the rest of the hold.
            const std::int64_t left = std::max<std::int64_t>(until - monotonic_ns(), 0);
            wait = timespec{static_cast<time_t>(left / 1'000'000'000), static_cast<long>(left % 1'000'000'000)};
        }
        if (sig >= 0) {
            // zklock lost the lock (or is being stopped): leave at once, write nothing.
            const std::int64_t exit = monotonic_ns();
            append(events, fmt::format("{} {} signal {}\n", exit, id, sig));
            append(events, fmt::format("{} {} exit {}\n", exit, id, token));
            append(log, fmt::format("{} X {} {}\n", id, enter, exit));
            return 128 + sig;
        }
        if (token >= 0) {
            // The control store first: once the fence store has a token, the suite may act on it,
            // and the negative control must have it by then.
            if (!control_store.empty())
                zkfault::write_token(control_store, id, token, false);
            if (!fence_store.empty()) {
                const auto r = zkfault::write_token(fence_store, id, token, true);
                append(events, fmt::format("{} {} write {} {}\n", monotonic_ns(), id, token,
                                           r == zkfault::write_outcome::accepted ? "accepted" : "rejected"));
            }
        }
        const std::int64_t exit = monotonic_ns();
        append(events, fmt::format("{} {} exit {}\n", exit, id, token));
        append(log, fmt::format("{} X {} {}\n", id, enter, exit));
        return 0;
    } catch (const std::exception& e) {
        fmt::print(stderr, "fault-child[{}]: {}\n", id, e.what());
        return 2;
    }
}
