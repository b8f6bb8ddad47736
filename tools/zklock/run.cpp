// `zklock LOCKPATH -- COMMAND`: connect, acquire, run the command, watch the lock and the
// command's process tree, forward signals, release. Every wait here is a coroutine on one
// io_context; the tree is reaped on SIGCHLD.
#include "zklock.hpp"

#include <zkcoro/guard.hpp>
#include <zkcoro/holder_data.hpp>
#include <zkcoro/mutex.hpp>
#ifdef ZKLOCK_REDIS
#include <zkcoro/redis_mutex.hpp>
#endif
#include <zkcoro/semaphore.hpp>
#include <zkcoro/shared_mutex.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

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
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <variant>

extern char** environ;

namespace zklock {

using namespace asio::experimental::awaitable_operators;
using namespace std::chrono_literals;

namespace {

using clock = std::chrono::steady_clock;

constexpr int zk_noauth = -102;  // ZooKeeper's ZNOAUTH

void say(const options& o, std::string_view msg)
{
    if (o.verbose)
        fmt::print(stderr, "zklock: {}\n", msg);
}

std::string signal_name(int sig)
{
    const char* abbrev = ::sigabbrev_np(sig);
    return abbrev != nullptr ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", sig);
}

}  // namespace

zkcoro::client_config make_config(const options& o)
{
    zkcoro::client_config cfg;
    cfg.connect_string = o.connect;
    cfg.session_timeout = o.session_timeout;
    cfg.connect_timeout = 10s;
    cfg.auth = o.auth;
    if (o.acl == acl_kind::creator)
        cfg.default_acl = zkcoro::creator_all_acl();
    // Issue 39: -t bounds the whole wait, the first connection included, and an ensemble that
    // comes back within it is waited for (was: 10 s at most, whatever -t said); at least 1 s.
    // Without -t, 10 s; -n tries once: 2 s at most.
    if (o.timeout_s) {
        const auto t = std::chrono::milliseconds(static_cast<long long>(*o.timeout_s * 1000.0));
        cfg.connect_timeout = std::max<std::chrono::milliseconds>(t, 1s);
    }
    if (o.nonblock)
        cfg.connect_timeout = 2s;
    if (o.verbose) {
        cfg.log_threshold = zkcoro::log_level::info;
        cfg.log = [](zkcoro::log_level l, std::string_view m) {
            fmt::print(stderr, "zklock: [{}] {}\n", zkcoro::to_string(l), escape(m));
        };
    }
    return cfg;
}

// What to tell a user whose request ZooKeeper refused with ZNOAUTH.
std::string noauth_hint(const options& o)
{
    if (o.auth.empty())
        return fmt::format("the ACL of {} (or of a parent) refuses unauthenticated clients: pass credentials "
                           "with --auth-file FILE or ZK_AUTH=digest:USER:PASSWORD",
                           escape(o.lock_path));
    return fmt::format("the ACL of {} (or of a parent) does not allow the credentials given (scheme {}): "
                       "check them, or the node's ACL",
                       escape(o.lock_path), o.auth.front().scheme);
}

bool is_noauth(const zkcoro::error_code& ec)
{
    return ec.value() == zk_noauth && ec.category() == zkcoro::zookeeper_category();
}

namespace {

// Every wait below completes normally (no exception) except when cancelled: the `||` operator
// waits for the first *successful* completion.

asio::awaitable<zkcoro::error_code> connect(zkcoro::client& zk)
{
    auto [ec] = co_await zk.async_connect(asio::as_tuple(asio::use_awaitable));
    co_return ec;
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
        out.what = e.code().message();
    }
    co_return out;
}

// Where we are in the queue and what holds the lock (the waiting line).
std::string waiting_line(const options& o, const queue_listing& q, std::int64_t me, bool ages = true)
{
    std::size_t mine = q.entries.size();
    for (std::size_t i = 0; i < q.entries.size(); ++i)
        if (q.entries[i].session == me && q.entries[i].mode != "foreign" &&
            (o.kind != recipe::semaphore || q.entries[i].mode == "queued")) {
            mine = i;
            break;
        }
    std::string line;
    if (o.kind == recipe::semaphore) {
        std::size_t leases = 0, ahead = 0;
        const queue_entry* oldest = nullptr;
        for (std::size_t i = 0; i < q.entries.size(); ++i) {
            const auto& e = q.entries[i];
            const bool lease = e.mode == "lease" || (e.mode == "foreign" && e.path.find("/leases/") != std::string::npos);
            if (lease && e.session != me) {
                ++leases;
                if (oldest == nullptr && e.mode == "lease")
                    oldest = &e;
            } else if (!lease && i < mine) {
                ++ahead;
            }
        }
        line = fmt::format("waiting for {}: {} ahead, {} of {} leases held", escape(q.path), ahead, leases,
                           o.semaphore_leases);
        if (oldest != nullptr)
            line += fmt::format(" (oldest by {}{})", escape(oldest->data),
                                ages ? fmt::format(" for {:.0f}s", age_seconds(oldest->ctime_ms)) : "");
    } else {
        std::vector<const queue_entry*> holders;
        for (const auto& e : q.entries)
            if (e.holding.value_or(false) && e.session != me)
                holders.push_back(&e);
        line = fmt::format("waiting for {}: {} ahead", escape(q.path), std::min(mine, q.entries.size()));
        if (holders.size() == 1)
            line += fmt::format(", held by {}{}", escape(holders[0]->data),
                                ages ? fmt::format(" for {:.0f}s", age_seconds(holders[0]->ctime_ms)) : "");
        else if (holders.size() > 1)
            line += fmt::format(", held by {} readers", holders.size());
    }
    for (const auto& n : q.notes)
        line += fmt::format("; {}", n);
    return line;
}

// While the acquisition waits: on a terminal, one line refreshed in place every 500 ms; with
// -v off a terminal, the same line printed whenever it changes. Otherwise just waits (until
// cancelled by the acquisition's end).
asio::awaitable<void> show_waiting(zkcoro::client& zk, const options& o, bool tty)
{
    auto ex = co_await asio::this_coro::executor;
    asio::steady_timer t(ex);
    if (!tty && !o.verbose) {
        t.expires_at(clock::time_point::max());
        co_await t.async_wait(asio::use_awaitable);
        co_return;
    }
    t.expires_after(300ms);  // quiet when the lock comes at once
    co_await t.async_wait(asio::use_awaitable);
    std::string last;  // off a terminal: the last line printed, ages left out (they change every second)
    for (;;) {
        std::string line, ageless;
        try {
            auto q = co_await list_queue_as(zk, o.lock_path, o.kind);
            line = waiting_line(o, q, zk.session().id);
            ageless = waiting_line(o, q, zk.session().id, false);
        } catch (const boost::system::system_error& e) {
            if (e.code() == asio::error::operation_aborted)
                throw;
            line = ageless = fmt::format("waiting for {}: ({})", escape(o.lock_path), e.code().message());
        }
        if (tty) {
            fmt::print(stderr, "\r\033[K{}", line);
            std::fflush(stderr);
        } else if (ageless != last) {
            fmt::print(stderr, "zklock: {}\n", line);
            last = std::move(ageless);
        }
        t.expires_after(500ms);
        co_await t.async_wait(asio::use_awaitable);
    }
}

// Releases every guard by deleting its node, each within 3 s. Returns what went wrong ("" if
// nothing): a release error is never dropped. The delete runs on its own and a timer bounds the
// wait (not `release || timer`, which would wait for the delete to honour the cancellation).
struct release_state {
    explicit release_state(const asio::any_io_executor& ex) : timer(ex) {}
    asio::steady_timer timer;
    std::optional<zkcoro::error_code> result;
};

asio::awaitable<void> release_one(std::shared_ptr<release_state> st, zkcoro::guard* g)
{
    // g is used only to start the release (the operation keeps what it needs).
    auto [ec] = co_await g->async_release(asio::as_tuple(asio::use_awaitable));
    st->result = ec;
    st->timer.cancel();
}

// `limit` bounds each delete: through a failover the delete is retried until the session could
// have expired (then the server removes the node with it).
asio::awaitable<std::string> release_all(const options& o, std::vector<zkcoro::guard>& guards,
                                         std::chrono::milliseconds limit)
{
    auto ex = co_await asio::this_coro::executor;
    std::string failed;
    const double limit_s = std::chrono::duration<double>(limit).count();
    for (auto& g : guards) {
        if (!g.valid())
            continue;
        const std::string node = g.node_path();
        const bool lost = g.lost();
        auto st = std::make_shared<release_state>(ex);
        st->timer.expires_after(limit);
        asio::co_spawn(ex, release_one(st, &g), asio::detached);
        if (!st->result)
            co_await st->timer.async_wait(asio::as_tuple(asio::use_awaitable));  // expired, or done
        if (!st->result) {
            failed = fmt::format("no answer within {:g} s deleting {}", limit_s, escape(node));
        } else if (auto ec = *st->result) {
            failed = fmt::format("deleting {}: {}", escape(node), ec.message());
            if (is_noauth(ec))
                failed += "; " + noauth_hint(o);
        } else if (lost) {
            say(o, fmt::format("the lock on {} was lost: nothing left to release ({} is gone, or deleted now)",
                               escape(o.lock_path), escape(node)));
        } else {
            say(o, fmt::format("released {} (deleted {})", escape(o.lock_path), escape(node)));
        }
    }
    co_return failed;
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
        fmt::print(stderr, "zklock: cannot write {}: {}\n", escape(o.session_file), std::strerror(errno));
        return;
    }
    fmt::print(f, "{} {}\n", session_hex(s.id), pw);
    std::fclose(f);
}

