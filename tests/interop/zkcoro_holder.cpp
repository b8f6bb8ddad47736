// zkcoro-holder: contends on a lock with zkcoro's recipes and logs every hold, the zkcoro
// counterpart of CuratorHolder.java, so that the interval checker can prove mutual exclusion
// between Curator and zkcoro processes (and between tasks of one zkcoro process).
//
//   zkcoro-holder --connect HOST:PORT --path /locks/x --duration-ms D --hold-ms H --log FILE
//                 --id NAME [--recipe mutex|read|write|semaphore] [--leases N] [--tasks N]
//                 [--session-timeout-ms 4000] [--connection-timeout-ms 3000]
//                 [--acquire-timeout-ms 2000] [--max-count 100000]
//                 [--events FILE] [--fence-store FILE] [--control-store FILE]
//                 [--first-hold-ms N] [--freeze-before-write K] [--stop-file FILE]
//                 [--tolerate-errors] [--linger-ms N]
//   zkcoro-holder --participants --connect HOST:PORT --path /locks/x [--recipe mutex]
//
// Recipes (the default is mutex), each with the log mode of CuratorHolder:
//   mutex      zkcoro::mutex                        X
//   read       zkcoro::shared_mutex, read side      R   (Curator's InterProcessReadWriteLock)
//   write      zkcoro::shared_mutex, write side     W
//   semaphore  zkcoro::semaphore, --leases N max    S   (Curator's InterProcessSemaphoreV2);
//              each hold takes one lease
//
// Each hold appends one line "<id> <mode> <enter_ns> <exit_ns>" to FILE with a single write(2)
// on a descriptor opened with O_APPEND, so several holders may share a file. enter_ns is read
// after acquire() returned, exit_ns before release() is called: the logged interval lies inside
// the real hold. Both are clock_gettime(CLOCK_MONOTONIC), the clock of Java's System.nanoTime().
//
// --tasks N runs N tasks (separate co_spawns, hence separate lock owners) on one lock object
// (zkcoro::mutex, zkcoro::shared_mutex or zkcoro::semaphore) of one client; task k (1..N) logs
// with id "<id>.<k>". With N = 1 the id is "<id>".
//
// --linger-ms N (mutex): mutex_options::linger, the node kept N ms after a release while
// nobody else queues.
//
// A hold is cut short when the lock is lost (the wait is bound to the guard's lost slot), as a
// careful critical section would be.
//
// Options for the fault suite (tests/fault):
//   --events FILE         appends "<monotonic_ns> <id> <kind> ..." lines (one write(2) each):
//                         "session <sid> <server>" when connected (again), "expired <sid>",
//                         "enter <token> <sid>", "exit <token>", "lost <token> <sid>",
//                         "write <token> accepted|rejected", "freezing <token>", "error <what>".
//   --fence-store FILE    at the end of each hold not lost, writes the fencing token to this
//                         fence store (tests/support/fence_store.hpp), which refuses stale ones;
//   --control-store FILE  and to this one, which accepts everything (the negative control).
//   --first-hold-ms N     the first hold of each task lasts N ms instead of --hold-ms.
//   --freeze-before-write K  on its K-th hold, task 1 checks that the lock is not lost, logs
//                         "freezing", stops its own process with SIGSTOP, and writes after
//                         SIGCONT: the worst moment for a pause (a GC pause, a frozen VM).
//   --stop-file FILE      stop acquiring once FILE exists (checked before each acquire).
//   --tolerate-errors     an acquire that fails (session expired, connection trouble) is logged
//                         as an "error" event and retried 200 ms later instead of ending the task.
//
// stdout: "acquired=<total>" at the end (participants mode: one node path per line, holder
// first). stderr: per-task counts and warnings. Exit 0 on success, 2 on error or bad usage.
#include <zkcoro/client.hpp>
#include <zkcoro/guard.hpp>
#include <zkcoro/mutex.hpp>
#include <zkcoro/semaphore.hpp>
#include <zkcoro/shared_mutex.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include "fence_store.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

