// zklock-test-child: the COMMAND the zklock tests run under the lock.
//
//   zklock-test-child --id ID [--log FILE] [--events FILE] [--mode X|R|W|S] [--sleep-ms N]
//                     [--exit CODE] [--raise SIGNAL] [--env-file FILE]
//
// --env-file FILE: at start, writes zklock's variables (ZKLOCK_FENCING_TOKEN, ZKLOCK_NODE,
// ZKLOCK_SESSION_ID) to FILE as NAME=value lines, "unset" for a missing one, before the
// "start" event.
// At start it appends "<id> start <pid> <monotonic ns>" to the events file; then it sleeps
// (sigtimedwait, so INT, TERM and HUP end the sleep). On such a signal it appends
// "<id> signal <N> <pid>" to the events file and exits 128+N. Otherwise it appends the hold
// "<id> <mode> <enter_ns> <exit_ns>" (CLOCK_MONOTONIC, interval-check's format) to the log and
// exits with --exit CODE (default 0), or raises --raise SIGNAL on itself. Each line is one
// write(2) on an O_APPEND descriptor, so several children may share the files.
#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
    if (fd < 0) {
        std::fprintf(stderr, "zklock-test-child: cannot open %s: %s\n", file.c_str(), std::strerror(errno));
        std::exit(2);
    }
    if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
        std::fprintf(stderr, "zklock-test-child: cannot write %s\n", file.c_str());
        std::exit(2);
    }
    ::close(fd);
}

}  // namespace

int main(int argc, char** argv)
{
    std::string id, log, events, env_file, mode = "X";
    long sleep_ms = 0;
    int exit_code = 0, raise_sig = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string_view k = argv[i];
        const char* v = argv[i + 1];
        if (k == "--id") id = v;
        else if (k == "--log") log = v;
        else if (k == "--events") events = v;
        else if (k == "--mode") mode = v;
        else if (k == "--sleep-ms") sleep_ms = std::atol(v);
        else if (k == "--exit") exit_code = std::atoi(v);
        else if (k == "--raise") raise_sig = std::atoi(v);
        else if (k == "--env-file") env_file = v;
        else {
            std::fprintf(stderr, "zklock-test-child: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (id.empty() || argc % 2 == 0) {
        std::fprintf(stderr, "usage: zklock-test-child --id ID [--log F] [--events F] [--mode M] [--sleep-ms N] [--exit C] [--raise S]\n");
        return 2;
    }
    sigset_t set;
    sigemptyset(&set);
    for (int s : {SIGINT, SIGTERM, SIGHUP})
        sigaddset(&set, s);
    sigprocmask(SIG_BLOCK, &set, nullptr);

    if (!env_file.empty()) {
        std::string vars;
        for (const char* name : {"ZKLOCK_FENCING_TOKEN", "ZKLOCK_NODE", "ZKLOCK_SESSION_ID"}) {
            const char* v = std::getenv(name);
            vars += std::string(name) + "=" + (v != nullptr ? v : "unset") + "\n";
        }
        append(env_file, vars);
    }
    const std::int64_t enter = monotonic_ns();
    append(events, id + " start " + std::to_string(::getpid()) + " " + std::to_string(enter) + "\n");
    const std::int64_t until = enter + sleep_ms * 1'000'000;
    for (;;) {
        const std::int64_t left = until - monotonic_ns();
        if (left <= 0)
            break;
        timespec ts{static_cast<time_t>(left / 1'000'000'000), static_cast<long>(left % 1'000'000'000)};
        const int sig = sigtimedwait(&set, nullptr, &ts);
        if (sig > 0) {
            append(events, id + " signal " + std::to_string(sig) + " " + std::to_string(::getpid()) + "\n");
            return 128 + sig;
        }
        if (sig < 0 && errno != EAGAIN && errno != EINTR)
            break;
    }
    const std::int64_t exit_ns = monotonic_ns();
    append(log, id + " " + mode + " " + std::to_string(enter) + " " + std::to_string(exit_ns) + "\n");
    if (raise_sig != 0) {
        signal(raise_sig, SIG_DFL);
        sigprocmask(SIG_UNBLOCK, &set, nullptr);
        raise(raise_sig);
    }
    return exit_code;
}
