// 06_multi_lock: a transfer between two accounts locks both, all or nothing. Two transfers in
// opposite directions run at once and cannot deadlock: locks are taken in path order.
#include "example.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fmt/format.h>

#include <unistd.h>

namespace asio = boost::asio;
using namespace std::chrono_literals;

asio::awaitable<int> co_main(zkcoro::client_config cfg, int, char**)
{
    auto ex = co_await asio::this_coro::executor;
    zkcoro::client zk(ex, cfg);
    co_await zk.async_connect();
    auto base = fmt::format("/zkcoro-demo/accounts-{}", ::getpid());
    zkcoro::mutex alice(zk, base + "/alice"), bob(zk, base + "/bob");
    int balance_alice = 100, balance_bob = 100, done = 0;
    auto transfer = [&](zkcoro::mutex& from, zkcoro::mutex& to, int& src, int& dst, int amount,
                        const char* what) -> asio::awaitable<void> {
        zkcoro::multi_lock both({from, to});
        for (int i = 0; i < 5; ++i) {
            auto g = co_await both.acquire(10s);
            if (!g)
                co_return;
            src -= amount;
            dst += amount;
            fmt::print("{}: {} (alice {}, bob {})\n", what, amount, balance_alice, balance_bob);
            co_await g->release();
        }
        ++done;
    };
    asio::co_spawn(ex, transfer(alice, bob, balance_alice, balance_bob, 10, "alice -> bob"), asio::detached);
    asio::co_spawn(ex, transfer(bob, alice, balance_bob, balance_alice, 7, "bob -> alice"), asio::detached);
    asio::steady_timer poll(ex);
    for (int i = 0; i < 3000 && done < 2; ++i) {
        poll.expires_after(10ms);
        co_await poll.async_wait(asio::use_awaitable);
    }
    co_await zk.async_close();
    bool ok = done == 2 && balance_alice + balance_bob == 200;
    fmt::print("{}: both transfers done, total {}\n", ok ? "ok" : "FAILED", balance_alice + balance_bob);
    co_return ok ? 0 : 1;
}
