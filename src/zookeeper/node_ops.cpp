#include "zookeeper/node_ops.hpp"

#include "async/coroutine.hpp"

#include <zkcoro/detail/access.hpp>
#include <zkcoro/path.hpp>

#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fmt/format.h>

#include <vector>

namespace zkcoro::detail {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

asio::awaitable<bool> wait_connected(client& zk, steady_time deadline)
{
    auto ex = co_await asio::this_coro::executor;
    // No cap on the rounds: each one waits for a state change or the deadline.
    for (;;) {
        auto s = zk.state();
        if (s == session_state::connected)
            co_return true;
        if (s == session_state::closed || clock::now() >= deadline)
            co_return false;
        asio::steady_timer t(ex, deadline);
        co_await asio::experimental::make_parallel_group(zk.async_wait_state(s, asio::deferred), t.async_wait(asio::deferred))
            .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
        const bool stop = co_await cancelled();
        if (stop)
            co_return false;
    }
}

error_code not_connected(const client& zk, steady_time deadline, error_code otherwise)
{
    if (clock::now() >= deadline)
        return {};
    return zk.state() == session_state::closed ? access::closed_reason(zk) : otherwise;
}

asio::awaitable<error_code> guaranteed_delete(client zk, std::string node)
{
    error_code last;
    for (int attempt = 0; attempt < 100; ++attempt) {
        auto [ec] = co_await zk.async_remove(node, -1, use_tuple);
        if (!ec || ec == zk_errc::no_node || is_session_lost(ec))
            co_return error_code{};
        if (!is_retriable(ec))
            co_return ec;
        last = ec;
        const bool connected = co_await wait_connected(zk, clock::now() + 60s);
        if (!connected)
            co_return zk.state() == session_state::closed ? error_code{} : ec;
    }
    co_return last;
}

asio::awaitable<std::tuple<error_code, std::string, node_stat>> find_protected(client& zk, const std::string& parent,
                                                                                const std::string& prefix)
{
    using result = std::tuple<error_code, std::string, node_stat>;
    auto [ec, ch] = co_await zk.async_get_children(parent, use_tuple);
    if (ec == zk_errc::no_node)
        co_return result{};
    if (ec)
        co_return result{ec, {}, {}};
    for (auto& name : ch.children) {
        if (name.rfind(prefix, 0) != 0)
            continue;
        auto path = join_path(parent, name);
        auto [ec2, ex] = co_await zk.async_exists(path, use_tuple);
        if (ec2)
            co_return result{ec2, {}, {}};
        if (!ex.stat)
            break;
        if (ex.stat->ephemeral_owner != zk.session().id) {
            co_await guaranteed_delete(access::share(zk), path);
            break;
        }
        co_return result{error_code{}, path, *ex.stat};
    }
    co_return result{};
}

namespace {

// Deletes the parents an acquisition created, deepest first, while they are empty.
asio::awaitable<void> remove_created(client& zk, const std::vector<std::string>& created)
{
    for (auto it = created.rbegin(); it != created.rend(); ++it) {
        auto [ec] = co_await zk.async_remove(*it, -1, use_tuple);
        if (ec == zk_errc::not_empty)
            co_return;  // someone else's node is below: this one and those above stay
        if (ec && ec != zk_errc::no_node) {
            access::log(zk, log_level::warn,
                        fmt::format("lock path {}, created by an acquisition that failed, could not be deleted: {}",
                                    *it, ec.message()));
            co_return;
        }
    }
}

// The node of an unfinished acquisition (see abandon_node).
asio::awaitable<void> abandon_own_node(client& zk, const std::string& parent, const std::string& prefix, std::string node)
{
    if (node.empty()) {
        // A find before the create's reply would miss it: the client layer deletes an abandoned
        // create's node itself when the reply comes. The node found is the one deleted: a second
        // look-up after it could meet a lost connection and leave the node for the session's life
        // (found by the simulation, tests/sim/test_sim_recipes.cpp, multi-lock seed 3).
        error_code last;
        for (int attempt = 0; attempt < 20; ++attempt) {
            auto [ec, path, st] = co_await find_protected(zk, parent, prefix);
            last = ec;
            node = path;
            if (!ec || !is_retriable(ec))
                break;
            const bool connected = co_await wait_connected(zk, clock::now() + 60s);
            if (!connected)
                break;
        }
        if (last) {
            // The client's own close() is no failure: one line per unfinished acquisition at debug
            // level (closing a client with many waiters is no news), as the Redis lock does.
            const bool closing = last == client_errc::closed || zk.state() == session_state::closed;
            access::log(zk, closing ? log_level::debug : log_level::error,
                        fmt::format("lock {}: could not look for the node of an unfinished acquisition ({}*): {}; "
                                    "if it was made, it goes with its session",
                                    parent, prefix, last.message()));
            co_return;
        }
    }
    if (!node.empty())
        co_await delete_or_log(access::share(zk), std::move(node), "the lock node of an unfinished acquisition");
}

}  // namespace

asio::awaitable<void> abandon_node(client zk, std::string parent, std::string prefix, std::string node,
                                   std::vector<std::string> created)
{
    co_await abandon_own_node(zk, parent, prefix, std::move(node));
    co_await remove_created(zk, created);
}

asio::awaitable<void> delete_or_log(client zk, std::string node, std::string what)
{
    if (auto ec = co_await guaranteed_delete(access::share(zk), node))
        access::log(zk, log_level::error,
                    fmt::format("{} {} could not be deleted: {}; it goes with its session", what, node, ec.message()));
}

asio::awaitable<error_code> ensure_path(client& zk, const std::string& path, std::vector<std::string>* created)
{
    std::vector<std::string> chain;
    for (std::string p = path; p != "/"; p = std::string(parent_path(p)))
        chain.push_back(p);
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
        auto [ec, r] = co_await zk.async_create(*it, "", create_mode::container, use_tuple);
        // A create given up on (cancelled, or its reply lost) may still have happened: counted as
        // ours, since a later delete in this session runs after it on the server.
        const bool maybe = ec == asio::error::operation_aborted || is_retriable(ec);
        if (created != nullptr && (!ec || maybe))
            created->push_back(*it);
        if (ec && ec != zk_errc::node_exists)
            co_return ec;
    }
    co_return error_code{};
}

}  // namespace zkcoro::detail
