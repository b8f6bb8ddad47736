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

// A lock node of a recipe that takes revocation requests: a mutex's ("lock-") or a read-write
// lock's ("__READ__", "__WRIT__") node, named by Curator's rule: the marker, then ZooKeeper's
// 10-digit sequence at the end (after a protected prefix "_c_<uuid>-", or none).
bool is_lock_node_name(std::string_view name)
{
    if (name.size() < 10)
        return false;
    const auto seq = name.substr(name.size() - 10);
    if (seq.find_first_not_of("0123456789") != std::string_view::npos)
        return false;
    const auto head = name.substr(0, name.size() - 10);
    return head.ends_with("lock-") || head.ends_with("__READ__") || head.ends_with("__WRIT__");
}

asio::awaitable<int> revoke_main(zkcoro::client& zk, const options& o)
{
    auto [ec] = co_await zk.async_connect(asio::as_tuple(asio::use_awaitable));
    if (ec) {
        tell("zklock: {}\n", connect_failure(o, ec));
        co_return exit_for_connect(ec);
    }
    std::string node;
    if (o.revoke_node.empty()) {
        queue_listing q;
        try {
            q = co_await list_queue(zk, o.lock_path);
        } catch (const boost::system::system_error& e) {
            // list_queue's own error names the listing already ("listing PATH: ..."): once is enough.
            const std::string listing = "listing " + o.lock_path;
            const std::string what = e.what();
            std::string msg = fmt::format("zklock: revoke: {}", escape(what.starts_with(listing) ? what : listing + ": " + what));
            if (is_noauth(e.code()))
                msg += "; " + noauth_hint(o);
            tell("{}\n", msg);
            co_return exit_for_error(e.code());
        }
        for (const auto& e : q.entries)
            if (e.holding.value_or(false)) {
                node = e.path;
                break;
            }
        if (node.empty()) {
            tell("zklock: revoke: nobody holds {}{}\n", escape(o.lock_path),
                       q.recipe.find("semaphore") != std::string::npos
                           ? " as a mutex or read-write lock (a semaphore takes no revocation requests)"
                           : "");
            co_return exit_code::tempfail;
        }
    } else {
        node = o.revoke_node.front() == '/' ? o.revoke_node : zkcoro::join_path(o.lock_path, o.revoke_node);
    }
    // Only a lock node directly under LOCKPATH is written to: anything else (LOCKPATH itself,
    // another path, a node of no recipe) is refused before anything is sent.
    const auto slash = node.rfind('/');
    const std::string parent = slash == 0 ? std::string("/") : node.substr(0, slash);
    const std::string name = node.substr(slash + 1);
    if (parent != o.lock_path || !is_lock_node_name(name)) {
        tell(
                   "zklock: revoke: {} is not a lock node directly under {} (a mutex's or read-write lock's node, "
                   "named ...lock-, ...__READ__ or ...__WRIT__ and a 10-digit sequence); nothing was written\n",
                   escape(node), escape(o.lock_path));
        co_return exit_code::usage;
    }
    // It must exist, and be ephemeral (a holder's or waiter's node, not a persistent one).
    auto [xec, x] = co_await zk.async_exists(node, asio::as_tuple(asio::use_awaitable));
    if (!xec && !x.stat) {
        tell("zklock: revoke: no such node: {} (its holder may have released it)\n", escape(node));
        co_return exit_code::tempfail;
    }
    if (!xec && x.stat->ephemeral_owner == 0) {
        tell("zklock: revoke: {} is not a lock node (it is persistent: no session holds it); nothing "
                           "was written\n",
                   escape(node));
        co_return exit_code::usage;
    }
    // Written only if it is still the node just checked (a lock node's name is never reused,
    // but its version tells that nothing replaced it meanwhile).
    zkcoro::error_code rec = xec;
    if (!rec) {
        auto [sec, st] = co_await zk.async_set_data(node, zkcoro::revoke_message, x.stat->version,
                                                    asio::as_tuple(asio::use_awaitable));
        rec = sec;
        if (rec == zkcoro::zk_errc::no_node) {
            tell("zklock: revoke: no such node: {} (its holder released it just now)\n", escape(node));
            co_return exit_code::tempfail;
        }
        if (rec == zkcoro::zk_errc::bad_version) {
            tell("zklock: revoke: {} changed as it was asked (a revocation request from elsewhere?); "
                               "run again to ask again\n",
                       escape(node));
            co_return exit_code::tempfail;
        }
    }
    if (rec) {
        std::string msg = fmt::format("zklock: revoke {}: {}", escape(node), escape(rec.message()));
        if (is_noauth(rec))
            msg += "; " + noauth_hint(o);
        tell("{}\n", msg);
        co_return exit_for_error(rec);
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
