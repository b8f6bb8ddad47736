// 02_mutex_demo: the classic. 100 tasks (coroutines) of one process share one ZooKeeper lock and
// one counter. Each task takes the lock, checks that nobody else is inside, decrements the counter
// from 100, yields inside the critical section (so a broken lock would show as an overlap), and
// releases. The output counts down 100 -> 1 with no gap and no repeat; the last line says what was
// verified and how long it took.
#include "example.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fmt/format.h>

#include <unistd.h>

#include <chrono>
#include <cstdint>

namespace asio = boost::asio;
using namespace std::chrono_literals;

asio::awaitable<int> co_main(zkcoro::client_config cfg, int, char**)
{
    constexpr int tasks = 100;
    auto ex = co_await asio::this_coro::executor;
    const auto path = fmt::format("/zkcoro-demo/counter-{}", ::getpid());
    fmt::print("zkcoro demo: {} tasks in one process take one ZooKeeper lock ({} on {}).\n", tasks, path,
               cfg.connect_string);
    fmt::print("Each decrements a shared counter inside the lock: it must count down {} -> 1,\n", tasks);
    fmt::print("with no two tasks inside at once and fencing tokens that only grow.\n\n");

    zkcoro::client zk(ex, cfg);
    co_await zk.async_connect();
    zkcoro::mutex lock(zk, path);

    int counter = tasks, next_expected = tasks, finished = 0, inside = 0, overlaps = 0, timeouts = 0;
    bool in_order = true, tokens_grow = true;
    std::int64_t last_token = 0;
    asio::steady_timer all_done(ex, std::chrono::steady_clock::time_point::max());
    const auto start = std::chrono::steady_clock::now();
    for (int task = 0; task < tasks; ++task)
        asio::co_spawn(ex, [&, task]() -> asio::awaitable<void> {
            if (auto g = co_await lock.acquire(30s)) {
                overlaps += ++inside > 1;
                tokens_grow = tokens_grow && g->fencing_token() > last_token;
                last_token = g->fencing_token();
                const int seen = counter;
                in_order = in_order && seen == next_expected--;
                fmt::print("task {:3}: counter {:3} (fencing token {})\n", task, seen, g->fencing_token());
                // Read, let the other tasks run while we hold, then write: without mutual
                // exclusion updates would be lost and the countdown would repeat values.
                co_await asio::post(ex, asio::use_awaitable);
                counter = seen - 1;
                --inside;
                co_await g->release();
            } else {
                ++timeouts;
                fmt::print("task {:3}: timed out\n", task);
            }
            if (++finished == tasks)
                all_done.cancel();
        }, asio::detached);

    // Bounded: the tasks' own 30 s timeouts end them all well before this.
    all_done.expires_after(60s);
    co_await all_done.async_wait(asio::as_tuple(asio::use_awaitable));
    const auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const bool ok = finished == tasks && timeouts == 0 && counter == 0 && in_order && overlaps == 0 && tokens_grow;
    co_await zk.async_close();
    if (ok)
        fmt::print("\nverified: {} tasks held the lock one at a time (0 overlaps), the counter went {} -> 0 "
                   "in order, fencing tokens grew; {} acquisitions in {:.3f} s ({:.0f} per second)\n",
                   tasks, tasks, finished, secs, finished / secs);
    else
        fmt::print("\nFAILED after {:.3f} s: {} of {} tasks finished, {} timed out, {} overlaps, counter ended at {}, "
                   "in order: {}, tokens grew: {}\n",
                   secs, finished, tasks, timeouts, overlaps, counter, in_order, tokens_grow);
    co_return ok ? 0 : 1;
}