// zklock's environment plus what the command needs to fence what it writes.
std::vector<std::string> command_environment(const zkcoro::guard& g)
{
    std::vector<std::string> env;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
        const std::string_view v = *e;
        if (!v.starts_with("ZKLOCK_FENCING_TOKEN=") && !v.starts_with("ZKLOCK_NODE=") &&
            !v.starts_with("ZKLOCK_SESSION_ID="))
            env.emplace_back(v);
    }
    env.push_back(fmt::format("ZKLOCK_FENCING_TOKEN={}", g.fencing_token()));
    env.push_back(fmt::format("ZKLOCK_NODE={}", g.node_path()));
    env.push_back(fmt::format("ZKLOCK_SESSION_ID={}", session_hex(g.session_id())));
    return env;
}

// The command's process tree: the guardian (leader of the command's process group, see
// spawn_guardian), the command, and every descendant, which zklock (a subreaper) inherits when
// its parent dies. zklock waits until all of them have exited, as flock(1) holds its lock while
// any process that inherited the lock's descriptor lives.
struct process_tree {
    pid_t guardian = -1;  // also the process group's id
    bool guardian_reaped = false;
    pid_t command = -1;
    bool command_done = false;
    int command_status = 0;
    std::size_t reaped_others = 0;

    // Reaps every child that exited; returns the signal that stopped the command (0: none).
    int reap()
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

    // Live descendants that are zklock's children (the guardian excepted). Without the kernel's
    // children list, only the command is known.
    std::vector<pid_t> children() const
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

    bool done() const { return command_done && children().empty(); }

    // True if a process of the command's group, or a child of zklock, is stopped (state T): a
    // signal sent to it stays pending until SIGCONT. Scans /proc; zklock does this only when it
    // forwards a signal.
    bool any_stopped() const
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
            std::FILE* f = std::fopen(fmt::format("/proc/{}/stat", pid).c_str(), "r");
            if (f == nullptr)
                continue;
            char buf[1024];
            const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
            std::fclose(f);
            buf[n] = '\0';
            // "pid (comm) state ppid pgrp ...": comm may hold anything, so parse after the last ')'.
            const char* rp = std::strrchr(buf, ')');
            char state = 0;
            long ppid = 0, pgrp = 0;
            if (rp == nullptr || std::sscanf(rp + 1, " %c %ld %ld", &state, &ppid, &pgrp) != 3)
                continue;
            const bool ours = pgrp == guardian || std::find(kids.begin(), kids.end(), static_cast<pid_t>(pid)) != kids.end();
            stopped = ours && static_cast<pid_t>(pid) != guardian && (state == 'T' || state == 't');
        }
        ::closedir(d);
        return stopped;
    }

    // Sends `sig` to the command's process group, and to every child of zklock outside it
    // (descendants that called setsid() and whose parent has exited).
    void signal(int sig) const
    {
        // The group's id cannot be reused while the guardian is unreaped (even as a zombie).
        if (!guardian_reaped)
            ::kill(-guardian, sig);
        for (pid_t p : children())
            if (guardian_reaped || ::getpgid(p) != guardian)
                ::kill(p, sig);
    }

    // Ends the guardian (nothing left to guard) and reaps it.
    void end_guardian()
    {
        if (guardian > 0 && !guardian_reaped) {
            ::kill(guardian, SIGKILL);
            int st = 0;
            while (::waitpid(guardian, &st, 0) < 0 && errno == EINTR) {
            }
            guardian_reaped = true;
        }
    }
};

