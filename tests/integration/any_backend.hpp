// One function template over basic_mutex<Backend>&, run on zkcoro::mutex (test_mutex.cpp) and on
// zkcoro::redis_mutex (tests/redis/test_redis_lock.cpp): the common lock surface compiles for
// both backends and behaves alike through it.
#ifndef ZKTEST_ANY_BACKEND_HPP
#define ZKTEST_ANY_BACKEND_HPP

#include <zkcoro/basic_mutex.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <optional>
#include <tuple>
#include <type_traits>

namespace zktest {

// `a` and `b`: two lock objects on one resource, on two clients of one backend, both free. Every
// member of basic_mutex, called through the base class: acquire and its reentrancy (hold_count),
// try_acquire and acquire(timeout) refused while the other object holds, async_acquire with a
// token and an explicit owner, async_participants naming the one holder, metrics, then the other
// object granted after the release with a larger fencing token.
template <class Backend>
boost::asio::awaitable<void> exercise_lock(zkcoro::basic_mutex<Backend>& a, zkcoro::basic_mutex<Backend>& b)
{
    namespace asio = boost::asio;
    using namespace std::chrono_literals;
    static_assert(std::is_same_v<decltype(a.get_executor()), typename Backend::executor_type>);
    CHECK(a.get_executor() != nullptr);
    auto me = co_await zkcoro::this_task::id();
    auto g = co_await a.acquire();
    CHECK(g.valid());
    CHECK(a.hold_count(me) == 1);
    auto again = co_await a.acquire(2s);  // the same task: reentrant, the same lease
    REQUIRE(again);
    CHECK(again->fencing_token() == g.fencing_token());
    CHECK(a.hold_count(me) == 2);
    CHECK(b.hold_count(me) == 0);  // reentrancy is per object

    auto tried = co_await b.try_acquire();
    CHECK_FALSE(tried);
    auto timed_out = co_await b.acquire(100ms);
    CHECK_FALSE(timed_out);
    auto r = co_await b.async_acquire(me, 50ms, asio::as_tuple(asio::use_awaitable));
    CHECK_FALSE(std::get<0>(r));
    CHECK_FALSE(std::get<1>(r).has_value());

    auto parts = co_await a.async_participants();
    REQUIRE(parts.size() == 1);
    CHECK(parts[0].holds);

    // Every grant counts, the reentrant one too; every empty answer is a timeout.
    CHECK(a.metrics().acquires == 2);
    CHECK(b.metrics().timeouts == 3);
    CHECK(b.metrics().acquires == 0);
    CHECK(a.local_handoffs() == 0);

    const auto first = g.fencing_token();
    co_await again->release();
    CHECK(a.hold_count(me) == 1);
    co_await g.release();
    CHECK(a.hold_count(me) == 0);
    auto gb = co_await b.acquire(5s);
    REQUIRE(gb);
    CHECK(gb->fencing_token() > first);
    CHECK(b.metrics().acquires == 1);
    co_await gb->release();
    auto after = co_await b.async_participants();
    CHECK(after.empty());
}

}  // namespace zktest

#endif
