// Shared pieces of the Redis edge tests (tests/redis/test_redis_*.cpp beside test_redis_lock.cpp):
// a server per program, unique keys, command arguments, pauses and bounded waits for a flag.
#pragma once

#include <zkcoro/redis_mutex.hpp>

#include "../integration/common.hpp"

#include <redis_server.hpp>

#include <boost/asio.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

namespace rt {

namespace asio = boost::asio;
using namespace std::chrono_literals;

inline zktest::redis_server& shared_redis()
{
    static zktest::redis_server server;
    return server;
}

// Lock options with this TTL.
inline zkcoro::redis_mutex_options ttl(std::chrono::milliseconds t)
{
    zkcoro::redis_mutex_options o;
    o.ttl = t;
    return o;
}

inline std::string unique_key(std::string_view name)
{
    static int n = 0;
    return fmt::format("e:{}:{}:{}", name, ::getpid(), ++n);
}

inline asio::awaitable<void> pause(std::chrono::steady_clock::duration d)
{
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    co_await t.async_wait(asio::use_awaitable);
}

// Command arguments. (g++ 12 rejects a braced list inside a co_await expression.)
template <class... A>
std::vector<std::string> cmd(A&&... a)
{
    return std::vector<std::string>{std::string(std::forward<A>(a))...};
}

// An event a test waits on with a bound: fire() sets it and wakes the waiter at once.
struct event {
    explicit event(const asio::any_io_executor& ex) : timer(ex) {}
    void fire()
    {
        set = true;
        timer.cancel();
    }
    // True if fired (now or within `limit`).
    asio::awaitable<bool> wait(std::chrono::steady_clock::duration limit)
    {
        auto until = std::chrono::steady_clock::now() + limit;
        while (!set && std::chrono::steady_clock::now() < until) {
            timer.expires_at(until);
            co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
        }
        co_return set;
    }
    bool set = false;
    asio::steady_timer timer;
};

}  // namespace rt
