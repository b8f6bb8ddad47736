// Job control while the lock is held: Ctrl-Z (SIGTSTP), SIGTTIN and SIGTTOU stop the whole job,
// and once it is continued zklock asks the server whether the lock is still its own before the
// command's tree runs again.
#include "lock_backend.hpp"
#include "process_tree.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fmt/format.h>

#include <signal.h>

#include <algorithm>
#include <variant>

namespace zklock {

using namespace asio::experimental::awaitable_operators;
using namespace std::chrono_literals;

namespace {

// After zklock was stopped: whether the lock is still ours. Asks the server (backend.probe),
// again after a failed attempt, until it answers or the lease is known lost; bounded by the lease.
asio::awaitable<bool> still_held(zkcoro::guard& g, lock_backend& backend, clock::duration stopped_for)
{
    if (backend.lost_by_stop(stopped_for))
        co_return false;
    auto ex = co_await asio::this_coro::executor;
    const auto deadline = clock::now() + backend.lease();
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

}  // namespace

asio::awaitable<bool> pause_whole(const options& o, process_tree& tree, zkcoro::guard& g, lock_backend& backend,
                                  int sig, bool was_lost)
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
    bool held = false;
    if (!was_lost)
        held = co_await still_held(g, backend, stopped_for);
    if (held) {
        tree.signal(SIGCONT);
        co_return true;
    }
    if (!was_lost)
        tell("zklock: lock on {} lost while zklock was stopped ({}): {}\n", escape(o.lock_path),
                   backend.lost_why(),
                   lost_signal(o) == 0 ? std::string("continuing the command (--on-lost ignore)")
                                       : std::string("killing the command's process tree (SIGKILL) before it runs "
                                                     "again"));
    co_return false;
}

}  // namespace zklock