// What run_holding needs to know of the backend that granted the lock.
struct backend_info {
    // A round trip that completes without error only while the lock is held (ZooKeeper: a
    // transaction fenced by the lock node; Redis: a PING, by whose reply the lease's own TTL
    // clock has had its say). Used after zklock was stopped.
    std::function<asio::awaitable<zkcoro::error_code>(zkcoro::guard&)> probe;
    // The lease: the negotiated session timeout, or the key's TTL. The server can give the lock
    // to another holder 2/3 of it after our last heartbeat or renewal at the earliest.
    std::chrono::milliseconds lease{};
    std::string_view lost_why;  // why a lock is lost, for the loss message
    bool redis = false;
};

enum class event_kind { child, signal, lost, escalate, revoke, stop };
struct event {
    event_kind kind;
    int sig = 0;
};

// What the supervision loop waits for, fed by one long-lived coroutine per source. (Not `a || b`
// per wait: when two sources complete in the same round, `||` keeps one result and drops the
// other, and a dropped signal is a signal lost; nor a lost-lock wait cancelled and restarted at
// every SIGCHLD.) Shared, so that a source still pending when lock_main returns owns it.
struct run_events {
    explicit run_events(const asio::any_io_executor& ex)
        : wake(ex), sigchld(ex, SIGCHLD), sigs(ex, SIGINT, SIGTERM, SIGHUP), stops(ex)
    {
    }
    asio::steady_timer wake;  // the loop sleeps on it; cancelled by every push
    asio::signal_set sigchld;
    asio::signal_set sigs;
    // TSTP, TTIN, TTOU: taken over only while the command runs (before, they stop zklock alone,
    // as by default).
    asio::signal_set stops;
    asio::cancellation_signal stop_lost;
    asio::cancellation_signal stop_revoke;
    std::deque<event> queue;

    void push(event e)
    {
        queue.push_back(e);
        wake.cancel();
    }
};

asio::awaitable<void> pump_signals(std::shared_ptr<run_events> ev, asio::signal_set* set, event_kind kind)
{
    for (;;) {
        auto [ec, sig] = co_await set->async_wait(asio::as_tuple(asio::use_awaitable));
        if (ec)
            co_return;  // cancelled: the run is over
        ev->push(event{kind, sig});
    }
}

asio::awaitable<void> pump_lost(std::shared_ptr<run_events> ev, zkcoro::guard& g)
{
    // g is used only to start the wait (the operation keeps what it needs).
    auto [ec] = co_await g.async_wait_lost(
        asio::bind_cancellation_slot(ev->stop_lost.slot(), asio::as_tuple(asio::use_awaitable)));
    if (ec == zkcoro::client_errc::lock_lost)
        ev->push(event{event_kind::lost});
}

// A revocation request (--revocable) becomes an event.
asio::awaitable<void> pump_revoke(std::shared_ptr<run_events> ev, zkcoro::guard& g)
{
    auto [ec] = co_await g.async_wait_revocation(
        asio::bind_cancellation_slot(ev->stop_revoke.slot(), asio::as_tuple(asio::use_awaitable)));
    if (!ec)
        ev->push(event{event_kind::revoke});
}

// Completes with the first INT, TERM or HUP queued (left in the queue), for `||` with the
// connection and the acquisition: a signal that arrives as they complete stays queued.
asio::awaitable<int> queued_signal(std::shared_ptr<run_events> ev)
{
    for (;;) {
        for (const auto& e : ev->queue)
            if (e.kind == event_kind::signal)
                co_return e.sig;
        if ((co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none)
            throw boost::system::system_error(asio::error::operation_aborted);  // the other side won
        ev->wake.expires_at(clock::time_point::max());
        co_await ev->wake.async_wait(asio::as_tuple(asio::use_awaitable));  // a push, or cancelled
    }
}

// Stops the event sources when lock_main ends, however it ends.
struct stop_events {
    std::shared_ptr<run_events> ev;
    ~stop_events()
    {
        ev->sigchld.cancel();
        ev->sigs.cancel();
        ev->stops.cancel();
        ev->stop_lost.emit(asio::cancellation_type::terminal);
        ev->stop_revoke.emit(asio::cancellation_type::terminal);
    }
};

int lost_signal(const options& o)
{
    return o.lost_action == on_lost::kill ? SIGKILL : o.lost_action == on_lost::term ? SIGTERM : 0;
}

}  // namespace

std::string shown_connect(std::string_view connect)
{
#ifdef ZKLOCK_REDIS
    return escape(zkcoro::redact_url(connect));
#else
    // No redact_url without the Redis backend, and no password belongs in a ZooKeeper connect
    // string (credentials go in --auth-file or $ZK_AUTH): what may hold one is not shown.
    return connect.find('@') == std::string_view::npos ? escape(connect) : std::string("(not shown: it has an '@')");
#endif
}

