// `zklock LOCKPATH -- COMMAND`: connect, acquire, run the command, watch the lock, forward
// signals, release. Every wait here is a coroutine on one io_context; the command is reaped on
// SIGCHLD.
#include "zklock.hpp"

#include <zkcoro/guard.hpp>
#include <zkcoro/mutex.hpp>
#include <zkcoro/semaphore.hpp>
#include <zkcoro/shared_mutex.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <fmt/format.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <variant>

namespace zklock {

namespace {

using namespace asio::experimental::awaitable_operators;
using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

void say(const options& o, std::string_view msg)
{
    if (o.verbose)
        fmt::print(stderr, "zklock: {}\n", msg);
}

zkcoro::client_config make_config(const options& o)
{
    zkcoro::client_config cfg;
    cfg.connect_string = o.connect;
    cfg.session_timeout = o.session_timeout;
    cfg.connect_timeout = 10s;
    if (o.timeout_s) {
        const auto t = std::chrono::milliseconds(static_cast<long long>(*o.timeout_s * 1000.0));
        cfg.connect_timeout = std::clamp<std::chrono::milliseconds>(t, 1s, 10s);
    }
    if (o.verbose) {
        cfg.log_threshold = zkcoro::log_level::info;
        cfg.log = [](zkcoro::log_level l, std::string_view m) {
            fmt::print(stderr, "zklock: [{}] {}\n", zkcoro::to_string(l), m);
        };
    }
    return cfg;
}

// Every wait below completes normally (no exception) except when cancelled: the `||` operator
// waits for the first *successful* completion.

asio::awaitable<zkcoro::error_code> connect(zkcoro::client& zk)
{
    auto [ec] = co_await zk.async_connect(asio::as_tuple(asio::use_awaitable));
    co_return ec;
}

asio::awaitable<int> next_signal(asio::signal_set& sigs)
{
    auto [ec, sig] = co_await sigs.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec)
        throw boost::system::system_error(ec);  // cancelled: not a completion
    co_return sig;
}

asio::awaitable<void> next_sigchld(asio::signal_set& sigchld)
{
    auto [ec, sig] = co_await sigchld.async_wait(asio::as_tuple(asio::use_awaitable));
    (void)sig;
    if (ec)
        throw boost::system::system_error(ec);
}

asio::awaitable<zkcoro::error_code> lost(zkcoro::guard& g)
{
    auto [ec] = co_await g.async_wait_lost(asio::as_tuple(asio::use_awaitable));
    if (ec != zkcoro::client_errc::lock_lost)
        throw boost::system::system_error(ec);  // released or cancelled: not a loss
    co_return ec;
}

asio::awaitable<void> sleep_for(clock::duration d)
{
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    co_await t.async_wait(asio::use_awaitable);
}

// The lock objects of one run: exactly one is set.
struct locks {
    std::unique_ptr<zkcoro::mutex> mtx;
    std::unique_ptr<zkcoro::shared_mutex> rw;
    std::unique_ptr<zkcoro::semaphore> sem;
};

struct acquired {
    std::vector<zkcoro::guard> guards;  // empty: timed out / would block
    zkcoro::error_code ec;
    std::string what;
};

asio::awaitable<void> acquire_mutex(zkcoro::mutex& m, clock::duration wait, acquired& out)
{
    auto g = co_await m.acquire(wait);
    if (g)
        out.guards.push_back(std::move(*g));
}

asio::awaitable<void> acquire_lease(zkcoro::semaphore& s, clock::duration wait, acquired& out)
{
    auto leases = co_await s.acquire(1, wait);
    if (leases)
        out.guards = std::move(*leases);
}

asio::awaitable<acquired> acquire(locks& l, bool write_side, clock::duration wait)
{
    acquired out;
    try {
        if (l.sem)
            co_await acquire_lease(*l.sem, wait, out);
        else if (l.rw && write_side)
            co_await acquire_mutex(l.rw->writer(), wait, out);
        else if (l.rw)
            co_await acquire_mutex(l.rw->reader(), wait, out);
        else
            co_await acquire_mutex(*l.mtx, wait, out);
    } catch (const boost::system::system_error& e) {
        out.ec = e.code();
        out.what = e.what();
    }
    co_return out;
}

// The waiting line for a terminal: where we are in the queue and who holds the lock.
std::string waiting_line(const options& o, const queue_listing& q, std::int64_t me)
{
    std::size_t mine = q.entries.size();
    for (std::size_t i = 0; i < q.entries.size(); ++i)
        if (q.entries[i].session == me && (o.kind != recipe::semaphore || q.entries[i].mode == "queued")) {
            mine = i;
            break;
        }
    if (o.kind == recipe::semaphore) {
        std::size_t leases = 0, ahead = 0;
        const queue_entry* oldest = nullptr;
        for (std::size_t i = 0; i < q.entries.size(); ++i) {
            const auto& e = q.entries[i];
            if (e.mode == "lease" && e.session != me) {
                ++leases;
                if (oldest == nullptr)
                    oldest = &e;
            } else if (e.mode == "queued" && i < mine) {
                ++ahead;
            }
        }
        std::string line = fmt::format("waiting for {}: {} ahead, {} of {} leases held", q.path, ahead, leases,
                                       o.semaphore_leases);
        if (oldest != nullptr)
            line += fmt::format(" (oldest by {} for {:.0f}s)", oldest->data, age_seconds(oldest->ctime_ms));
        return line;
    }
    std::vector<const queue_entry*> holders;
    for (const auto& e : q.entries)
        if (e.holding.value_or(false) && e.session != me)
            holders.push_back(&e);
    std::string line = fmt::format("waiting for {}: {} ahead", q.path, std::min(mine, q.entries.size()));
    if (holders.size() == 1)
        line += fmt::format(", held by {} for {:.0f}s", holders[0]->data, age_seconds(holders[0]->ctime_ms));
    else if (holders.size() > 1)
        line += fmt::format(", held by {} readers", holders.size());
    return line;
}

// Refreshes the waiting line every 500 ms while on a terminal; otherwise just waits (until
// cancelled by the acquisition's end).
asio::awaitable<void> show_waiting(zkcoro::client& zk, const options& o, bool tty)
{
    auto ex = co_await asio::this_coro::executor;
    asio::steady_timer t(ex);
    if (!tty) {
        t.expires_at(clock::time_point::max());
        co_await t.async_wait(asio::use_awaitable);
        co_return;
    }
    t.expires_after(300ms);  // quiet when the lock comes at once
    co_await t.async_wait(asio::use_awaitable);
    for (;;) {
        std::string line;
        try {
            auto q = co_await list_queue_as(zk, o.lock_path, o.kind);
            line = waiting_line(o, q, zk.session().id);
        } catch (const boost::system::system_error& e) {
            if (e.code() == asio::error::operation_aborted)
                throw;
            line = fmt::format("waiting for {}: ({})", o.lock_path, e.code().message());
        }
        fmt::print(stderr, "\r\033[K{}", line);
        std::fflush(stderr);
        t.expires_after(500ms);
        co_await t.async_wait(asio::use_awaitable);
    }
}

asio::awaitable<void> release_all(std::vector<zkcoro::guard>& guards)
{
    for (auto& g : guards) {
        try {
            co_await g.release();
        } catch (const std::exception&) {
            // The session close that follows removes the node anyway.
        }
    }
}

int exit_code_of(int status)
{
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

void write_session_file(const options& o, const zkcoro::session_credentials& s)
{
    if (o.session_file.empty())
        return;
    std::string pw;
    for (unsigned char c : s.password)
        pw += fmt::format("{:02x}", c);
    std::FILE* f = std::fopen(o.session_file.c_str(), "w");
    if (f == nullptr) {
        fmt::print(stderr, "zklock: cannot write {}: {}\n", o.session_file, std::strerror(errno));
        return;
    }
    fmt::print(f, "{} {}\n", session_hex(s.id), pw);
    std::fclose(f);
}

asio::awaitable<int> lock_main(zkcoro::client& zk, const options& o, const std::set<int>& inherited)
{
    auto ex = co_await asio::this_coro::executor;
    const auto start = clock::now();
    asio::signal_set sigs(ex, SIGINT, SIGTERM, SIGHUP);
    const bool tty = ::isatty(STDERR_FILENO) == 1;

    // 1. Connect.
    auto c = co_await (connect(zk) || next_signal(sigs));
    if (c.index() == 1)
        co_return 128 + std::get<1>(c);
    if (auto ec = std::get<0>(c)) {
        fmt::print(stderr, "zklock: cannot connect to ZooKeeper at {}: {}\n", o.connect, ec.message());
        const bool bad = ec == zkcoro::client_errc::invalid_connect_string || ec == zkcoro::client_errc::invalid_argument;
        co_return bad ? exit_code::usage : exit_code::unavailable;
    }
    say(o, fmt::format("connected to {} (session {}, timeout {} ms)", zk.connected_server(),
                       session_hex(zk.session().id), zk.session_timeout().count()));
    write_session_file(o, zk.session());

    // 2. Acquire, within what is left of --timeout (zero with --nonblock).
    zkcoro::mutex_options mo;
    mo.data = o.data;
    locks l;
    if (o.kind == recipe::semaphore)
        l.sem = std::make_unique<zkcoro::semaphore>(zk, o.lock_path, o.semaphore_leases, mo);
    else if (o.kind == recipe::read || o.kind == recipe::write)
        l.rw = std::make_unique<zkcoro::shared_mutex>(zk, o.lock_path, mo);
    else
        l.mtx = std::make_unique<zkcoro::mutex>(zk, o.lock_path, mo);
    clock::duration wait = clock::duration::max();
    if (o.nonblock) {
        wait = clock::duration::zero();
    } else if (o.timeout_s) {
        const auto deadline = start + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(*o.timeout_s));
        wait = std::max(clock::duration::zero(), deadline - clock::now());
    }
    auto a = co_await (acquire(l, o.kind == recipe::write, wait) || next_signal(sigs) || show_waiting(zk, o, tty));
    if (tty) {
        fmt::print(stderr, "\r\033[K");
        std::fflush(stderr);
    }
    if (a.index() == 1) {
        say(o, fmt::format("signal {} while waiting: giving up", std::get<1>(a)));
        co_return 128 + std::get<1>(a);
    }
    if (a.index() != 0)
        co_return 1;  // unreachable: the waiting line never completes by itself
    acquired got = std::move(std::get<0>(a));
    if (got.ec) {
        fmt::print(stderr, "zklock: cannot acquire {}: {}\n", o.lock_path, got.what);
        if (got.ec == zkcoro::client_errc::invalid_path || got.ec == zkcoro::client_errc::invalid_argument)
            co_return exit_code::usage;
        if (zkcoro::is_session_lost(got.ec) || zkcoro::is_retriable(got.ec))
            co_return exit_code::unavailable;
        co_return exit_code::zk_error;
    }
    if (got.guards.empty()) {
        if (o.nonblock)
            fmt::print(stderr, "zklock: {} is held by another process (--nonblock)\n", o.lock_path);
        else
            fmt::print(stderr, "zklock: timed out after {} s waiting for {}\n", *o.timeout_s, o.lock_path);
        co_return exit_code::tempfail;
    }
    zkcoro::guard& g = got.guards.front();
    say(o, fmt::format("acquired {} (node {}, fencing token {})", o.lock_path, g.node_path(), g.fencing_token()));

    // 3. Run the command. SIGCHLD is watched before the fork so that no exit is missed.
    asio::signal_set sigchld(ex, SIGCHLD);
    int death_signal = o.lost_action == on_lost::kill ? SIGKILL : SIGTERM;
    if (o.lost_action == on_lost::ignore)
        death_signal = 0;
    const auto child = spawn_command(o.command, inherited, death_signal);
    if (child.pid < 0) {
        fmt::print(stderr, "zklock: cannot start {}: {}\n", o.command[0], std::strerror(child.error));
        co_await release_all(got.guards);
        co_return exit_code::cannot_exec;
    }
    say(o, fmt::format("started {} (pid {})", o.command[0], child.pid));

    bool was_lost = false;
    int status = 0;
    for (;;) {
        const pid_t r = ::waitpid(child.pid, &status, WNOHANG);
        if (r == child.pid || (r < 0 && errno == ECHILD))
            break;
        if (!was_lost) {
            auto ev = co_await (next_sigchld(sigchld) || next_signal(sigs) || lost(g));
            if (ev.index() == 1) {
                say(o, fmt::format("forwarding signal {} to process group {}", std::get<1>(ev), child.pid));
                ::kill(-child.pid, std::get<1>(ev));
            } else if (ev.index() == 2) {
                was_lost = true;
                const char* action = o.lost_action == on_lost::term   ? "sending SIGTERM to the command"
                                     : o.lost_action == on_lost::kill ? "sending SIGKILL to the command"
                                                                      : "leaving the command running (--on-lost ignore)";
                fmt::print(stderr, "zklock: lock on {} lost (the session may have expired): {}\n", o.lock_path, action);
                if (o.lost_action != on_lost::ignore)
                    ::kill(-child.pid, death_signal);
            }
        } else {
            auto ev = co_await (next_sigchld(sigchld) || next_signal(sigs));
            if (ev.index() == 1)
                ::kill(-child.pid, std::get<1>(ev));
        }
    }
    if (child.error != 0) {
        fmt::print(stderr, "zklock: cannot run {}: {}\n", o.command[0], std::strerror(child.error));
        co_await (release_all(got.guards) || sleep_for(3s));
        co_return child.error == ENOENT ? exit_code::not_found : exit_code::cannot_exec;
    }
    const int child_rc = exit_code_of(status);
    was_lost = was_lost || g.lost();
    say(o, fmt::format("{} exited with {}{}", o.command[0], child_rc, was_lost ? " after the lock was lost" : ""));

    // 4. Release (bounded: the session close that follows frees the node in any case).
    co_await (release_all(got.guards) || sleep_for(3s));
    if (was_lost) {
        if (o.lost_action == on_lost::ignore)
            fmt::print(stderr, "zklock: the lock on {} was lost while {} ran\n", o.lock_path, o.command[0]);
        co_return exit_code::lost;
    }
    co_return child_rc;
}

}  // namespace