constexpr std::string_view usage_text =
    "usage: zkcoro-holder --connect HOST:PORT --path /locks/x --duration-ms D --hold-ms H\n"
    "         --log FILE --id NAME [--recipe mutex|read|write|semaphore] [--leases N]\n"
    "         [--tasks N] [--session-timeout-ms 4000] [--connection-timeout-ms 3000]\n"
    "         [--acquire-timeout-ms 2000] [--max-count 100000]\n"
    "         [--events FILE] [--fence-store FILE] [--control-store FILE]\n"
    "         [--first-hold-ms N] [--freeze-before-write K] [--stop-file FILE]\n"
    "         [--tolerate-errors]\n"
    "       zkcoro-holder --participants --connect HOST:PORT --path /locks/x [--recipe mutex]\n";

struct usage_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct options {
    std::string connect;
    std::string path;
    std::string log_file;
    std::string id;
    std::string recipe = "mutex";
    long long leases = 1;  // semaphore: max leases
    long long duration_ms = -1;
    long long hold_ms = -1;
    long long session_timeout_ms = 4000;
    long long connection_timeout_ms = 3000;
    long long acquire_timeout_ms = 2000;
    long long max_count = 100000;
    long long tasks = 1;
    long long linger_ms = 0;  // mutex: mutex_options::linger
    bool participants = false;
    // Fault-suite options (see the header comment).
    std::string events_file;
    std::string fence_store;
    std::string control_store;
    std::string stop_file;
    long long first_hold_ms = -1;
    long long freeze_before_write = 0;
    bool tolerate_errors = false;
};

long long number(std::string_view key, std::string_view val, long long min)
{
    long long n = 0;
    auto [ptr, ec] = std::from_chars(val.data(), val.data() + val.size(), n);
    if (ec != std::errc{} || ptr != val.data() + val.size())
        throw usage_error(fmt::format("{} needs an integer, got '{}'", key, val));
    if (n < min || n > 2147483647LL)
        throw usage_error(fmt::format("{} out of range: {}", key, val));
    return n;
}

options parse(int argc, char** argv)
{
    options o;
    std::map<std::string, std::string> v;
    for (int i = 1; i < argc; ++i) {
        std::string_view a = argv[i];
        if (a == "--participants") {
            o.participants = true;
            continue;
        }
        if (a == "--tolerate-errors") {
            o.tolerate_errors = true;
            continue;
        }
        if (a == "--help" || a == "-h")
            throw usage_error("help requested");
        if (!a.starts_with("--"))
            throw usage_error(fmt::format("unexpected argument: {}", a));
        std::string key(a);
        std::string val;
        if (auto eq = a.find('='); eq != std::string_view::npos && eq > 0) {
            key = std::string(a.substr(0, eq));
            val = std::string(a.substr(eq + 1));
        } else {
            if (i + 1 >= argc)
                throw usage_error(fmt::format("missing value for {}", a));
            val = argv[++i];
        }
        v[key] = val;
    }
    for (const auto& [k, val] : v) {
        if (k == "--connect") o.connect = val;
        else if (k == "--path") o.path = val;
        else if (k == "--recipe") {
            if (val != "mutex" && val != "read" && val != "write" && val != "semaphore")
                throw usage_error(fmt::format("--recipe must be mutex, read, write or semaphore, not {}", val));
            o.recipe = val;
        }
        else if (k == "--leases") o.leases = number(k, val, 1);
        else if (k == "--duration-ms") o.duration_ms = number(k, val, 0);
        else if (k == "--hold-ms") o.hold_ms = number(k, val, 0);
        else if (k == "--log") o.log_file = val;
        else if (k == "--id") o.id = val;
        else if (k == "--session-timeout-ms") o.session_timeout_ms = number(k, val, 1);
        else if (k == "--connection-timeout-ms") o.connection_timeout_ms = number(k, val, 1);
        else if (k == "--acquire-timeout-ms") o.acquire_timeout_ms = number(k, val, 1);
        else if (k == "--max-count") o.max_count = number(k, val, 1);
        else if (k == "--tasks") o.tasks = std::min(number(k, val, 1), 64LL);
        else if (k == "--linger-ms") o.linger_ms = number(k, val, 0);
        else if (k == "--events") o.events_file = val;
        else if (k == "--fence-store") o.fence_store = val;
        else if (k == "--control-store") o.control_store = val;
        else if (k == "--stop-file") o.stop_file = val;
        else if (k == "--first-hold-ms") o.first_hold_ms = number(k, val, 0);
        else if (k == "--freeze-before-write") o.freeze_before_write = number(k, val, 1);
        else throw usage_error(fmt::format("unknown option {}", k));
    }
    if (o.connect.empty())
        throw usage_error("--connect is required");
    if (o.path.empty() || o.path[0] != '/')
        throw usage_error("--path /absolute/path is required");
    if (o.participants) {
        if (o.recipe != "mutex")
            throw usage_error("--participants supports --recipe mutex only");
        return o;
    }
    if (o.duration_ms < 0)
        throw usage_error("--duration-ms is required");
    if (o.hold_ms < 0)
        throw usage_error("--hold-ms is required");
    if (o.log_file.empty())
        throw usage_error("--log is required");
    if (o.id.empty() || std::any_of(o.id.begin(), o.id.end(), [](char c) {
            return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
        }))
        throw usage_error("--id NAME (non-empty, no whitespace) is required");
    return o;
}

