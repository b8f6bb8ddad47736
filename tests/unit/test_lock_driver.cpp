// The lock object (the engine's driver: engine/lock_object.hpp, engine/lock_loop.cpp) without a
// server: a scriptable fake backend (grant now or later, fail, drop the task without a word, lose
// a node, report someone queueing) and a manual clock, as Boost.MySQL tests its connection pool
// with a mock connection and a mock timer. Each path of the loop, then random scripts checked
// against what a lock must do (one holder at a time, rising fencing tokens, every acquisition
// completed once, every node given back or lost, no timer left armed for nobody).
#include "../fuzz/lock_driver_rig.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <random>

using namespace std::chrono_literals;

using namespace lock_driver_rig;

TEST_CASE("driver: an uncontended acquisition starts one task, and its release gives the node back")
{
    rig r;
    auto a = r.acquire(1);
    CHECK_FALSE(a->done);
    REQUIRE(r.backend->started() == 1);
    CHECK_FALSE(r.backend->tasks[0].promoted);
    auto ns = r.grant();
    REQUIRE(a->done);
    CHECK_FALSE(a->ec);
    REQUIRE(a->g);
    CHECK(a->g->fencing_token() == ns->fence_base * token_scale);
    CHECK(r.lock->held_count(1) == 1);
    r.release(*a);
    REQUIRE(r.backend->given_back.size() == 1);
    CHECK(r.backend->given_back[0] == ns);
    CHECK(r.lock->held_count(1) == 0);
    CHECK(r.lock->metrics_snapshot().acquires == 1);
    CHECK_FALSE(r.timer_armed(engine_timer::deadline));
}

TEST_CASE("driver: the same task reenters with no request; its last release gives the node back")
{
    rig r;
    auto a = r.acquire(1);
    auto ns = r.grant();
    auto b = r.acquire(1);
    REQUIRE(b->done);
    REQUIRE(b->g);
    CHECK(r.backend->started() == 1);
    CHECK(b->g->fencing_token() == a->g->fencing_token());
    CHECK(r.lock->held_count(1) == 2);
    r.release(*a);
    CHECK(r.backend->given_back.empty());
    CHECK(r.lock->held_count(1) == 1);
    CHECK(r.lock->held_node(1) == ns->node);
    r.release(*b);
    CHECK(r.backend->given_back.size() == 1);
    CHECK_FALSE(r.lock->held_node(1));
}

TEST_CASE("driver: tasks of ours wait in memory, FIFO, and are handed the node with rising tokens")
{
    rig r;
    auto a = r.acquire(1);
    auto b = r.acquire(2);
    auto c = r.acquire(3);
    CHECK(r.backend->started() == 1);  // one task on the backend; two in memory
    auto ns = r.grant();
    CHECK(r.backend->queue_watched.size() == 1);  // waiters behind: learn whether others queue
    REQUIRE(a->g);
    CHECK_FALSE(b->done);
    r.release(*a);
    REQUIRE(b->g);
    CHECK_FALSE(c->done);
    CHECK(b->g->fencing_token() == ns->fence_base * token_scale + 1);
    r.release(*b);
    REQUIRE(c->g);
    CHECK(c->g->fencing_token() == ns->fence_base * token_scale + 2);
    CHECK(r.backend->given_back.empty());
    r.release(*c);
    CHECK(r.backend->given_back.size() == 1);
    CHECK(r.backend->started() == 1);
    CHECK(r.lock->metrics_snapshot().local_handoffs == 2);
}

TEST_CASE("driver: a failure on the backend reaches its caller, and the next task takes the role")
{
    rig r;
    auto a = r.acquire(1);
    auto b = r.acquire(2);
    r.fail(make_error_code(client_errc::invalid_argument));
    REQUIRE(a->done);
    CHECK(a->ec == client_errc::invalid_argument);
    REQUIRE(r.backend->started() == 2);
    CHECK(r.backend->tasks[1].promoted);
    r.grant();
    REQUIRE(b->g);
    r.release(*b);
    CHECK(r.backend->given_back.size() == 1);
}

