// `zklock LOCKPATH -- COMMAND`: the one bootstrap of every backend (run_lock) and the run's steps:
// connect, acquire within what is left of --timeout, then the hold loop (hold_loop.cpp). Every
// wait is a coroutine on one io_context; the command's tree is reaped on SIGCHLD. What differs
// between ZooKeeper and Redis is behind lock_backend; every failure's exit status comes from the
// one table (exit_codes.hpp).
#include "event_pump.hpp"
#include "hold_loop.hpp"
#include "lock_backend.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/this_coro.hpp>

#include <fmt/format.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <variant>

namespace zklock {

using namespace asio::experimental::awaitable_operators;

namespace {

// What is left of --timeout since `start` (zero with --nonblock; duration::max() without either).
clock::duration acquire_wait(const options& o, clock::time_point start)
{
    if (o.nonblock)
        return clock::duration::zero();
    if (!o.timeout_s)
        return clock::duration::max();
    const auto deadline = start + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(*o.timeout_s));
    return std::max(clock::duration::zero(), deadline - clock::now());
}

// Connect, acquire within what is left of --timeout (zero with --nonblock), then run_holding.
asio::awaitable<int> lock_run(lock_backend& b, const options& o, const std::set<int>& inherited)
{
    b.make_lock();
    auto ex = co_await asio::this_coro::executor;
    const auto start = clock::now();
    // INT, TERM, HUP and SIGCHLD are queued from here on (SIGCHLD before any fork, so that no
    // exit is missed).
    auto events = std::make_shared<run_events>(ex);
    stop_events stopper{events};
    pump_signals(events);
    const bool tty = ::isatty(STDERR_FILENO) == 1;

    // 1. Connect.
    auto c = co_await (b.connect() || queued_signal(events));
    if (c.index() == 1)
        co_return 128 + std::get<1>(c);
    if (auto ec = std::get<0>(c)) {
        tell("zklock: {}\n", b.connect_failure(ec));
        co_return exit_for_connect(ec);
    }
    b.connected();

    // 2. Acquire.
    auto a = co_await (b.acquire(acquire_wait(o, start), tty) || queued_signal(events));
    if (tty) {
        tell("\r\033[K");  // the waiting line, if one was shown
        std::fflush(stderr);
    }
    if (a.index() == 1) {
        say(o, fmt::format("{} while waiting: giving up", signal_name(std::get<1>(a))));
        co_return 128 + std::get<1>(a);
    }
    acquired got = std::move(std::get<0>(a));
    if (got.ec) {
        tell("zklock: cannot acquire {}: {}\n", escape(o.lock_path), b.acquire_failure(got));
        co_return exit_for_error(got.ec);
    }
    co_return co_await run_holding(o, inherited, events, std::move(got), b);
}

std::unique_ptr<lock_backend> make_backend(asio::io_context& ioc, const options& o)
{
#ifdef ZKLOCK_REDIS
    if (is_redis_url(o.connect))
        return make_redis_backend(ioc, o);
#endif
    return make_zookeeper_backend(ioc, o);
}

}  // namespace

int run_lock(const options& o)
{
    // A message to a stderr whose reader went (a pipe into a pager or tee that ended) must not
    // kill zklock: its command would be killed with it and the lock left until the session
    // expires. The write fails with EPIPE instead and tell() drops it. The command gets SIGPIPE's
    // default back (spawn_command), so it dies of its own writes there, as under flock(1).
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGPIPE, &ignore, nullptr);
    // The signals zklock forwards and the SIGCHLD it reaps on must reach it, even if the caller
    // started it with them blocked (a blocked mask is inherited across exec).
    sigset_t ours;
    sigemptyset(&ours);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD})
        sigaddset(&ours, sig);
    ::sigprocmask(SIG_UNBLOCK, &ours, nullptr);
    const auto inherited = open_descriptors();
    asio::io_context ioc;
    const auto backend = make_backend(ioc, o);
    int rc = 1;
    bool done = false;
    asio::co_spawn(ioc, lock_run(*backend, o, inherited), [&](std::exception_ptr e, int r) {
        done = true;
        rc = r;
        if (e) {
            std::string what;
            rc = exit_for_exception(e, what);
            tell("zklock: error: {}\n", what);
        }
    });
    while (!done && ioc.run_one() > 0) {
    }
    const bool closed = backend->close(ioc);
    std::fflush(stdout);
    std::fflush(stderr);
    if (!closed)
        std::_Exit(rc);
    return rc;
}

}  // namespace zklock
