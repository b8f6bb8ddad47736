// Lingering locks (mutex_options::linger) and the time bound of a batch of in-process handoffs
// (mutex_options::handoff_batch_time), against a real ZooKeeper.
#include "common.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <vector>

using namespace zktest;
using namespace zkcoro;
using asio::awaitable;

namespace {

mutex_options lingering(std::chrono::milliseconds linger)
{
    mutex_options o;
    o.linger = linger;
    return o;
}

awaitable<bool> gone(client& c, const std::string& path, std::chrono::milliseconds limit = 5000ms)
{
    co_return co_await eventually([&]() -> awaitable<bool> { co_return (co_await children_of(c, path)).empty(); },
                                  limit);
}

}  // namespace

// Inside the window, a re-acquire takes the same node with no request to ZooKeeper, and each
// grant's fencing token is one more than the last.
TEST_CASE("linger: a re-acquire inside the window sends no request")
{
    run_with_clients({.name = "linger1"}, [&](fixture& f) -> awaitable<void> {
        auto& c = f.client();
        mutex m(c, f.path, lingering(30s));
        auto g = co_await m.acquire();
        const auto node = g.node_path();
        std::int64_t last = g.fencing_token();
        co_await g.release();
        // The node stays after the last release.
        CHECK((co_await children_of(c, f.path)).size() == 1);
        const auto requests = c.stats().requests;
        for (int i = 0; i < 10; ++i) {
            auto again = co_await m.acquire();
            CHECK(again.node_path() == node);
            CHECK(again.fencing_token() == last + 1);
            last = again.fencing_token();
            co_await again.release();
        }
        CHECK(c.stats().requests == requests);
        CHECK(m.metrics().linger_grants == 10);
        CHECK(m.metrics().acquires == 11);
    });
}

// A contender (another process) makes the lingering node go at once: it is granted long before
// the 30 s window ends, after one notification; fencing tokens keep increasing across the two.
TEST_CASE("linger: a contender makes the lingering node go")
{
    run_with_clients({.name = "linger2", .clients = 2}, [&](fixture& f) -> awaitable<void> {
        auto [a, b] = f.clients<2>();
        mutex ma(a, f.path, lingering(30s));
        mutex mb(b, f.path);
        auto g = co_await ma.acquire();
        co_await g.release();
        auto g2 = co_await ma.acquire();  // from the lingering node
        const auto a_token = g2.fencing_token();
        const auto a_node = g2.node_path();
        co_await g2.release();
        REQUIRE((co_await children_of(b, f.path)).size() == 1);

        const auto events0 = b.stats().watch_events;
        auto gb = co_await mb.acquire(10s);
        REQUIRE(gb.has_value());
        CHECK(gb->fencing_token() > a_token);
        CHECK(b.stats().watch_events - events0 <= 1);
        auto listed = co_await children_of(b, f.path);
        CHECK(listed.size() == 1);
        CHECK(listed.at(0) == node_name(gb->node_path()));
        // While b holds, a queues with a new node; its token is above b's.
        std::optional<guard> ga;
        asio::co_spawn(co_await asio::this_coro::executor, [&]() -> awaitable<void> { ga = co_await ma.acquire(10s); },
                       asio::detached);
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return (co_await children_of(b, f.path)).size() == 2; }));
        const auto b_token = gb->fencing_token();
        co_await gb->release();
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return ga.has_value(); }));
        REQUIRE(ga.has_value());
        REQUIRE(ga->valid());
        CHECK(ga->node_path() != a_node);
        CHECK(ga->fencing_token() > b_token);
        co_await ga->release();
    });
}

// The window ends: the node goes by itself, a while after the release (not at it).
TEST_CASE("linger: the node goes when the window ends")
{
    run_with_clients({.name = "linger3"}, [&](fixture& f) -> awaitable<void> {
        auto& c = f.client();
        mutex m(c, f.path, lingering(1000ms));
        auto g = co_await m.acquire();
        co_await g.release();
        CHECK((co_await children_of(c, f.path)).size() == 1);
        CHECK(co_await gone(c, f.path, 10000ms));
        // A later acquire queues afresh.
        auto g2 = co_await m.acquire();
        CHECK(m.metrics().linger_grants == 0);
        co_await g2.release();
    });
}