TEST_CASE("driver: a backend that drops its task without a word still hands the role on")
{
    rig r;
    auto a = r.acquire(1);
    auto b = r.acquire(2);
    r.drop();
    REQUIRE(a->done);
    CHECK_FALSE(a->g);
    REQUIRE(r.backend->started() == 2);  // b was promoted by the dropped task's destructor
    CHECK(r.backend->tasks[1].promoted);
    r.grant();
    REQUIRE(b->g);
    r.release(*b);
}

TEST_CASE("driver: a waiter times out at its deadline, and no timer stays armed for nobody")
{
    rig r;
    auto a = r.acquire(1);
    auto b = r.acquire(2, r.now() + 1s);
    CHECK(r.timer_armed(engine_timer::deadline));
    r.advance(500ms);
    CHECK_FALSE(b->done);
    r.advance(600ms);
    REQUIRE(b->done);
    CHECK_FALSE(b->ec);  // a timeout: no error, no guard
    CHECK_FALSE(b->g);
    CHECK_FALSE(r.timer_armed(engine_timer::deadline));
    CHECK(r.lock->metrics_snapshot().timeouts == 1);
    r.grant();
    r.release(*a);
    CHECK(r.backend->given_back.size() == 1);  // nobody of ours left to hand to
    CHECK(b->completions == 1);
}

TEST_CASE("driver: a promoted task whose deadline has passed ends with a timeout, and the role goes on")
{
    // The deadline rule lives in the engine: the backend never starts a task already late.
    rig r;
    auto a = r.acquire(1);
    auto b = r.acquire(2, r.now() + 1s);
    auto c = r.acquire(3);
    r.clock->now += 2s;  // past b's deadline, its timer not fired yet
    r.fail();
    REQUIRE(a->done);
    REQUIRE(b->done);
    CHECK_FALSE(b->g);
    CHECK_FALSE(b->ec);
    REQUIRE(r.backend->started() == 2);  // c, not b
    CHECK(r.backend->tasks[1].task.owner() == 3);
    r.grant();
    REQUIRE(c->g);
    r.release(*c);
}

TEST_CASE("driver: a waiter cancelled leaves the queue; the release then gives the node back")
{
    rig r;
    auto a = r.acquire(1);
    asio::cancellation_signal* sig = nullptr;
    auto b = r.acquire(2, r.now() + 10s, &sig);
    r.grant();
    sig->emit(asio::cancellation_type::terminal);
    r.run();
    REQUIRE(b->done);
    CHECK(b->ec == asio::error::operation_aborted);
    CHECK_FALSE(r.timer_armed(engine_timer::deadline));  // the last waiter gone: the timer too
    r.release(*a);
    CHECK(r.backend->given_back.size() == 1);
    CHECK(r.lock->metrics_snapshot().cancellations == 1);
}

TEST_CASE("driver: a lost node: its guard reports it, the next task queues anew, the node is not given back")
{
    rig r;
    auto a = r.acquire(1);
    auto b = r.acquire(2);
    auto ns = r.grant();
    CHECK(r.lock->lost(ns));
    CHECK_FALSE(r.lock->lost(ns));  // once
    r.run();
    REQUIRE(a->g);
    CHECK(a->g->lost());
    CHECK(ns->ended());
    CHECK(r.lock->held_count(1) == 0);
    REQUIRE(r.backend->started() == 2);
    CHECK(r.backend->tasks[1].promoted);
    r.release(*a);  // a lost guard's release: nothing to give back
    CHECK(r.backend->given_back.empty());
    auto ns2 = r.grant();
    REQUIRE(b->g);
    CHECK(b->g->fencing_token() == ns2->fence_base * token_scale);
    r.release(*b);
    REQUIRE(r.backend->given_back.size() == 1);
    CHECK(r.backend->given_back[0] == ns2);
    CHECK(r.lock->metrics_snapshot().losses == 1);
}

