// Configure-time probe of zkcoro's task identity (zkcoro/this_task.hpp), compiled and run by
// meson.build against the Boost that Meson found. this_task::id() reads Asio internals (the
// awaitable frame's attached thread and its entry point); this program checks, on the real
// Asio, what the library relies on:
//   1. an id is non-zero;
//   2. one co_spawn'd task sees one id at every depth of nested coroutines;
//   3. ... and after hops between the threads of a pool;
//   4. two tasks alive at the same time see different ids, also on one thread;
//   5. a task started after another ended gets another id (Asio gives it the ended one's frames);
//   6. every task's end is seen (its record goes), also when its coroutine throws.
// Exit 0 when all hold; otherwise it prints which one failed and exits 1.
#define ZKCORO_ASIO_HOOK_PROBE 1
#include <zkcoro/this_task.hpp>
#include <zkcoro/detail/task_ids.ipp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/version.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <thread>
#include <vector>

namespace asio = boost::asio;
using zkcoro::owner_id;

namespace {

std::atomic<int> failures{0};

void fail(const char* what)
{
    std::printf("asio hook probe: %s\n", what);
    failures.fetch_add(1);
}

asio::awaitable<owner_id> nested(int depth)
{
    if (depth == 0)
        co_return co_await zkcoro::this_task::id();
    co_return co_await nested(depth - 1);
}

// One task: its id at the top, in nested coroutines, and after timer waits (which may resume
// on another pool thread). Writes the id into *out.
asio::awaitable<void> task(owner_id* out, std::atomic<int>* done)
{
    const owner_id first = co_await zkcoro::this_task::id();
    if (first == 0)
        fail("an id is 0");
    for (int hop = 0; hop < 20; ++hop) {
        asio::steady_timer pause(co_await asio::this_coro::executor, std::chrono::microseconds(200));
        co_await pause.async_wait(asio::use_awaitable);
        if (co_await nested(hop % 4) != first)
            fail("a nested coroutine sees another id than its task");
        if (co_await zkcoro::this_task::id() != first)
            fail("a task's id changed after a thread hop");
    }
    *out = first;
    done->fetch_add(1);
}

asio::awaitable<owner_id> short_task(bool fail_after)
{
    const owner_id id = co_await nested(2);
    if (fail_after)
        throw std::runtime_error("ends with an exception");
    co_return id;
}

// Tasks one after another, each ended before the next starts: all ids differ, and no record is
// left once each has ended.
void sequential_tasks()
{
    asio::io_context ioc(1);
    std::vector<owner_id> seen;
    for (int i = 0; i < 8; ++i) {
        asio::co_spawn(ioc, short_task(i % 2 == 1), [&](std::exception_ptr, owner_id id) { seen.push_back(id); });
        ioc.run_for(std::chrono::seconds(5));
        ioc.restart();
        if (zkcoro::this_task::detail::live_tasks() != 0)
            fail("a task ended and its id's record is still there");
    }
    for (std::size_t a = 0; a < seen.size(); ++a)
        for (std::size_t b = a + 1; b < seen.size(); ++b)
            if (seen[a] == seen[b] && seen[a] != 0)
                fail("a task started after another ended got the same id");
    if (seen.size() != 8)
        fail("the sequential tasks did not all finish");
}

}  // namespace

int main()
{
    constexpr int tasks = 4;
    std::vector<owner_id> ids(tasks, 0);
    std::atomic<int> done{0};
    asio::io_context ioc(2);
    for (int t = 0; t < tasks; ++t)
        asio::co_spawn(ioc, task(&ids[static_cast<std::size_t>(t)], &done), asio::detached);
    std::thread other([&] { ioc.run_for(std::chrono::seconds(10)); });
    ioc.run_for(std::chrono::seconds(10));
    other.join();
    if (done.load() != tasks)
        fail("the tasks did not finish within 10 s");
    for (int a = 0; a < tasks; ++a)
        for (int b = a + 1; b < tasks; ++b)
            if (ids[static_cast<std::size_t>(a)] == ids[static_cast<std::size_t>(b)])
                fail("two live tasks share an id");
    if (zkcoro::this_task::detail::live_tasks() != 0)
        fail("the tasks ended and records of their ids are still there");
    sequential_tasks();
    if (failures.load() != 0)
        return 1;
    std::printf("ok: Asio %d.%d.%d\n", BOOST_ASIO_VERSION / 100000, BOOST_ASIO_VERSION / 100 % 1000,
                BOOST_ASIO_VERSION % 100);
    return 0;
}