std::string connect_failure(const options& o, const zkcoro::error_code& ec)
{
    if (ec == zkcoro::client_errc::name_resolution_failed)
        return fmt::format("cannot resolve the host name(s) of {} '{}': {}", o.connect_origin, shown_connect(o.connect),
                           ec.message());
    if (ec == zkcoro::client_errc::chroot_not_found) {
        const auto slash = o.connect.find('/');
        const std::string chroot = slash == std::string::npos ? std::string() : o.connect.substr(slash);
        return fmt::format("the chroot {} of {} '{}' does not exist on the server: create it, or remove it from "
                           "the connect string",
                           escape(chroot), o.connect_origin, shown_connect(o.connect));
    }
    if (ec == zkcoro::client_errc::connect_timeout)
        return fmt::format("cannot connect to ZooKeeper at {} ({}): no session within {} s; is a server running "
                           "there and reachable?",
                           shown_connect(o.connect), o.connect_origin,
                           std::chrono::duration_cast<std::chrono::seconds>(make_config(o).connect_timeout).count());
    if (ec == zkcoro::client_errc::auth_failed)
        return fmt::format("ZooKeeper at {} rejected the credentials from {} (scheme '{}'): check them (digest "
                           "credentials are digest:USER:PASSWORD), and that the server knows the scheme",
                           shown_connect(o.connect), o.auth_origin, o.auth.empty() ? "" : escape(o.auth.front().scheme));
    return fmt::format("cannot connect to ZooKeeper at {} ({}): {}", shown_connect(o.connect), o.connect_origin, ec.message());
}