namespace {

// Options that keep a node 100 ms after its last release.
mutex_options lingering()
{
    mutex_options o;
    o.linger = 100ms;
    return o;
}

// `owner` acquires, is granted a new node and releases it: the node it returns lingers.
std::shared_ptr<node_state> hold_once(rig& r, owner_id owner)
{
    auto a = r.acquire(owner);
    auto ns = r.grant();
    r.release(*a);
    return ns;
}

}  // namespace

TEST_CASE("driver: lingering keeps the node after the last release, regrants it, and ends on time or on contention")
{
    rig r(lingering());
    auto ns = hold_once(r, 1);
    CHECK(r.backend->given_back.empty());
    CHECK(r.timer_armed(engine_timer::linger));
    auto b = r.acquire(2);
    REQUIRE(b->g);  // at once, no request
    CHECK(r.backend->started() == 1);
    CHECK(b->g->fencing_token() == ns->fence_base * token_scale + 1);
    r.release(*b);
    r.advance(150ms);
    REQUIRE(r.backend->given_back.size() == 1);
    CHECK(r.backend->given_back[0] == ns);
    CHECK_FALSE(r.timer_armed(engine_timer::linger));

    // Someone queueing behind a lingering node ends it at once.
    auto ns2 = hold_once(r, 3);
    CHECK(r.backend->given_back.size() == 1);
    r.lock->queue_changed(ns2);
    r.run();
    REQUIRE(r.backend->given_back.size() == 2);
    CHECK(r.backend->given_back[1] == ns2);
    CHECK(r.lock->metrics_snapshot().linger_grants == 1);
}

TEST_CASE("driver: a lingering node the backend no longer holds is not regranted")
{
    rig r(lingering());
    auto ns = hold_once(r, 1);
    r.backend->held = false;  // e.g. the session that made it is not connected
    auto b = r.acquire(2);
    CHECK_FALSE(b->done);
    REQUIRE(r.backend->started() == 2);
    auto ns2 = r.grant();
    REQUIRE(b->g);
    REQUIRE(r.backend->given_back.size() == 1);  // the new node ended the old one's lingering
    CHECK(r.backend->given_back[0] == ns);
    r.release(*b);
    r.advance(1s);
    CHECK(r.backend->given_back.size() == 2);
}

TEST_CASE("driver: without reentrancy (a semaphore's leases) each acquisition is a task of its own")
{
    rig r({}, false);
    auto a = r.acquire(1);
    auto b = r.acquire(1);
    CHECK(r.backend->started() == 2);
    r.grant();
    r.grant();
    REQUIRE(a->g);
    REQUIRE(b->g);
    r.release(*a);
    r.release(*b);
    CHECK(r.backend->given_back.size() == 2);
}

TEST_CASE("driver: an owner of 0 and a path error are refused before anything is sent")
{
    rig r;
    auto a = r.acquire(0);
    REQUIRE(a->done);
    CHECK(a->ec == client_errc::invalid_argument);
    CHECK(r.backend->started() == 0);
}

TEST_CASE("driver: random scripts keep one holder, rising tokens, one completion each, and no node behind")
{
    // Fixed seeds, bounded steps (the fuzz target fuzz_lock_driver runs the same script on its
    // inputs): about a tenth of a second.
    std::size_t acquisitions = 0, grants = 0;
    for (std::uint32_t seed = 1; seed <= 200; ++seed) {
        std::mt19937 rng(seed);
        driver_script script(static_cast<std::uint8_t>(rng()));
        const char* failure = nullptr;
        int step = 0;
        for (; step < 300 && !failure; ++step)
            failure = script.step(static_cast<std::uint8_t>(rng()), static_cast<std::uint8_t>(rng()));
        if (!failure)
            failure = script.finish();
        INFO("seed " << seed << ", step " << step);
        CHECK_MESSAGE(failure == nullptr, (failure ? failure : ""));
        acquisitions += script.acquisitions();
        grants += script.grants();
    }
    MESSAGE(acquisitions << " acquisitions, " << grants << " grants by the backend");
    CHECK(grants > 1000);  // the scripts reach the backend's paths, not only the refusals
}