int run_lock(const options& o)
{
    const auto inherited = open_descriptors();
    asio::io_context ioc;
    zkcoro::client zk(ioc.get_executor(), make_config(o));
    int rc = 1;
    bool done = false;
    asio::co_spawn(ioc, lock_main(zk, o, inherited), [&](std::exception_ptr e, int r) {
        done = true;
        rc = r;
        if (e) {
            try {
                std::rethrow_exception(e);
            } catch (const boost::system::system_error& x) {
                fmt::print(stderr, "zklock: error: {}\n", x.what());
                rc = zkcoro::is_session_lost(x.code()) ? exit_code::unavailable : exit_code::zk_error;
            } catch (const std::exception& x) {
                fmt::print(stderr, "zklock: error: {}\n", x.what());
                rc = exit_code::zk_error;
            }
        }
    });
    while (!done && ioc.run_one() > 0) {
    }
    // End the session now, so that its nodes vanish at once (bounded: over a dead link the
    // server expires it instead).
    bool closed = false;
    zk.async_close([&](zkcoro::error_code) { closed = true; });
    ioc.restart();
    const auto deadline = clock::now() + 3s;
    while (!closed && ioc.run_one_until(deadline) > 0) {
    }
    std::fflush(stdout);
    std::fflush(stderr);
    if (!closed)
        std::_Exit(rc);
    return rc;
}

}  // namespace zklock