std::int64_t monotonic_ns()
{
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// One line, one write(2): with O_APPEND the line lands whole at the end of the file.
void append_line(int fd, const std::string& line)
{
    for (;;) {
        const ssize_t n = ::write(fd, line.data(), line.size());
        if (n == static_cast<ssize_t>(line.size()))
            return;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            throw std::runtime_error(fmt::format("write to log failed: {}", std::strerror(errno)));
        throw std::runtime_error(fmt::format("short write to log ({} of {} bytes)", n, line.size()));
    }
}

zkcoro::client_config make_config(const options& o)
{
    zkcoro::client_config cfg;
    cfg.connect_string = o.connect;
    cfg.session_timeout = std::chrono::milliseconds(o.session_timeout_ms);
    cfg.connect_timeout = std::chrono::milliseconds(std::max(o.connection_timeout_ms, o.session_timeout_ms));
    cfg.log_threshold = zkcoro::log_level::warn;
    cfg.log = [](zkcoro::log_level l, std::string_view m) {
        fmt::print(stderr, "zkcoro-holder: [{}] {}\n", zkcoro::to_string(l), m);
    };
    return cfg;
}

struct task_result {
    std::string id;
    long long count = 0;
    long long suspect = 0;
    std::exception_ptr error;
    bool done = false;
};

// What the tasks contend on: a mutex (mutex recipe, or one side of a shared_mutex), or a
// semaphore of which each hold takes one lease.
struct lock_target {
    char mode = 'X';
    zkcoro::mutex* m = nullptr;
    zkcoro::semaphore* s = nullptr;
};

// One acquisition as a list of guards (a mutex: one; a semaphore: its leases). Empty when the
// time ran out. Separate coroutines rather than a conditional co_await (GCC 12).
asio::awaitable<std::vector<zkcoro::guard>> acquire_mutex(zkcoro::mutex& m, std::chrono::steady_clock::duration wait)
{
    std::vector<zkcoro::guard> out;
    auto g = co_await m.acquire(wait);
    if (g)
        out.push_back(std::move(*g));
    co_return out;
}

asio::awaitable<std::vector<zkcoro::guard>> acquire_lease(zkcoro::semaphore& s, std::chrono::steady_clock::duration wait)
{
    std::vector<zkcoro::guard> out;
    auto leases = co_await s.acquire(1, wait);
    if (leases) {
        if (leases->size() != 1)
            throw std::runtime_error(fmt::format("semaphore acquire(1) returned {} leases", leases->size()));
        out = std::move(*leases);
    }
    co_return out;
}

std::string hex(std::int64_t v)
{
    return fmt::format("0x{:x}", static_cast<std::uint64_t>(v));
}

// One event line "<monotonic_ns> <id> <what>" (fault suite), nothing without --events.
void event(int fd, std::string_view id, std::string_view what)
{
    if (fd >= 0)
        append_line(fd, fmt::format("{} {} {}\n", monotonic_ns(), id, what));
}

bool stop_requested(const options& o)
{
    struct stat st{};
    return !o.stop_file.empty() && ::stat(o.stop_file.c_str(), &st) == 0;
}

// Where a task writes: the hold log, the events file (-1: none), and its own result.
struct task_io {
    int log_fd;
    int events_fd;
    bool may_freeze;  // task 1 carries out --freeze-before-write
};

// Writes the token to the control store and the fence store, logging the fence store's verdict.
// The control store first: the suite may end this holder as soon as it sees the verdict, and the
// negative control must have the write by then.
void write_fenced(const options& o, const task_io& io, const std::string& id, std::int64_t token)
{
    if (!o.control_store.empty())
        zkfault::write_token(o.control_store, id, token, false);
    if (!o.fence_store.empty()) {
        const auto r = zkfault::write_token(o.fence_store, id, token, true);
        event(io.events_fd, id,
              fmt::format("write {} {}", token, r == zkfault::write_outcome::accepted ? "accepted" : "rejected"));
    }
}

asio::awaitable<void> hold_loop(lock_target t, const options& o, task_io io,
                                std::chrono::steady_clock::time_point deadline, task_result& r)
{
    auto ex = co_await asio::this_coro::executor;
    asio::steady_timer pause(ex);
    long long holds = 0;
    while (r.count < o.max_count) {
        const auto now = std::chrono::steady_clock::now();
        if (now >= deadline || stop_requested(o))
            break;
        const auto wait = std::min<std::chrono::steady_clock::duration>(
            std::chrono::milliseconds(o.acquire_timeout_ms), deadline - now);
        std::vector<zkcoro::guard> guards;
        std::string failure;
        try {
            if (t.s != nullptr)
                guards = co_await acquire_lease(*t.s, wait);
            else
                guards = co_await acquire_mutex(*t.m, wait);
        } catch (const boost::system::system_error& e) {
            if (!o.tolerate_errors)
                throw;
            failure = e.code().message();
        }
        if (!failure.empty()) {
            // A fault may end the session or the connection while we wait: note it and retry.
            event(io.events_fd, r.id, fmt::format("error acquire: {}", failure));
            pause.expires_after(200ms);
            co_await pause.async_wait(asio::use_awaitable);
            continue;
        }
        if (guards.empty())
            continue;  // timed out: retry while time remains
        ++holds;
        const std::int64_t token = guards.front().fencing_token();
        const std::int64_t enter = monotonic_ns();
        event(io.events_fd, r.id, fmt::format("enter {} {}", token, hex(guards.front().session_id())));
        const long long this_hold = holds == 1 && o.first_hold_ms >= 0 ? o.first_hold_ms : o.hold_ms;
        if (this_hold > 0) {
            // The critical section ends early when the lock is lost.
            pause.expires_after(std::chrono::milliseconds(this_hold));
            boost::system::error_code ec;
            co_await pause.async_wait(
                asio::bind_cancellation_slot(guards.front().lost_slot(), asio::redirect_error(asio::use_awaitable, ec)));
        }
        // lost() covers "the session may have expired": the hold may not have been exclusive.
        bool lost = false;
        for (const auto& g : guards)
            lost = lost || g.lost();
        if (lost) {
            event(io.events_fd, r.id, fmt::format("lost {} {}", token, hex(guards.front().session_id())));
        } else {
            if (io.may_freeze && holds == o.freeze_before_write) {
                // The lock was checked a moment ago; now the process freezes before its write.
                event(io.events_fd, r.id, fmt::format("freezing {}", token));
                ::raise(SIGSTOP);
            }
            write_fenced(o, io, r.id, token);
        }
        const std::int64_t exit = monotonic_ns();
        event(io.events_fd, r.id, fmt::format("exit {}", token));
        std::string release_failure;
        for (auto& g : guards) {
            try {
                co_await g.release();
            } catch (const boost::system::system_error& e) {
                if (!o.tolerate_errors)
                    throw;
                release_failure = e.code().message();
            }
        }
        if (!release_failure.empty())
            event(io.events_fd, r.id, fmt::format("error release: {}", release_failure));
        if (lost) {
            ++r.suspect;
            fmt::print(stderr, "zkcoro-holder[{}]: warning: lock lost during hold {}..{} (exclusion not guaranteed for it)\n",
                       r.id, enter, exit);
        }
        append_line(io.log_fd, fmt::format("{} {} {} {}\n", r.id, t.mode, enter, exit));
        ++r.count;
    }
}

// Logs every new connection (with its session and server) and every session expiry.
asio::awaitable<void> watch_session(zkcoro::client& c, int events_fd, std::string id)
{
    zkcoro::session_state known = zkcoro::session_state::connecting;
    std::int64_t sid = 0;
    for (;;) {
        auto [ec, st] = co_await c.async_wait_state(known, asio::as_tuple(asio::use_awaitable));
        if (ec || st == zkcoro::session_state::closed)
            co_return;
        const std::int64_t now_sid = c.session().id;
        if (st == zkcoro::session_state::expired || (sid != 0 && now_sid != 0 && now_sid != sid)) {
            if (sid != 0)
                event(events_fd, id, fmt::format("expired {}", hex(sid)));
            sid = 0;
        }
        if (st == zkcoro::session_state::connected) {
            sid = now_sid;
            event(events_fd, id, fmt::format("session {} {}", hex(sid), c.connected_server()));
        }
        known = st;
    }
}

int run_holder(const options& o)
{
    const int fd = ::open(o.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        fmt::print(stderr, "zkcoro-holder: cannot open {}: {}\n", o.log_file, std::strerror(errno));
        return 2;
    }
    int events_fd = -1;
    if (!o.events_file.empty()) {
        events_fd = ::open(o.events_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (events_fd < 0) {
            fmt::print(stderr, "zkcoro-holder: cannot open {}: {}\n", o.events_file, std::strerror(errno));
            return 2;
        }
    }

    asio::io_context ioc;
    zkcoro::client c(ioc.get_executor(), make_config(o));
    // The lock object shared by all tasks, by recipe.
    std::unique_ptr<zkcoro::mutex> mtx;
    std::unique_ptr<zkcoro::shared_mutex> rw;
    std::unique_ptr<zkcoro::semaphore> sem;
    lock_target target;
    if (o.recipe == "read" || o.recipe == "write") {
        rw = std::make_unique<zkcoro::shared_mutex>(c, o.path);
        target.mode = o.recipe == "read" ? 'R' : 'W';
        target.m = o.recipe == "read" ? &rw->reader() : &rw->writer();
    } else if (o.recipe == "semaphore") {
        sem = std::make_unique<zkcoro::semaphore>(c, o.path, static_cast<int>(o.leases));
        target.mode = 'S';
        target.s = sem.get();
    } else {
        zkcoro::mutex_options mo;
        mo.linger = std::chrono::milliseconds(o.linger_ms);
        mtx = std::make_unique<zkcoro::mutex>(c, o.path, mo);
        target.m = mtx.get();
    }
    std::vector<task_result> results(static_cast<std::size_t>(o.tasks));
    for (std::size_t k = 0; k < results.size(); ++k)
        results[k].id = o.tasks == 1 ? o.id : fmt::format("{}.{}", o.id, k + 1);
    std::exception_ptr main_error;
    bool finished = false;

    asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        if (events_fd >= 0)
            asio::co_spawn(ex, watch_session(c, events_fd, o.id), asio::detached);
        try {
            co_await c.async_connect();
        } catch (...) {
            main_error = std::current_exception();
            c.close();
            co_return;
        }
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(o.duration_ms);
        // Woken (cancelled) by the last task to finish.
        asio::steady_timer all_done(ex, std::chrono::steady_clock::time_point::max());
        std::size_t running = results.size();
        bool first = true;
        for (auto& r : results) {
            const task_io io{fd, events_fd, first};
            first = false;
            asio::co_spawn(ex, hold_loop(target, o, io, deadline, r), [&](std::exception_ptr e) {
                r.error = e;
                r.done = true;
                if (--running == 0)
                    all_done.cancel();
            });
        }
        while (running > 0) {
            boost::system::error_code ec;
            co_await all_done.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        }
        boost::system::error_code ec;
        co_await c.async_close(asio::redirect_error(asio::use_awaitable, ec));
        finished = true;
    }, [&](std::exception_ptr e) {
        if (e && !main_error)
            main_error = e;
    });

    // Bounded: duration, plus one acquire timeout and one hold, plus the connection, plus slack.
    const auto budget = std::chrono::milliseconds(o.duration_ms + o.acquire_timeout_ms + o.hold_ms +
                                                  std::max(o.first_hold_ms, 0LL) +
                                                  std::max(o.connection_timeout_ms, o.session_timeout_ms)) +
                        30s;
    ioc.run_for(budget);
    if (!ioc.stopped() && !finished) {
        fmt::print(stderr, "zkcoro-holder[{}]: did not finish within {} ms\n", o.id,
                   std::chrono::duration_cast<std::chrono::milliseconds>(budget).count());
        std::fflush(stderr);
        std::_Exit(2);
    }
    ::close(fd);
    if (events_fd >= 0)
        ::close(events_fd);

    int rc = 0;
    auto describe = [](const std::exception_ptr& e) -> std::string {
        try {
            std::rethrow_exception(e);
        } catch (const std::exception& x) {
            return x.what();
        } catch (...) {
            return "unknown exception";
        }
    };
    if (main_error) {
        fmt::print(stderr, "zkcoro-holder[{}]: error: {}\n", o.id, describe(main_error));
        rc = 2;
    }
    long long total = 0;
    for (const auto& r : results) {
        total += r.count;
        if (r.error) {
            fmt::print(stderr, "zkcoro-holder[{}]: error: {}\n", r.id, describe(r.error));
            rc = 2;
        } else if (!r.done && !main_error) {
            fmt::print(stderr, "zkcoro-holder[{}]: task did not finish\n", r.id);
            rc = 2;
        }
        if (r.suspect > 0)
            fmt::print(stderr, "zkcoro-holder[{}]: {} hold(s) overlapped a lost lock\n", r.id, r.suspect);
        if (o.tasks > 1)
            fmt::print(stderr, "zkcoro-holder[{}]: acquired={}\n", r.id, r.count);
    }
    fmt::print("acquired={}\n", total);
    std::fflush(stdout);
    return rc;
}

