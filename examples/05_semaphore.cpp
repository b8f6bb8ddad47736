// 05_semaphore: ten jobs share three licences. A counting semaphore (Curator's
// InterProcessSemaphoreV2 layout) lets at most three run at once, across every process that
// uses the same path and the same limit.
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
    zkcoro::semaphore licences(zk, fmt::format("/zkcoro-demo/licences-{}", ::getpid()), 3);
    int running = 0, max_running = 0, done = 0;
    for (int job = 0; job < 10; ++job)
        asio::co_spawn(ex, [&, job]() -> asio::awaitable<void> {
            auto lease = co_await licences.acquire(1);
            max_running = std::max(max_running, ++running);
            fmt::print("job {} runs ({} running)\n", job, running);
            asio::steady_timer t(ex, 30ms);
            co_await t.async_wait(asio::use_awaitable);
            --running;
            co_await lease.front().release();
            ++done;
        }, asio::detached);
    asio::steady_timer poll(ex);
    for (int i = 0; i < 3000 && done < 10; ++i) {
        poll.expires_after(10ms);
        co_await poll.async_wait(asio::use_awaitable);
    }
    co_await zk.async_close();
    bool ok = done == 10 && max_running <= 3 && max_running >= 2;
    fmt::print("{}: 10 jobs done, at most {} at once (limit 3)\n", ok ? "ok" : "FAILED", max_running);
    co_return ok ? 0 : 1;
}
