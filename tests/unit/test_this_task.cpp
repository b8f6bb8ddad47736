// Task identity through Asio's awaitable frames (no server): stable across nested coroutines and
// thread hops, distinct for distinct tasks, also on one thread.
#include <zkcoro/mutex.hpp>
#include <zkcoro/this_task.hpp>

#include <boost/asio.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>

#include <doctest/doctest.h>

#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

namespace asio = boost::asio;
using zkcoro::owner_id;

namespace {

asio::awaitable<owner_id> nested(int depth)
{
    if (depth == 0)
        co_return co_await zkcoro::this_task::id();
    co_return co_await nested(depth - 1);
}

}  // namespace

// 8 tasks on a 4-thread io_context: each sees one id at every depth and after every hop; the
// 8 ids differ.
TEST_CASE("task ids: stable per task, distinct across tasks")
{
    asio::io_context ioc(4);
    std::mutex m;
    std::set<owner_id> ids;
    std::set<std::thread::id> threads_seen;
    int consistent = 0;
    for (int t = 0; t < 8; ++t) {
        asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
            auto first = co_await zkcoro::this_task::id();
            bool same = true;
            for (int hop = 0; hop < 50; ++hop) {
                // A timer completes on whichever pool thread runs the reactor (a post would stay
                // in the posting thread's private queue).
                asio::steady_timer pause(co_await asio::this_coro::executor, std::chrono::microseconds(500));
                co_await pause.async_wait(asio::use_awaitable);
                {
                    std::lock_guard lk(m);
                    threads_seen.insert(std::this_thread::get_id());
                }
                same = same && (co_await nested(hop % 4)) == first;
                same = same && (co_await zkcoro::this_task::id()) == first;
            }
            std::lock_guard lk(m);
            ids.insert(first);
            consistent += same;
        }, asio::detached);
    }
    std::vector<std::thread> pool;
    for (int i = 0; i < 4; ++i)
        pool.emplace_back([&] { ioc.run_for(std::chrono::seconds(20)); });
    for (auto& th : pool)
        th.join();
    CHECK(consistent == 8);
    CHECK(ids.size() == 8);
    CHECK(ids.count(0) == 0);
    MESSAGE("threads seen: " << threads_seen.size());
    CHECK(threads_seen.size() >= 2);
}

// Two tasks on a single-threaded io_context are still two owners.
TEST_CASE("task ids: two tasks on one thread differ")
{
    asio::io_context ioc(1);
    owner_id a = 0, b = 0;
    asio::co_spawn(ioc, [&]() -> asio::awaitable<void> { a = co_await zkcoro::this_task::id(); }, asio::detached);
    asio::co_spawn(ioc, [&]() -> asio::awaitable<void> { b = co_await zkcoro::this_task::id(); }, asio::detached);
    ioc.run();
    CHECK(a != 0);
    CHECK(b != 0);
    CHECK(a != b);
}

namespace {
asio::awaitable<owner_id> short_task(bool throw_after)
{
    const owner_id id = co_await nested(2);
    if (throw_after)
        throw std::runtime_error("ends with an exception");
    co_return id;
}
}  // namespace

// Tasks one after another on one thread, each ended before the next starts (Asio hands each the
// frames of the one before): every id differs, has the top bit set, and every end is seen (the
// task's record goes), also when the task throws, or is one side of || that lost.
TEST_CASE("task ids: a task started after another ended gets another id; every end is seen")
{
    asio::io_context ioc(1);
    const auto before = zkcoro::this_task::detail::live_tasks();
    std::set<owner_id> ids;
    int finished = 0;
    for (int i = 0; i < 10; ++i) {
        asio::co_spawn(ioc, short_task(i % 3 == 2), [&](std::exception_ptr e, owner_id id) {
            ++finished;
            if (!e)
                ids.insert(id);
        });
        ioc.run_for(std::chrono::seconds(5));
        ioc.restart();
        CHECK(zkcoro::this_task::detail::live_tasks() == before);
    }
    CHECK(finished == 10);
    CHECK(ids.size() == 7);
    for (auto id : ids)
        CHECK((id >> (sizeof(owner_id) * 8 - 1)) == 1);

    // || runs each side as a task of its own: the losing side's end is seen too.
    using namespace asio::experimental::awaitable_operators;
    owner_id outer = 0, inner = 0;
    asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
        outer = co_await zkcoro::this_task::id();
        asio::steady_timer never(co_await asio::this_coro::executor, std::chrono::hours(1));
        co_await (nested(1) || never.async_wait(asio::use_awaitable));
        inner = co_await zkcoro::this_task::id();
    }, asio::detached);
    ioc.run_for(std::chrono::seconds(5));
    CHECK(outer != 0);
    CHECK(inner == outer);
    CHECK(zkcoro::this_task::detail::live_tasks() == before);
}