int run_participants(const options& o)
{
    asio::io_context ioc;
    zkcoro::client c(ioc.get_executor(), make_config(o));
    zkcoro::mutex m(c, o.path);
    std::vector<zkcoro::participant> parts;
    std::exception_ptr error;
    bool finished = false;
    asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
        co_await c.async_connect();
        parts = co_await m.async_participants();
        boost::system::error_code ec;
        co_await c.async_close(asio::redirect_error(asio::use_awaitable, ec));
        finished = true;
    }, [&](std::exception_ptr e) {
        if (e) {
            error = e;
            c.close();
        }
    });
    const auto budget = std::chrono::milliseconds(std::max(o.connection_timeout_ms, o.session_timeout_ms)) + 30s;
    ioc.run_for(budget);
    if (!ioc.stopped() && !finished && !error) {
        fmt::print(stderr, "zkcoro-holder: participants did not finish within {} ms\n",
                   std::chrono::duration_cast<std::chrono::milliseconds>(budget).count());
        std::fflush(stderr);
        std::_Exit(2);
    }
    if (error) {
        try {
            std::rethrow_exception(error);
        } catch (const std::exception& x) {
            fmt::print(stderr, "zkcoro-holder: error: {}\n", x.what());
        } catch (...) {
            fmt::print(stderr, "zkcoro-holder: error: unknown exception\n");
        }
        return 2;
    }
    for (const auto& p : parts)
        fmt::print("{}\n", p.path);
    std::fflush(stdout);
    return 0;
}

}  // namespace

int main(int argc, char** argv)
{
    try {
        const options o = parse(argc, argv);
        return o.participants ? run_participants(o) : run_holder(o);
    } catch (const usage_error& e) {
        fmt::print(stderr, "zkcoro-holder: {}\n{}", e.what(), usage_text);
        return 2;
    } catch (const std::exception& e) {
        fmt::print(stderr, "zkcoro-holder: error: {}\n", e.what());
        return 2;
    }
}
