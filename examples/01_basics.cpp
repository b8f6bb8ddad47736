// 01_basics: connect, create a few nodes, list them, read one, delete them all.
#include "example.hpp"

#include <boost/asio/this_coro.hpp>

#include <fmt/format.h>

#include <unistd.h>

namespace asio = boost::asio;
using namespace zkcoro;

asio::awaitable<int> co_main(client_config cfg, int, char**)
{
    client zk(co_await asio::this_coro::executor, cfg);
    co_await zk.async_connect();
    fmt::print("connected to {} (session 0x{:x}, timeout {} ms)\n", zk.connected_server(), zk.session().id,
               zk.session_timeout().count());

    auto base = fmt::format("/zkcoro-example-{}", ::getpid());
    co_await zk.async_create(base, "example root", create_mode::persistent);
    fmt::print("created {}\n", base);
    for (int i = 0; i < 3; ++i) {
        auto r = co_await zk.async_create(base + "/item-", fmt::format("item {}", i), create_mode::ephemeral_sequential);
        fmt::print("created {} (czxid {})\n", r.path, r.stat.czxid);
    }

    auto children = co_await zk.async_get_children(base);
    std::sort(children.children.begin(), children.children.end());
    fmt::print("{} has {} children:\n", base, children.children.size());
    for (auto& name : children.children) {
        auto d = co_await zk.async_get_data(join_path(base, name));
        fmt::print("  {} = \"{}\"\n", name, d.data);
    }

    for (auto& name : children.children) {
        co_await zk.async_remove(join_path(base, name));
        fmt::print("deleted {}\n", join_path(base, name));
    }
    co_await zk.async_remove(base);
    fmt::print("deleted {}\n", base);
    co_await zk.async_close();
    co_return 0;
}
