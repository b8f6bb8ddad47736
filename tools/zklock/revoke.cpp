// `zklock revoke LOCKPATH [NODE]`: asks the holder of a lock (or the given node) to let go, by
// writing "__REVOKE__" into its node (Curator's Revoker.attemptRevoke). Only a holder that made
// its lock revocable reacts (zklock --revocable, zkcoro's mutex_options::revocable, Curator's
// makeRevocable); nothing is deleted.
#include "zklock.hpp"

#include <zkcoro/path.hpp>
#include <zkcoro/revocation.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

namespace zklock {

namespace {

void say(const options& o, std::string_view msg)
{
    if (o.verbose)
        fmt::print(stderr, "zklock: {}\n", msg);
}

asio::awaitable<int> revoke_main(zkcoro::client& zk, const options& o)
{
    auto [ec] = co_await zk.async_connect(asio::as_tuple(asio::use_awaitable));
    if (ec) {
        fmt::print(stderr, "zklock: {}\n", connect_failure(o, ec));
        const bool bad = ec == zkcoro::client_errc::invalid_connect_string || ec == zkcoro::client_errc::invalid_argument;
        co_return bad ? exit_code::usage : exit_code::unavailable;
    }
    std::string node;
    if (o.revoke_node.empty()) {
        queue_listing q;
        try {
            q = co_await list_queue_as(zk, o.lock_path, recipe::mutex);
        } catch (const boost::system::system_error& e) {
            std::string msg = fmt::format("zklock: revoke: listing {}: {}", escape(o.lock_path), escape(e.what()));
            if (is_noauth(e.code()))
                msg += "; " + noauth_hint(o);
            fmt::print(stderr, "{}\n", msg);
            co_return zkcoro::is_session_lost(e.code()) || zkcoro::is_retriable(e.code()) ? exit_code::unavailable
                                                                                           : exit_code::zk_error;
        }
        for (const auto& e : q.entries)
            if (e.holding.value_or(false)) {
                node = e.path;
                break;
            }
        if (node.empty()) {
            fmt::print(stderr, "zklock: revoke: nobody holds {}\n", escape(o.lock_path));
            co_return exit_code::tempfail;
        }
    } else {
        node = o.revoke_node.front() == '/' ? o.revoke_node : zkcoro::join_path(o.lock_path, o.revoke_node);
    }
    auto [rec] = co_await zkcoro::async_request_revoke(zk, node, asio::as_tuple(asio::use_awaitable));
    if (rec) {
        std::string msg = fmt::format("zklock: revoke {}: {}", escape(node), escape(rec.message()));
        if (is_noauth(rec))
            msg += "; " + noauth_hint(o);
        fmt::print(stderr, "{}\n", msg);
        co_return zkcoro::is_session_lost(rec) || zkcoro::is_retriable(rec) ? exit_code::unavailable : exit_code::zk_error;
    }
    fmt::print("{}\n", escape(node));
    say(o, fmt::format("asked {} to let go (a revocable holder releases; others ignore it)", escape(node)));
    co_return 0;
}

}  // namespace

int run_revoke(const options& o)
{
    return run_with_client(o, "revoke", [&o](zkcoro::client& zk) { return revoke_main(zk, o); });
}

}  // namespace zklock
