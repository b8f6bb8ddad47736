// Issue 40, ZooKeeper: a program that acquires with long timeouts, releases and closes its client
// has run() return at once; the lock object's deadline and linger timers, and the client's own
// timers, do not outlive the acquisitions and the close. (Redis: tests/redis/test_redis_timers.cpp.)
#include "closing_run.hpp"
#include "common.hpp"

using namespace zktest;
using namespace zkcoro;

namespace {

std::unique_ptr<client> make_client(asio::any_io_executor ex)
{
    return std::make_unique<client>(std::move(ex), test_config());
}

// A mutex on a path of its own, lingering `linger` after the last release (0: never).
std::function<std::unique_ptr<mutex>(client&)> make_mutex(std::chrono::milliseconds linger = 0ms)
{
    return [linger](client& c) {
        mutex_options o;
        o.linger = linger;
        return std::make_unique<mutex>(c, unique_path("timers"), o);
    };
}

void check(closing::scenario sc, std::chrono::milliseconds linger = 0ms)
{
    for (int threads : {1, 4}) {
        sc.threads = threads;
        closing::run<client, mutex>(sc, make_client, make_mutex(linger));
    }
}

}  // namespace

TEST_CASE("timers: run() returns at once after the close; the deadline timer of acquire(30 s) is gone")
{
    check({});
}

TEST_CASE("timers: with linger on, close() ends the lingering node's window and its timer")
{
    check({.label = "linger 30 s,"}, 30s);
}

TEST_CASE("timers: acquisitions that time out and that are cancelled leave no timer behind")
{
    check({.extras = true});
}

TEST_CASE("timers: a lock object destroyed with no acquisition pending leaves nothing pending")
{
    check({.destroy = true});
    check({.label = "linger 30 s,", .extras = true, .destroy = true}, 30s);
}

TEST_CASE("timers: a guard still held at the close is lost, its waiters end, and nothing stays pending")
{
    check({.held = true});
    check({.label = "linger 30 s,", .extras = true, .held = true}, 30s);
    check({.held = true, .waiting = 5});
}
