// 04_read_write: a shared configuration guarded by a read-write lock. Four readers read it
// together; a writer updates it alone; then the writer downgrades to keep reading what it wrote.
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
    zkcoro::shared_mutex rw(zk, fmt::format("/zkcoro-demo/config-{}", ::getpid()));
    int version = 1, readers_inside = 0, max_readers = 0, done = 0;

    for (int r = 0; r < 4; ++r)
        asio::co_spawn(ex, [&, r]() -> asio::awaitable<void> {
            auto g = co_await rw.acquire_read();
            max_readers = std::max(max_readers, ++readers_inside);
            fmt::print("reader {} sees version {} ({} readers inside)\n", r, version, readers_inside);
            asio::steady_timer t(ex, 50ms);
            co_await t.async_wait(asio::use_awaitable);
            --readers_inside;
            co_await g.release();
            ++done;
        }, asio::detached);

    // Let the readers in first (bounded wait), then ask for the write lock: it waits for them.
    asio::steady_timer poll(ex);
    for (int i = 0; i < 1000 && max_readers == 0; ++i) {
        poll.expires_after(5ms);
        co_await poll.async_wait(asio::use_awaitable);
    }
    auto w = co_await rw.acquire_write();
    bool alone = readers_inside == 0;
    version = 2;
    fmt::print("writer alone: {}, wrote version {}\n", alone, version);
    auto r = co_await rw.acquire_read();  // downgrade: granted at once
    co_await w.release();
    fmt::print("writer downgraded, still reading version {}\n", version);
    co_await r.release();
    for (int i = 0; i < 2000 && done < 4; ++i) {
        poll.expires_after(5ms);
        co_await poll.async_wait(asio::use_awaitable);
    }
    co_await zk.async_close();
    bool ok = alone && max_readers >= 2 && done == 4;
    fmt::print("{}: readers shared the lock ({} at once), the writer was alone\n", ok ? "ok" : "FAILED", max_readers);
    co_return ok ? 0 : 1;
}
