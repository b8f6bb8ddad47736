// The ZooKeeper backend of a run (lock_backend.hpp): a mutex, a read-write lock's side or a
// semaphore's lease on LOCKPATH; the acquisition shows the queue while it waits (the waiting line);
// the still-held check is a transaction fenced by the lock node; the lease is the session's.
#include "lock_backend.hpp"

#include <zkcoro/holder_data.hpp>
#include <zkcoro/mutex.hpp>
#include <zkcoro/semaphore.hpp>
#include <zkcoro/shared_mutex.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <variant>

namespace zklock {

using namespace asio::experimental::awaitable_operators;
using namespace std::chrono_literals;

namespace {

// Every wait below completes normally (no exception) except when cancelled: the `||` operator
// waits for the first *successful* completion.

// The lock objects of one run: exactly one is set.
struct locks {
    std::unique_ptr<zkcoro::mutex> mtx;
    std::unique_ptr<zkcoro::shared_mutex> rw;
    std::unique_ptr<zkcoro::semaphore> sem;
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
            tell("\r\033[K{}", line);
            std::fflush(stderr);
        } else if (ageless != last) {
            tell("zklock: {}\n", line);
            last = std::move(ageless);
        }
        t.expires_after(500ms);
        co_await t.async_wait(asio::use_awaitable);
    }
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
        tell("zklock: cannot write {}: {}\n", escape(o.session_file), std::strerror(errno));
        return;
    }
    fmt::print(f, "{} {}\n", session_hex(s.id), pw);
    std::fclose(f);
}

// Succeeds only while g's lock node exists: a transaction of one check on it.
asio::awaitable<zkcoro::error_code> fenced_check(zkcoro::guard& g)
{
    auto [ec, results] = co_await g.async_multi({}, asio::as_tuple(asio::use_awaitable));
    co_return ec;
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

class zookeeper_backend final : public lock_backend {
public:
    zookeeper_backend(asio::io_context& ioc, const options& o) : lock_backend(o), zk_(ioc.get_executor(), make_config(o))
    {
    }

    void make_lock() override
    {
        const options& o = o_;
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
        if (o.kind == recipe::semaphore)
            locks_.sem = std::make_unique<zkcoro::semaphore>(zk_, o.lock_path, o.semaphore_leases, mo);
        else if (o.kind == recipe::read || o.kind == recipe::write)
            locks_.rw = std::make_unique<zkcoro::shared_mutex>(zk_, o.lock_path, mo);
        else
            locks_.mtx = std::make_unique<zkcoro::mutex>(zk_, o.lock_path, mo);
    }

    asio::awaitable<zkcoro::error_code> connect() override
    {
        auto [ec] = co_await zk_.async_connect(asio::as_tuple(asio::use_awaitable));
        co_return ec;
    }

    std::string connect_failure(const zkcoro::error_code& ec) const override { return zklock::connect_failure(o_, ec); }

    void connected() override
    {
        say(o_, fmt::format("connected to {} (session {}, timeout {} ms)", zk_.connected_server(),
                            session_hex(zk_.session().id), zk_.session_timeout().count()));
        write_session_file(o_, zk_.session());
        // The lease is the negotiated session timeout.
        lease_ = std::chrono::duration_cast<std::chrono::milliseconds>(zk_.session_timeout());
    }

    asio::awaitable<acquired> acquire(clock::duration wait, bool tty) override
    {
        return acquire_showing(locks_, o_.kind == recipe::write, wait, zk_, o_, tty);
    }

    std::string acquire_failure(const acquired& got) const override
    {
        std::string msg = got.ec == zkcoro::client_errc::auth_failed ? zklock::connect_failure(o_, got.ec) : got.what;
        if (auto hint = refusal_hint(got.ec); !hint.empty())
            msg += "; " + hint;
        return msg;
    }

    asio::awaitable<zkcoro::error_code> probe(zkcoro::guard& g) override { return fenced_check(g); }
    bool lost_by_stop(clock::duration) const override { return false; }
    std::chrono::milliseconds lease() const override { return lease_; }
    std::string_view lost_why() const override { return "the session may have expired, or the node was deleted"; }
    std::string_view unreleased() const override { return "closing the session removes the node"; }

    bool close(asio::io_context& ioc) override
    {
        locks_ = locks{};  // a node that lingers goes with its mutex
        // End the session now (its nodes are already deleted, unless the release failed): bounded,
        // over a dead link the server expires it instead.
        bool closed = false;
        zk_.async_close([&](zkcoro::error_code) { closed = true; });
        ioc.restart();
        const auto deadline = clock::now() + 3s;
        while (!closed && ioc.run_one_until(deadline) > 0) {
        }
        return closed;
    }

private:
    std::string refusal_hint(const zkcoro::error_code& ec) const override
    {
        return is_noauth(ec) ? noauth_hint(o_) : std::string();
    }

    zkcoro::client zk_;
    locks locks_;
    std::chrono::milliseconds lease_{};
};

}  // namespace

std::unique_ptr<lock_backend> make_zookeeper_backend(asio::io_context& ioc, const options& o)
{
    return std::make_unique<zookeeper_backend>(ioc, o);
}

}  // namespace zklock