namespace {

asio::awaitable<int> run_holding(const options& o, const std::set<int>& inherited, std::shared_ptr<run_events> events,
                                 acquired got, const backend_info& backend);

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

// Succeeds only while g's lock node exists: a transaction of one check on it.
asio::awaitable<zkcoro::error_code> fenced_check(zkcoro::guard& g)
{
    auto [ec, results] = co_await g.async_multi({}, asio::as_tuple(asio::use_awaitable));
    co_return ec;
}

// What a run needs of its backend (ZooKeeper or Redis): the connection, the acquisition (with
// whatever it shows while it waits), and what run_holding needs to know. The run itself, the
// signals, the messages' frame and the exit statuses are the same for both (lock_run).
struct run_backend {
    std::function<asio::awaitable<zkcoro::error_code>()> connect;
    // The message and the exit status of a failed connection.
    std::function<std::pair<std::string, int>(const zkcoro::error_code&)> connect_failed;
    std::function<void()> connected;  // says where to (and, ZooKeeper, writes the session file)
    std::function<asio::awaitable<acquired>(clock::duration wait, bool tty)> acquire;
    // Why the acquisition failed, after "cannot acquire LOCKPATH: ".
    std::function<std::string(const acquired&)> acquire_failed;
    backend_info info;
};

// Connect, acquire within what is left of --timeout (zero with --nonblock), then run_holding.
asio::awaitable<int> lock_run(run_backend& b, const options& o, const std::set<int>& inherited)
{
    auto ex = co_await asio::this_coro::executor;
    const auto start = clock::now();
    // INT, TERM, HUP and SIGCHLD are queued from here on (SIGCHLD before any fork, so that no
    // exit is missed).
    auto events = std::make_shared<run_events>(ex);
    stop_events stopper{events};
    asio::co_spawn(ex, pump_signals(events, &events->sigs, event_kind::signal), asio::detached);
    asio::co_spawn(ex, pump_signals(events, &events->sigchld, event_kind::child), asio::detached);
    const bool tty = ::isatty(STDERR_FILENO) == 1;

    // 1. Connect.
    auto c = co_await (b.connect() || queued_signal(events));
    if (c.index() == 1)
        co_return 128 + std::get<1>(c);
    if (auto ec = std::get<0>(c)) {
        auto failed = b.connect_failed(ec);
        fmt::print(stderr, "zklock: {}\n", failed.first);
        co_return failed.second;
    }
    b.connected();

    // 2. Acquire.
    auto a = co_await (b.acquire(acquire_wait(o, start), tty) || queued_signal(events));
    if (tty) {
        fmt::print(stderr, "\r\033[K");  // the waiting line, if one was shown
        std::fflush(stderr);
    }
    if (a.index() == 1) {
        say(o, fmt::format("{} while waiting: giving up", signal_name(std::get<1>(a))));
        co_return 128 + std::get<1>(a);
    }
    acquired got = std::move(std::get<0>(a));
    if (got.ec) {
        fmt::print(stderr, "zklock: cannot acquire {}: {}\n", escape(o.lock_path), b.acquire_failed(got));
        co_return exit_for_error(got.ec);
    }
    co_return co_await run_holding(o, inherited, events, std::move(got), b.info);
}

// ZooKeeper: the acquisition, with the waiting line on a terminal.
asio::awaitable<acquired> acquire_showing(locks& l, bool write_side, clock::duration wait, zkcoro::client& zk,
                                          const options& o, bool tty)
{
    auto r = co_await (acquire(l, write_side, wait) || show_waiting(zk, o, tty));
    if (r.index() != 0) {  // unreachable: the waiting line never completes by itself
        acquired out;
        out.ec = zkcoro::client_errc::internal_error;
        out.what = out.ec.message();
        co_return out;
    }
    co_return std::move(std::get<0>(r));
}

asio::awaitable<int> lock_main(zkcoro::client& zk, const options& o, const std::set<int>& inherited)
{
    zkcoro::mutex_options mo;
    // Default: the library's (host=... pid=... program=zklock) with the command's name as the
    // label, so that `status` says which job waits. A revocable node stores nothing.
    // Inside another zklock's command, its session ($ZKLOCK_SESSION_ID) is recorded as the parent:
    // this one waits on its behalf too, and status -r --cycles sees nested locks' deadlocks.
    auto me = zkcoro::this_process(o.command.empty() ? std::string() : o.command.front());
    if (const char* parent = std::getenv("ZKLOCK_SESSION_ID"))
        me.parent_session = static_cast<std::int64_t>(std::strtoull(parent, nullptr, 16));
    mo.data = !o.data.empty() || o.revocable || o.command.empty() ? o.data : zkcoro::format_holder_data(me);
    mo.revocable = o.revocable;
    locks l;
    if (o.kind == recipe::semaphore)
        l.sem = std::make_unique<zkcoro::semaphore>(zk, o.lock_path, o.semaphore_leases, mo);
    else if (o.kind == recipe::read || o.kind == recipe::write)
        l.rw = std::make_unique<zkcoro::shared_mutex>(zk, o.lock_path, mo);
    else
        l.mtx = std::make_unique<zkcoro::mutex>(zk, o.lock_path, mo);

    run_backend b;
    b.connect = [&zk] { return connect(zk); };
    b.connect_failed = [&o](const zkcoro::error_code& ec) {
        return std::pair{connect_failure(o, ec), exit_for_connect(ec)};
    };
    b.connected = [&b, &zk, &o] {
        say(o, fmt::format("connected to {} (session {}, timeout {} ms)", zk.connected_server(),
                           session_hex(zk.session().id), zk.session_timeout().count()));
        write_session_file(o, zk.session());
        // The lease is the negotiated session timeout.
        b.info.lease = std::chrono::duration_cast<std::chrono::milliseconds>(zk.session_timeout());
    };
    b.acquire = [&l, &zk, &o](clock::duration wait, bool tty) {
        return acquire_showing(l, o.kind == recipe::write, wait, zk, o, tty);
    };
    b.acquire_failed = [&o](const acquired& got) {
        std::string msg = got.ec == zkcoro::client_errc::auth_failed ? connect_failure(o, got.ec) : got.what;
        if (is_noauth(got.ec))
            msg += "; " + noauth_hint(o);
        return msg;
    };
    b.info.probe = [](zkcoro::guard& g) { return fenced_check(g); };
    b.info.lost_why = "the session may have expired, or the node was deleted";
    co_return co_await lock_run(b, o, inherited);
}

#ifdef ZKLOCK_REDIS
// zklock -c redis://... (or redis+sentinel://...): the same run on a Redis key (redis_mutex).
// Redis keeps no queue: there is no waiting line to show.
asio::awaitable<zkcoro::error_code> redis_ping(zkcoro::redis_client& rc)
{
    std::vector<std::string> args{"PING"};
    auto [ec, reply] = co_await rc.async_exec(std::move(args), asio::as_tuple(asio::use_awaitable));
    co_return ec;
}

// What `host:port` is in a redis:// URL (an IPv6 address in brackets).
std::string redis_hostport(const std::string& host, std::uint16_t port)
{
    return host.find(':') == std::string::npos ? fmt::format("{}:{}", host, port) : fmt::format("[{}]:{}", host, port);
}

// redis+sentinel://: the sentinels' down-after-milliseconds for the master (SENTINEL MASTER NAME,
// from the first sentinel that answers within 1 s in all); 0 if none tells.
asio::awaitable<long long> sentinels_down_after(const zkcoro::redis_url& url)
{
    auto ex = co_await asio::this_coro::executor;
    const auto until = clock::now() + 1s;
    for (const auto& s : url.sentinels) {
        if (clock::now() >= until)
            break;
        zkcoro::redis_options so;
        so.connect_timeout = 500ms;
        zkcoro::redis_client sc(ex, "redis://" + redis_hostport(s.host, s.port), so);
        asio::steady_timer bound(ex, until);
        std::vector<std::string> args{"SENTINEL", "MASTER", url.master_name};  // (not braced inside co_await: g++ 12)
        auto r = co_await (sc.async_exec(std::move(args), asio::as_tuple(asio::use_awaitable)) ||
                           bound.async_wait(asio::as_tuple(asio::use_awaitable)));
        sc.close();
        if (r.index() != 0)
            break;
        auto& [ec, reply] = std::get<0>(r);
        if (ec || reply.type != zkcoro::redis_reply::kind::array)
            continue;
        for (std::size_t i = 0; i + 1 < reply.elements.size(); i += 2)
            if (reply.elements[i].str == "down-after-milliseconds")
                co_return std::atoll(reply.elements[i + 1].str.c_str());
    }
    co_return 0;
}

asio::awaitable<zkcoro::error_code> redis_connect(zkcoro::redis_client& rc, const options& o)
{
    auto [ec] = co_await rc.async_connect(asio::as_tuple(asio::use_awaitable));
    if (ec || rc.url().sentinels.empty())
        co_return ec;
    // Issue 32 item 11: a failover takes at least down-after-milliseconds; a TTL shorter than that
    // loses the lock in every failover. Said once, on stderr.
    const auto down_after = co_await sentinels_down_after(rc.url());
    if (down_after > 0 && o.redis_ttl.count() < down_after)
        fmt::print(stderr,
                   "zklock: warning: the lock's TTL ({} ms, --ttl) is shorter than the sentinels' "
                   "down-after-milliseconds ({} ms) for master '{}': a failover takes at least that long, so "
                   "every failover loses the lock; the TTL must cover down-after-milliseconds, the election and "
                   "one renewal interval (a third of the TTL)\n",
                   o.redis_ttl.count(), down_after, escape(rc.url().master_name));
    co_return ec;
}

// How many replicas the master says are connected (ROLE); -1 if it does not tell within 1 s.
asio::awaitable<int> redis_connected_replicas(zkcoro::redis_client& rc)
{
    asio::steady_timer bound(co_await asio::this_coro::executor, 1s);
    std::vector<std::string> args{"ROLE"};
    auto r = co_await (rc.async_exec(std::move(args), asio::as_tuple(asio::use_awaitable)) ||
                       bound.async_wait(asio::as_tuple(asio::use_awaitable)));
    if (r.index() != 0)
        co_return -1;
    auto& [ec, reply] = std::get<0>(r);
    // ["master", offset, [[ip, port, offset], ...]]
    if (ec || reply.type != zkcoro::redis_reply::kind::array || reply.elements.size() < 3 ||
        reply.elements[0].str != "master")
        co_return -1;
    co_return static_cast<int>(reply.elements[2].elements.size());
}

// Why a Redis acquisition failed: the code's message and the server's own text. acquire()'s what()
// is "acquire KEY (redis lock)[: the server said: TEXT]: MESSAGE [zkcoro.redis:N]"; zklock's
// message names the key already.
std::string redis_refusal(const boost::system::system_error& e, const std::string& key)
{
    const std::string_view what = e.what();
    const std::string head = fmt::format("acquire {} (redis lock)", key);
    const std::string tail = ": " + e.code().what();
    if (!what.starts_with(head) || !what.ends_with(tail) || what.size() < head.size() + tail.size())
        return std::string(what);
    return e.code().message() + std::string(what.substr(head.size(), what.size() - head.size() - tail.size()));
}

asio::awaitable<acquired> redis_acquire(zkcoro::redis_mutex& m, zkcoro::redis_client& rc, clock::duration wait)
{
    acquired out;
    // The throwing form: its error carries the server's text (an ACL refusal, NOREPLICAS, ...).
    try {
        if (auto g = co_await m.acquire(wait))
            out.guards.push_back(std::move(*g));
    } catch (const boost::system::system_error& e) {
        out.ec = e.code();
        out.what = escape(redis_refusal(e, m.key()));  // the server's text may echo the key's bytes
    }
    // Replicas that did not confirm in time, or none to confirm (issue 32 item 11): ROLE tells.
    if (out.ec == zkcoro::redis_errc::not_replicated && co_await redis_connected_replicas(rc) == 0)
        out.what = fmt::format(
            "the lock's write was not confirmed by a replica: the master {} has no replica connected (ROLE "
            "lists none), and the grant waits for one (WAIT 1, the default with redis+sentinel://); after a "
            "failover the promoted replica has none until another re-attaches: given back",
            redis_hostport(rc.url().host, rc.url().port));
    co_return out;
}

asio::awaitable<int> redis_lock_main(zkcoro::redis_client& rc, const options& o, const std::set<int>& inherited)
{
    zkcoro::redis_mutex_options ro;
    ro.ttl = o.redis_ttl;
    zkcoro::redis_mutex m(rc, o.lock_path, ro);

    run_backend b;
    b.connect = [&rc, &o] { return redis_connect(rc, o); };
    b.connect_failed = [&rc, &o](const zkcoro::error_code& ec) {
        auto msg = fmt::format("cannot connect to Redis ({}): {}", o.connect_origin,
                               escape(rc.last_error().empty() ? ec.message() : rc.last_error()));
        return std::pair{msg, exit_for_connect(ec)};
    };
    b.connected = [&rc, &o] {
        // With Sentinel the URL names no server: the master the sentinels named is the client's.
        say(o, rc.url().sentinels.empty()
                   ? fmt::format("connected to Redis at {}", escape(rc.server()))
                   : fmt::format("connected to Redis master '{}' at {}, named by Sentinel", escape(rc.url().master_name),
                                 escape(rc.server())));
    };
    b.acquire = [&m, &rc](clock::duration wait, bool) { return redis_acquire(m, rc, wait); };
    b.acquire_failed = [](const acquired& got) { return got.what; };
    b.info.probe = [&rc](zkcoro::guard&) { return redis_ping(rc); };
    b.info.lease = o.redis_ttl;
    b.info.lost_why = "no renewal was confirmed within its TTL, or the key was deleted or taken over";
    b.info.redis = true;
    co_return co_await lock_run(b, o, inherited);
}
#endif

// The guardian's SIGKILL after zklock's death: within a third of the lease, so that it lands
// before the lease can end on the server (2/3 of it after our last heartbeat or renewal).
std::chrono::milliseconds guardian_kill_bound(std::chrono::milliseconds lease)
{
    return std::max<std::chrono::milliseconds>(1ms, lease / 3);
}

// After zklock was stopped: whether the lock is still ours. Asks the server (backend.probe),
// again after a failed attempt, until it answers or the lease is known lost; bounded by the lease.
asio::awaitable<bool> still_held(zkcoro::guard& g, const backend_info& backend, clock::duration stopped_for)
{
    // Redis: the probe proves only that the server answers; the key may have expired while we
    // were stopped if the stop outlasted what a renewal just before it could cover.
    if (backend.redis && stopped_for >= backend.lease * 2 / 3)
        co_return false;
    auto ex = co_await asio::this_coro::executor;
    const auto deadline = clock::now() + backend.lease;
    for (int attempt = 0; attempt < 1000 && clock::now() < deadline; ++attempt) {
        if (g.lost())
            co_return false;
        asio::steady_timer limit(ex, std::min<clock::time_point>(deadline, clock::now() + 2s));
        auto r = co_await (backend.probe(g) || limit.async_wait(asio::as_tuple(asio::use_awaitable)));
        if (r.index() == 0) {
            const auto ec = std::get<0>(r);
            if (!ec)
                co_return !g.lost();
            if (ec == zkcoro::client_errc::lock_lost || zkcoro::is_session_lost(ec))
                co_return false;
        }
        asio::steady_timer pause(ex, 100ms);
        co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    co_return false;
}

// Ctrl-Z (SIGTSTP), or a background zklock that touched the terminal (SIGTTIN, SIGTTOU): the
// whole job pauses, the command's tree first, then zklock. Once continued (fg, bg, SIGCONT),
// zklock checks the lock before the tree runs again. Returns false when the lock was lost: the
// tree is still stopped then, and the caller ends it.
asio::awaitable<bool> pause_whole(const options& o, process_tree& tree, zkcoro::guard& g,
                                  const backend_info& backend, int sig, bool was_lost)
{
    say(o, fmt::format("{}: stopping the command's process tree (group {}), then zklock", signal_name(sig),
                       tree.guardian));
    tree.signal(SIGSTOP);
    if (!tree.guardian_reaped)
        ::kill(tree.guardian, SIGCONT);  // the guardian stays awake: it must act if zklock dies
    const auto stopped_at = clock::now();
    ::raise(SIGSTOP);
    const auto stopped_for = clock::now() - stopped_at;
    say(o, fmt::format("continued after {:.1f} s: checking that the lock on {} is still held",
                       std::chrono::duration<double>(stopped_for).count(), escape(o.lock_path)));
    if (!was_lost && co_await still_held(g, backend, stopped_for)) {
        tree.signal(SIGCONT);
        co_return true;
    }
    if (!was_lost)
        fmt::print(stderr, "zklock: lock on {} lost while zklock was stopped ({}): {}\n", escape(o.lock_path),
                   backend.lost_why,
                   lost_signal(o) == 0 ? std::string("continuing the command (--on-lost ignore)")
                                       : std::string("killing the command's process tree (SIGKILL) before it runs "
                                                     "again"));
    co_return false;
}

// After the acquisition: when not acquired (timed out, would block), says so; else runs the
// command in its own process group, watches the lock, forwards signals, and releases.
asio::awaitable<int> run_holding(const options& o, const std::set<int>& inherited, std::shared_ptr<run_events> events,
                                 acquired got, const backend_info& backend)
{
    auto ex = co_await asio::this_coro::executor;
    if (got.guards.empty()) {
        if (o.nonblock)
            fmt::print(stderr, "zklock: {} is held by another process (--nonblock)\n", escape(o.lock_path));
        else
            fmt::print(stderr, "zklock: timed out after {} s waiting for {}\n", *o.timeout_s, escape(o.lock_path));
        co_return o.conflict_exit_code;
    }
    zkcoro::guard& g = got.guards.front();
    // A release is retried (through a failover) until the lease could have ended on its own.
    const auto release_limit = std::max<std::chrono::milliseconds>(3s, backend.lease);
    int early = 0;  // a signal that came as the lock was granted: still before the command
    for (const auto& e : events->queue)
        if (e.kind == event_kind::signal && early == 0)
            early = e.sig;
    if (early != 0) {
        say(o, fmt::format("{} as the lock was acquired: giving up", signal_name(early)));
        if (auto failed = co_await release_all(o, got.guards, release_limit); !failed.empty())
            fmt::print(stderr, "zklock: cannot release {}: {}\n", escape(o.lock_path), failed);
        co_return 128 + early;
    }
    say(o, fmt::format("acquired {} (node {}, fencing token {})", escape(o.lock_path), escape(g.node_path()),
                       g.fencing_token()));

    // 3. Run the command in the guardian's process group. SIGCHLD is watched before the fork so
    // that no exit is missed.
    const std::string cmd_name = escape(o.command[0]);
    if (!become_subreaper())
        say(o, fmt::format("cannot become a subreaper ({}): only the command itself is waited for",
                           std::strerror(errno)));
    process_tree tree;
    // Should zklock die (even of SIGKILL), the guardian's SIGKILL must come before the lease can end
    // on the server (2/3 of it after our last heartbeat or renewal, at the earliest), whatever
    // --kill-after says.
    tree.guardian = spawn_guardian(lost_signal(o), std::min(o.kill_after, guardian_kill_bound(backend.lease)));
    spawn_result child;
    if (tree.guardian > 0)
        child = spawn_command(o.command, command_environment(g), inherited, tree.guardian);
    else
        child = {-1, -tree.guardian};
    if (child.pid < 0) {
        fmt::print(stderr, "zklock: cannot start {}: {}\n", cmd_name, std::strerror(child.error));
        tree.end_guardian();
        if (auto failed = co_await release_all(o, got.guards, release_limit); !failed.empty())
            fmt::print(stderr, "zklock: cannot release {}: {}\n", escape(o.lock_path), failed);
        co_return exit_code::cannot_exec;
    }
    tree.command = child.pid;
    say(o, fmt::format("started {} (pid {}, process group {})", cmd_name, child.pid, tree.guardian));
    asio::co_spawn(ex, pump_lost(events, g), asio::detached);
    for (int sig : {SIGTSTP, SIGTTIN, SIGTTOU})
        events->stops.add(sig);
    asio::co_spawn(ex, pump_signals(events, &events->stops, event_kind::stop), asio::detached);
    if (o.revocable)
        asio::co_spawn(ex, pump_revoke(events, g), asio::detached);

    bool was_lost = false;
    bool killing = false;        // SIGKILL sent: send it to every descendant that shows up
    bool reported_stop = false;
    bool reported_leftovers = false;
    auto escalate_at = clock::time_point::max();
    int escalate_after = 0;  // the signal sent before the SIGKILL of --kill-after
    for (;;) {
        // (A SIGSTOP is zklock's own pause of the whole job, or someone's deliberate stop: not reported.)
        if (const int stop = tree.reap(); stop != 0 && stop != SIGSTOP && !reported_stop) {
            reported_stop = true;
            fmt::print(stderr,
                       "zklock: {} was stopped by {}{}; the lock stays held. A signal to zklock (Ctrl-C, "
                       "timeout(1), kill) is forwarded, followed by SIGCONT\n",
                       cmd_name, signal_name(stop),
                       stop == SIGTTIN || stop == SIGTTOU
                           ? " (it used the terminal, but runs in a process group of its own: give it no terminal "
                             "input, e.g. </dev/null)"
                           : "");
        }
        if (killing)
            tree.signal(SIGKILL);
        if (tree.done())
            break;
        if (tree.command_done && !reported_leftovers) {
            reported_leftovers = true;
            const auto left = tree.children();
            say(o, fmt::format("{} exited with {}; the lock stays held until the {} process(es) it left behind "
                               "exit (pid {})",
                               cmd_name, exit_code_of(tree.command_status), left.size(), fmt::join(left, ", ")));
        }
        if (events->queue.empty() && clock::now() < escalate_at) {
            events->wake.expires_at(escalate_at);
            co_await events->wake.async_wait(asio::as_tuple(asio::use_awaitable));  // expired, or a push
        }
        event ev{event_kind::escalate};
        if (!events->queue.empty()) {
            ev = events->queue.front();
            events->queue.pop_front();
        } else if (clock::now() < escalate_at) {
            continue;  // woken with nothing to do
        }
        if (ev.kind == event_kind::lost && was_lost)
            continue;
        if (ev.kind == event_kind::signal) {
            say(o, fmt::format("forwarding {} to the command's process tree (group {})", signal_name(ev.sig),
                               tree.guardian));
            tree.signal(ev.sig);
            if (tree.any_stopped())
                tree.signal(SIGCONT);  // a stopped process gets it only once continued
        } else if (ev.kind == event_kind::lost) {
            was_lost = true;
            const int sig = lost_signal(o);
            fmt::print(stderr, "zklock: lock on {} lost ({}): {}\n", escape(o.lock_path), backend.lost_why,
                       sig == 0 ? std::string("leaving the command running (--on-lost ignore)")
                                : fmt::format("sending {} to the command's process tree", signal_name(sig)));
            if (sig != 0) {
                tree.signal(sig);
                if (tree.any_stopped())
                    tree.signal(SIGCONT);
                if (sig == SIGKILL)
                    killing = true;
                else if (o.kill_after > std::chrono::milliseconds::zero())
                    escalate_at = clock::now() + o.kill_after;
                escalate_after = sig;
            }
        } else if (ev.kind == event_kind::revoke) {
            fmt::print(stderr, "zklock: revocation of {} requested: {}\n", escape(o.lock_path),
                       o.revoke_term ? "sending SIGTERM to the command's process tree; the lock is released when it "
                                       "has exited"
                                     : std::string_view("leaving the command running (--on-revoke ignore)"));
            if (o.revoke_term && !was_lost) {
                tree.signal(SIGTERM);
                if (tree.any_stopped())
                    tree.signal(SIGCONT);
                if (o.kill_after > std::chrono::milliseconds::zero())
                    escalate_at = clock::now() + o.kill_after;
                escalate_after = SIGTERM;
            }
        } else if (ev.kind == event_kind::stop) {
            if (!co_await pause_whole(o, tree, g, backend, ev.sig, was_lost)) {
                // Lost while stopped: the tree must not run again, not even to handle a SIGTERM.
                was_lost = true;
                if (lost_signal(o) != 0)
                    killing = true;
                else
                    tree.signal(SIGCONT);
            }
        } else if (ev.kind == event_kind::escalate) {
            escalate_at = clock::time_point::max();
            fmt::print(stderr, "zklock: the command's process tree still runs {} s after {}: sending SIGKILL (--kill-after)\n",
                       std::chrono::duration<double>(o.kill_after).count(), signal_name(escalate_after));
            killing = true;
        }
    }
    tree.end_guardian();
    events->stops.cancel();
    events->sigs.cancel();  // a signal from here on is queued, unhandled: the release and close are bounded
    if (child.error != 0) {
        fmt::print(stderr, "zklock: cannot run {}: {}\n", cmd_name, std::strerror(child.error));
        if (auto failed = co_await release_all(o, got.guards, release_limit); !failed.empty())
            fmt::print(stderr, "zklock: cannot release {}: {}\n", escape(o.lock_path), failed);
        co_return child.error == ENOENT ? exit_code::not_found : exit_code::cannot_exec;
    }
    const int child_rc = exit_code_of(tree.command_status);
    was_lost = was_lost || g.lost();
    say(o, fmt::format("{} exited with {}{}", cmd_name, child_rc, was_lost ? " after the lock was lost" : ""));

    // 4. Release: delete the node(s) now; the session close that follows would remove them too,
    // but a failed delete means something is wrong (permissions, the server) and is reported.
    const std::string failed = co_await release_all(o, got.guards, release_limit);
    was_lost = was_lost || g.lost();
    if (was_lost) {
        fmt::print(stderr, "zklock: exit {}: the lock on {} was lost while {} ran (its own status: {})\n",
                   o.lost_exit_code, escape(o.lock_path), cmd_name, child_rc);
        co_return o.lost_exit_code;
    }
    if (!failed.empty()) {
        fmt::print(stderr, "zklock: cannot release {}: {} ({} exited with {}; {})\n", escape(o.lock_path), failed,
                   cmd_name, child_rc,
                   backend.redis ? "the key expires within its TTL" : "closing the session removes the node");
        co_return exit_code::refused;
    }
    co_return child_rc;
}

}  // namespace

#ifdef ZKLOCK_REDIS
namespace {

int run_lock_redis(const options& o, const std::set<int>& inherited)
{
    asio::io_context ioc;
    zkcoro::redis_options ropts;
    ropts.connect_timeout = redis_connect_timeout(o);
    // Issue 39: -t bounds the whole wait, the first connection included: a server that is not up
    // yet, a failover under way (the sentinels still name the dead master) are waited for; -n
    // tries once. Without -t, as the library does by default: redis:// once, Sentinel 6 times
    // (about 3 s): a typing error in the port is not waited on for ever. Refused credentials, an
    // unknown master name, a bad URL fail at once.
    if (o.timeout_s && !o.nonblock)
        ropts.first_connect_wait =
            std::chrono::milliseconds(static_cast<long long>(std::min(*o.timeout_s, 86400.0) * 1000.0));
    if (o.nonblock)
        ropts.first_connect_wait = -1ms;  // one attempt, through Sentinel too
    ropts.reconnect_max = 1000ms;
    if (o.verbose)  // the library's lines (e.g. a release whose PUBLISH was refused), as on ZooKeeper
        ropts.log = [](zkcoro::log_level l, std::string_view m) {
            if (l <= zkcoro::log_level::info)  // error, warn, info: not debug
                fmt::print(stderr, "zklock: [{}] {}\n", zkcoro::to_string(l), escape(m));
        };
    zkcoro::redis_client rc(ioc.get_executor(), o.connect, ropts);
    int rc_exit = 1;
    bool done = false;
    asio::co_spawn(ioc, redis_lock_main(rc, o, inherited), [&](std::exception_ptr e, int r) {
        done = true;
        rc_exit = r;
        if (e) {
            std::string what;
            rc_exit = exit_for_exception(e, what);
            fmt::print(stderr, "zklock: error: {}\n", what);
        }
    });
    while (!done && ioc.run_one() > 0) {
    }
    // The close writes out what is queued (a cancelled acquisition's take-back of a key it may
    // have set) and ends the connection after the replies, 1 s at most: run until then (run_for
    // returns as soon as nothing is left to do).
    rc.close();
    ioc.restart();
    ioc.run_for(1500ms);
    std::fflush(stdout);
    std::fflush(stderr);
    return rc_exit;
}

}  // namespace
#endif

int run_lock(const options& o)
{
    // The signals zklock forwards and the SIGCHLD it reaps on must reach it, even if the caller
    // started it with them blocked (a blocked mask is inherited across exec).
    sigset_t ours;
    sigemptyset(&ours);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD})
        sigaddset(&ours, sig);
    ::sigprocmask(SIG_UNBLOCK, &ours, nullptr);
    const auto inherited = open_descriptors();
#ifdef ZKLOCK_REDIS
    if (is_redis_url(o.connect))
        return run_lock_redis(o, inherited);
#endif
    asio::io_context ioc;
    zkcoro::client zk(ioc.get_executor(), make_config(o));
    int rc = 1;
    bool done = false;
    asio::co_spawn(ioc, lock_main(zk, o, inherited), [&](std::exception_ptr e, int r) {
        done = true;
        rc = r;
        if (e) {
            std::string what;
            rc = exit_for_exception(e, what);
            fmt::print(stderr, "zklock: error: {}\n", what);
        }
    });
    while (!done && ioc.run_one() > 0) {
    }
    // End the session now (its nodes are already deleted, unless the release failed): bounded,
    // over a dead link the server expires it instead.
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
