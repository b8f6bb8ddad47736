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
#include <cstdint>
#include <cstdlib>
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

// The integer reply of a command to `srv` (redis-cli's text).
inline std::int64_t count_of(const zktest::redis_server& srv, std::vector<std::string> args)
{
    return std::atoll(srv.command(args).c_str());
}

// Milliseconds since t0.
inline std::int64_t ms_since(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
}

// The connections `srv` has accepted since it started (INFO stats).
inline std::int64_t connections_received(const zktest::redis_server& srv)
{
    return std::stoll(srv.info("stats").at("total_connections_received"));
}

}  // namespace rt
