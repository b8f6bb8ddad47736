// 02_mutex_demo: the classic. 100 coroutines on one client each take the distributed lock,
// decrement a shared counter from 100, print it, and release. The output counts down with no
// gap and no repeat; a final line checks it and reports the throughput.
#include "example.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fmt/format.h>

#include <unistd.h>

#include <chrono>

namespace asio = boost::asio;
using namespace std::chrono_literals;

asio::awaitable<int> co_main(zkcoro::client_config cfg, int, char**)
{
    auto ex = co_await asio::this_coro::executor;
    zkcoro::client zk(ex, cfg);
    co_await zk.async_connect();
    zkcoro::mutex lock(zk, fmt::format("/zkcoro-demo/counter-{}", ::getpid()));

    int counter = 100, expected = 100, finished = 0;
    bool in_order = true;
    auto start = std::chrono::steady_clock::now();
    for (int task = 0; task < 100; ++task)
        asio::co_spawn(ex, [&, task]() -> asio::awaitable<void> {
            auto g = co_await lock.acquire(30s);
            if (!g) {
                fmt::print("task {:3}: timed out\n", task);
                co_return;
            }
            in_order = in_order && counter == expected;
            fmt::print("task {:3}: counter {:3} (fencing token {})\n", task, counter, g->fencing_token());
            --counter;
            --expected;
            co_await g->release();
            ++finished;
        }, asio::detached);

    asio::steady_timer poll(ex);
    for (int i = 0; i < 6000 && finished < 100; ++i) {
        poll.expires_after(10ms);
        co_await poll.async_wait(asio::use_awaitable);
    }
    auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    bool ok = finished == 100 && counter == 0 && in_order;
    fmt::print("{}: {} acquisitions in {:.3f} s ({:.0f} per second), counter ended at {}\n",
               ok ? "ok" : "FAILED", finished, secs, finished / secs, counter);
    co_await zk.async_close();
    co_return ok ? 0 : 1;
}
