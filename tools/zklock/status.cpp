// `zklock status` (one lock path's queue; with -r, tree.cpp) and the client run that the
// subcommands needing a request or a few share (status, revoke).
#include "zklock.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <string>
#include <string_view>

namespace zklock {

namespace {

// -v: the ZooKeeper servers the client uses, which are the ensemble's members once it has been
// reconfigured (client_config::follow_ensemble; read at the connection, before the listing's reply).
void show_servers(const zkcoro::client& zk, const options& o)
{
    if (!o.verbose)
        return;
    std::string list;
    for (const auto& s : zk.servers())
        list += (list.empty() ? "" : ",") + s;
    const auto changes = zk.stats().ensemble_changes;
    tell("zklock: ZooKeeper servers in use: {}{}\n", escape(list),
               changes ? fmt::format(" (the ensemble's members, read from its configuration)") : std::string());
}

asio::awaitable<int> status_main(zkcoro::client& zk, const options& o)
{
    auto [ec] = co_await zk.async_connect(asio::as_tuple(asio::use_awaitable));
    if (ec) {
        tell("zklock: {}\n", connect_failure(o, ec));
        co_return exit_for_connect(ec);
    }
    if (o.recursive) {
        const int rc = co_await tree_status(zk, o);
        show_servers(zk, o);
        co_return rc;
    }
    queue_listing q;
    try {
        q = co_await list_queue(zk, o.lock_path);
    } catch (const boost::system::system_error& e) {
        std::string msg = fmt::format("zklock: status of {}: {}", escape(o.lock_path), escape(e.what()));
        if (is_noauth(e.code()))
            msg += "; " + noauth_hint(o);
        tell("{}\n", msg);
        co_return exit_for_error(e.code());
    }
    std::string out = o.json ? render_json(q) : render_text(q);
    std::fwrite(out.data(), 1, out.size(), stdout);
    show_servers(zk, o);
    co_return 0;
}

}  // namespace

int run_with_client(const options& o, std::string_view what,
                    const std::function<asio::awaitable<int>(zkcoro::client&)>& body)
{
    asio::io_context ioc;
    zkcoro::client zk(ioc.get_executor(), make_config(o));
    int rc = 1;
    bool done = false;
    asio::co_spawn(ioc, body(zk), [&](std::exception_ptr e, int r) {
        done = true;
        rc = r;
        if (e) {
            std::string text;
            rc = exit_for_exception(e, text);
            tell("zklock: {} {}: {}\n", what, escape(o.lock_path), escape(text));
        }
    });
    while (!done && ioc.run_one() > 0) {
    }
    bool closed = false;
    zk.async_close([&](zkcoro::error_code) { closed = true; });
    ioc.restart();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (!closed && ioc.run_one_until(deadline) > 0) {
    }
    std::fflush(stdout);
    if (!closed)
        std::_Exit(rc);
    return rc;
}

int run_status(const options& o)
{
#ifdef ZKLOCK_REDIS
    if (is_redis_url(o.connect))
        return run_redis_status(o);
#endif
    return run_with_client(o, "status of", [&o](zkcoro::client& zk) { return status_main(zk, o); });
}

}  // namespace zklock