// The mutex going ends its lingering at once.
TEST_CASE("linger: destroying the mutex deletes the lingering node")
{
    run_with_clients({.name = "linger4"}, [&](fixture& f) -> awaitable<void> {
        auto& c = f.client();
        {
            mutex m(c, f.path, lingering(30s));
            auto g = co_await m.acquire();
            co_await g.release();
            CHECK((co_await children_of(c, f.path)).size() == 1);
        }
        CHECK(co_await gone(c, f.path));
    });
}

// The lost policy applies while lingering: after the session expired, the lingering node is not
// granted again; the next acquire queues with a new node in the new session.
TEST_CASE("linger: a lost session ends the lingering")
{
    run_with_clients({.name = "linger5", .clients = 2, .limit = 60s}, [&](fixture& f) -> awaitable<void> {
        auto [c, observer] = f.clients<2>();
        mutex m(c, f.path, lingering(60s));
        auto g = co_await m.acquire();
        const auto node = g.node_path();
        const auto session = g.session_id();
        co_await g.release();
        REQUIRE(co_await expire_session(c));
        REQUIRE(co_await wait_for_state(c, session_state::connected));
        auto g2 = co_await m.acquire(10s);
        REQUIRE(g2.has_value());
        CHECK(g2->node_path() != node);
        CHECK(g2->session_id() != session);
        CHECK(m.metrics().linger_grants == 0);
        auto listed = co_await children_of(observer, f.path);
        CHECK(listed.size() == 1);
        CHECK(listed.at(0) == node_name(g2->node_path()));
        co_await g2->release();
    });
}

// With another process queued, a batch of in-process handoffs ends by time: the other process is
// granted after a few of this process's holds, not after 63.
TEST_CASE("handoff batch: bounded by time once another participant is queued")
{
    run_with_clients({.name = "batch", .clients = 2, .limit = 60s}, [&](fixture& f) -> awaitable<void> {
        auto [a, b] = f.clients<2>();
        mutex_options o;
        o.handoff_batch_time = 5ms;
        mutex ma(a, f.path, o);
        mutex mb(b, f.path);
        auto ex = co_await asio::this_coro::executor;
        bool stop = false;
        int a_grants = 0, running = 0;
        for (int t = 0; t < 4; ++t)
            asio::co_spawn(ex, [&]() -> awaitable<void> {
                ++running;
                asio::steady_timer hold(ex);
                for (int i = 0; i < 2000 && !stop; ++i) {
                    auto g = co_await ma.acquire();
                    ++a_grants;
                    hold.expires_after(2ms);
                    co_await hold.async_wait(asio::use_awaitable);
                    co_await g.release();
                }
                --running;
            }, asio::detached);
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return a_grants > 8; }));
        // b queues while a's tasks hand the node around; count a's grants until b's turn.
        std::vector<int> grants_while_waiting;
        for (int round = 0; round < 5; ++round) {
            int before = a_grants;
            auto g = co_await mb.acquire(10s);
            REQUIRE(g.has_value());
            grants_while_waiting.push_back(a_grants - before);
            co_await g->release();
        }
        stop = true;
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return running == 0; }, 20000ms));
        INFO("a's grants while b waited: " << fmt::format("{}", fmt::join(grants_while_waiting, " ")));
        // 2 ms holds and a 5 ms bound: about 3 grants per batch (a batch of 63 without it). The
        // count starts before b's node is created, so one round in five may be longer: under load
        // a first round counted 45 (then 3 2 3 3) while b's request waited on the server.
        std::sort(grants_while_waiting.begin(), grants_while_waiting.end());
        CHECK(grants_while_waiting[grants_while_waiting.size() - 2] < 40);
        CHECK(ma.metrics().batch_time_ends > 0);
    });
}
