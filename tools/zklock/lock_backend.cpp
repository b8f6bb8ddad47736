// What both backends share of a run: the release (through zkcoro::guard, a node's delete or a
// key's compare-and-delete) and the command's environment.
#include "lock_backend.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fmt/format.h>

#include <memory>
#include <optional>

extern char** environ;

namespace zklock {

namespace {

// One release: the delete runs on its own and a timer bounds the wait (not `release || timer`,
// which would wait for the delete to honour the cancellation).
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

}  // namespace

// `limit` bounds each delete: through a failover the delete is retried until the session could
// have expired (then the server removes the node with it).
asio::awaitable<std::string> lock_backend::release_all(std::vector<zkcoro::guard>& guards,
                                                       std::chrono::milliseconds limit)
{
    const options& o = o_;
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
            if (auto hint = refusal_hint(ec); !hint.empty())
                failed += "; " + hint;
        } else if (lost) {
            say(o, fmt::format("the lock on {} was lost: nothing left to release ({} is gone, or deleted now)",
                               escape(o.lock_path), escape(node)));
        } else {
            say(o, fmt::format("released {} (deleted {})", escape(o.lock_path), escape(node)));
        }
    }
    co_return failed;
}

std::vector<std::string> lock_backend::command_environment(const zkcoro::guard& g) const
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

}  // namespace zklock
