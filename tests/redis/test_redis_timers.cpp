// Issue 40, Redis: a program that acquires with long timeouts, releases and closes its client has
// run() return at once; the lock object's deadline timer, the holder's renewal timer and the
// connection's timers do not outlive the acquisitions and the close. (ZooKeeper:
// tests/integration/test_timers.cpp.)
#include "../integration/closing_run.hpp"
#include "redis_test_util.hpp"

#include <zkcoro/redis_mutex.hpp>

using namespace zkcoro;
namespace closing = zktest::closing;

namespace {

std::unique_ptr<redis_client> make_client(boost::asio::any_io_executor ex)
{
    return std::make_unique<redis_client>(std::move(ex), rt::shared_redis().url());
}

// The default TTL (10 s): its renewal timer, left armed after a hold, is due 3.3 s later.
std::unique_ptr<redis_mutex> make_mutex(redis_client& c)
{
    return std::make_unique<redis_mutex>(c, rt::unique_key("timers"));
}

void check(closing::scenario sc)
{
    for (int threads : {1, 4}) {
        sc.threads = threads;
        closing::run<redis_client, redis_mutex>(sc, make_client, make_mutex);
    }
}

}  // namespace

TEST_CASE("redis timers: run() returns at once after the close; the deadline timer of acquire(30 s) is gone")
{
    check({});
}

TEST_CASE("redis timers: acquisitions that time out and that are cancelled leave no timer behind")
{
    check({.extras = true});
}

TEST_CASE("redis timers: a lock object destroyed with no acquisition pending leaves nothing pending")
{
    check({.destroy = true});
    check({.extras = true, .destroy = true});
}

TEST_CASE("redis timers: a guard still held at the close is lost, its waiters end; its renewal ends with the close")
{
    check({.held = true});
    check({.extras = true, .held = true});
    check({.held = true, .waiting = 5});
}
