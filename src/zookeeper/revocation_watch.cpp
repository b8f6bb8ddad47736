// The watch on a revocable node's data that turns Curator's "__REVOKE__" into a request.
#include "zookeeper/lock.hpp"

#include "async/coroutine.hpp"
#include "zookeeper/node_ops.hpp"

#include <zkcoro/detail/access.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include <fmt/format.h>

namespace zkcoro::detail {

namespace {

asio::awaitable<void> revocation_loop(client zk, std::string node, std::shared_ptr<revocation_state> rs)
{
    // Each round reads the data and waits for the next change; a failure to reach the server
    // waits for the connection (at most a minute) and counts: at most 20 of them.
    int failures = 0;
    while (!rs->ended() && failures < 20) {
        auto [ec, d] = co_await zk.async_get_data(node, leave_watch, use_tuple);
        if (ec == zk_errc::no_node || is_session_lost(ec))
            co_return;  // released or lost: nothing left to revoke
        if (ec) {
            ++failures;
            if (!is_retriable(ec))
                co_return;
            const bool connected =
                co_await wait_connected(zk, std::chrono::steady_clock::now() + std::chrono::minutes(1));
            if (!connected)
                co_return;
            continue;
        }
        if (d.data == revoke_message) {
            access::log(zk, log_level::info, fmt::format("lock {}: revocation requested", node));
            rs->request();
            co_return;
        }
        auto [wec, ev] = co_await d.watch.async_wait(use_tuple);
        if (wec || ev.type == watch_event_type::deleted)
            co_return;
    }
}

}  // namespace

void watch_revocation(const client& zk, std::string node, std::shared_ptr<revocation_state> rs)
{
    auto shared = access::share(zk);
    auto ex = shared.get_executor();
    asio::co_spawn(ex, revocation_loop(std::move(shared), std::move(node), std::move(rs)), asio::detached);
}

}  // namespace zkcoro::detail
