// The lock object's decisions (detail::lock_machine), driven without a server, with a fake clock:
// each transition, then random scripts against the reference model of
// tests/fuzz/lock_machine_model.hpp (fixed seeds, bounded steps).
#include "engine/lock_machine.hpp"

#include "../fuzz/lock_machine_model.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <random>
#include <string>

using namespace std::chrono_literals;
using zkcoro::detail::lock_action;
using zkcoro::detail::lock_machine;
using zkcoro::detail::lock_machine_config;
using kind = lock_action::kind;

namespace {

const lock_machine::time_point t0 = lock_machine::time_point{} + 1h;  // the fake clock's start
constexpr auto never = lock_machine::never;

}  // namespace

TEST_CASE("a first acquisition queues on the backend; the same owner reenters")
{
    lock_machine m;
    CHECK(m.acquire(1, 1, never, t0).what == kind::start_active);
    CHECK(m.active());
    CHECK(m.granted(1, t0, false).what == kind::none);
    CHECK(m.hold_count(1) == 1);
    CHECK(m.acquire(1, 2, never, t0).what == kind::reenter);
    CHECK(m.hold_count(1) == 2);
    CHECK(m.released(1, t0).what == kind::none);
    auto a = m.released(1, t0);
    CHECK(a.what == kind::give_back);
    CHECK(a.give_back);
    CHECK_FALSE(m.active());
    CHECK(m.hold_count(1) == 0);
    CHECK(m.released(1, t0).what == kind::none);  // nothing held
}

TEST_CASE("others wait in memory, FIFO, and are handed the node at the last release")
{
    lock_machine m;
    m.acquire(1, 1, never, t0);
    CHECK(m.acquire(2, 2, never, t0).what == kind::wait);
    CHECK(m.acquire(3, 3, never, t0).what == kind::wait);
    auto g = m.granted(1, t0, false);
    CHECK(g.watch_queue);  // waiters behind: learn whether others queue
    auto a = m.released(1, t0);
    CHECK(a.what == kind::grant);
    CHECK(a.waiter == 2);
    CHECK(a.owner == 2);
    CHECK(m.hold_count(2) == 1);
    CHECK(m.handoffs() == 1);
    a = m.released(2, t0);
    CHECK(a.what == kind::grant);
    CHECK(a.waiter == 3);
    CHECK(m.released(3, t0).what == kind::give_back);
    CHECK(m.waiting() == 0);
}

TEST_CASE("the backend's failure promotes the first waiter, or clears the active role")
{
    lock_machine m;
    m.acquire(1, 1, never, t0);
    m.acquire(2, 2, never, t0);
    auto a = m.failed();
    CHECK(a.what == kind::promote);
    CHECK(a.waiter == 2);
    CHECK(m.active());
    CHECK(m.failed().what == kind::none);
    CHECK_FALSE(m.active());
}

TEST_CASE("deadlines: one timer at the earliest; timed-out waiters reported once")
{
    lock_machine m;
    m.acquire(1, 1, never, t0);
    auto a = m.acquire(2, 2, t0 + 50ms, t0);
    REQUIRE(a.arm_deadline);
    CHECK(*a.arm_deadline == t0 + 50ms);
    a = m.acquire(3, 3, t0 + 80ms, t0);
    CHECK_FALSE(a.arm_deadline);  // later than the armed one
    a = m.acquire(4, 4, t0 + 10ms, t0);
    REQUIRE(a.arm_deadline);
    CHECK(*a.arm_deadline == t0 + 10ms);
    a = m.deadline_fired(t0 + 10ms);
    CHECK(a.timed_out == std::vector<zkcoro::detail::waiter_id>{4});
    REQUIRE(a.arm_deadline);
    CHECK(*a.arm_deadline == t0 + 50ms);
    a = m.deadline_fired(t0 + 90ms);
    CHECK(a.timed_out.size() == 2);
    CHECK_FALSE(a.arm_deadline);
    CHECK(m.waiting() == 0);
    CHECK(m.deadline_fired(t0 + 200ms).timed_out.empty());
}

// Issue 40: the timer armed for waiters' deadlines does not outlive them (a program's run() would
// wait for the longest timeout); the uncontended path arms and cancels nothing.
TEST_CASE("deadlines: the timer is disarmed when its last waiter leaves, whichever way")
{
    lock_machine m;
    // Uncontended: no timer operation at all.
    auto a = m.acquire(1, 1, t0 + 30s, t0);
    CHECK(a.what == kind::start_active);
    CHECK_FALSE(a.arm_deadline);
    a = m.granted(1, t0, false);
    CHECK_FALSE(a.arm_deadline);
    CHECK_FALSE(a.disarm_deadline);
    a = m.released(1, t0);
    CHECK(a.what == kind::give_back);
    CHECK_FALSE(a.disarm_deadline);
    CHECK(m.deadline_timer_at() == never);

    // Granted in memory: disarmed with the last waiter's grant, not before.
    m.acquire(1, 2, t0 + 30s, t0);
    m.granted(1, t0, false);
    a = m.acquire(2, 3, t0 + 30s, t0);
    REQUIRE(a.arm_deadline);
    CHECK(*a.arm_deadline == t0 + 30s);
    CHECK_FALSE(m.acquire(3, 4, t0 + 30s, t0).arm_deadline);
    a = m.released(1, t0 + 1ms);
    CHECK(a.what == kind::grant);
    CHECK_FALSE(a.disarm_deadline);  // 4 still waits
    a = m.released(2, t0 + 2ms);
    CHECK(a.what == kind::grant);
    CHECK(a.waiter == 4);
    CHECK(a.disarm_deadline);  // the last waiter with a deadline left
    CHECK(m.deadline_timer_at() == never);
    CHECK(m.deadline_entries() == 0);
    CHECK_FALSE(m.released(3, t0 + 3ms).disarm_deadline);  // nothing armed any more

    // Cancelled: the last one disarms.
    m.acquire(1, 5, never, t0);
    m.granted(1, t0, false);
    REQUIRE(m.acquire(2, 6, t0 + 30s, t0).arm_deadline);
    a = m.cancelled(6);
    CHECK(a.what == kind::cancelled);
    CHECK(a.disarm_deadline);
    CHECK(m.deadline_timer_at() == never);

    // Promoted (the batch bound, or the active task's failure): the last one disarms.
    REQUIRE(m.acquire(2, 7, t0 + 30s, t0).arm_deadline);
    a = m.lost(1);
    CHECK(a.what == kind::promote);
    CHECK(a.disarm_deadline);
    a = m.granted(2, t0, false);
    REQUIRE(m.acquire(3, 8, t0 + 30s, t0).arm_deadline);
    m.lost(2);  // 3 promoted: queues on the backend
    REQUIRE(m.acquire(4, 9, t0 + 30s, t0).arm_deadline);
    a = m.failed();  // 3's attempt failed: 4 takes the active role
    CHECK(a.what == kind::promote);
    CHECK(a.disarm_deadline);
    CHECK(m.deadline_timer_at() == never);
}

TEST_CASE("deadlines: a timer that fires is re-armed only to a deadline still pending")
{
    lock_machine m;
    m.acquire(1, 1, never, t0);
    m.granted(1, t0, false);
    m.acquire(2, 2, t0 + 30s, t0);
    auto a = m.acquire(3, 3, t0 + 50ms, t0);
    REQUIRE(a.arm_deadline);
    CHECK(*a.arm_deadline == t0 + 50ms);
    m.acquire(4, 4, t0 + 40s, t0);
    m.acquire(5, 5, never, t0);
    a = m.released(1, t0 + 10ms);  // 2 granted: its deadline's entry is stale
    CHECK(a.waiter == 2);
    CHECK_FALSE(a.disarm_deadline);
    a = m.deadline_fired(t0 + 50ms);
    CHECK(a.timed_out == std::vector<zkcoro::detail::waiter_id>{3});
    REQUIRE(a.arm_deadline);
    CHECK(*a.arm_deadline == t0 + 40s);  // 4's, not 2's (gone)
    CHECK(m.cancelled(4).disarm_deadline == false);  // 5 (no deadline) still waits
    a = m.deadline_fired(t0 + 40s);  // fires for 4, gone: nothing pending, not re-armed
    CHECK(a.timed_out.empty());
    CHECK_FALSE(a.arm_deadline);
    CHECK(m.deadline_timer_at() == never);
    CHECK(m.is_waiting(5));
}

TEST_CASE("a cancelled waiter is skipped; cancelling twice does nothing")
{
    lock_machine m;
    m.acquire(1, 1, never, t0);
    m.granted(1, t0, false);
    m.acquire(2, 2, never, t0);
    m.acquire(3, 3, never, t0);
    auto a = m.cancelled(2);
    CHECK(a.what == kind::cancelled);
    CHECK(a.waiter == 2);
    CHECK(m.cancelled(2).what == kind::none);
    a = m.released(1, t0);
    CHECK(a.what == kind::grant);
    CHECK(a.waiter == 3);
}

TEST_CASE("abandoned entries are removed lazily: the queue stays bounded")
{
    lock_machine m;
    m.acquire(1, 1, never, t0);
    for (zkcoro::detail::waiter_id id = 2; id < 1000; ++id) {
        m.acquire(id, id, t0 + 1ms, t0);
        m.acquire(id + 5000, id + 5000, never, t0);
        m.cancelled(id + 5000);
        m.cancelled(id);
    }
    CHECK(m.waiting() == 0);
    CHECK(m.queue_entries() < 64);
    CHECK(m.deadline_entries() < 200);
}

TEST_CASE("the batch bound: after max_handoffs the node goes back and the next waiter queues")
{
    lock_machine_config c;
    c.max_handoffs = 2;
    lock_machine m(c);
    m.acquire(1, 1, never, t0);
    m.granted(1, t0, false);
    for (zkcoro::detail::waiter_id id = 2; id <= 5; ++id)
        m.acquire(id, id, never, t0);
    CHECK(m.released(1, t0).what == kind::grant);
    CHECK(m.released(2, t0).what == kind::grant);
    auto a = m.released(3, t0);
    CHECK(a.what == kind::promote);
    CHECK(a.waiter == 4);
    CHECK(a.give_back);
    CHECK_FALSE(a.batch_time_ended);
}

TEST_CASE("the batch ends by time once others queue")
{
    lock_machine_config c;
    c.handoff_batch_time = 20ms;
    lock_machine m(c);
    m.acquire(1, 1, never, t0);
    m.granted(1, t0, false);
    m.acquire(2, 2, never, t0);
    m.acquire(3, 3, never, t0);
    CHECK(m.released(1, t0 + 30ms).what == kind::grant);  // nobody else queues: no bound by time
    m.others_queued();
    auto a = m.released(2, t0 + 30ms);
    CHECK(a.what == kind::promote);
    CHECK(a.batch_time_ended);
    CHECK(a.give_back);
}

TEST_CASE("linger: kept after the last release, re-granted with no request, ended by a contender")
{
    lock_machine_config c;
    c.linger = 100ms;
    lock_machine m(c);
    m.acquire(1, 1, never, t0);
    m.granted(1, t0, false);
    auto a = m.released(1, t0);
    CHECK(a.what == kind::linger);
    REQUIRE(a.arm_linger);
    CHECK(*a.arm_linger == t0 + 100ms);
    CHECK(m.lingering());
    CHECK(m.acquire(2, 2, never, t0 + 10ms, false).what == kind::start_active);  // not usable: queues
    CHECK(m.failed().what == kind::none);
    CHECK(m.acquire(2, 2, never, t0 + 10ms).what == kind::grant_lingering);
    CHECK(m.hold_count(2) == 1);
    a = m.released(2, t0 + 20ms);
    CHECK(a.what == kind::linger);
    CHECK_FALSE(a.arm_linger);  // armed already (earlier): it re-arms when it fires
    a = m.linger_fired(t0 + 100ms);
    REQUIRE(a.arm_linger);
    CHECK(*a.arm_linger == t0 + 120ms);
    CHECK_FALSE(a.end_linger);
    a = m.others_queued();
    CHECK(a.end_linger);
    CHECK_FALSE(m.lingering());
    CHECK_FALSE(m.has_node());  // given back
    CHECK_FALSE(m.linger_fired(t0 + 120ms).end_linger);
}

// Issue 40: the linger timer goes with the node it was armed for (a contender, the loss, the close,
// the mutex's end); re-grants from lingering keep it (no timer operation per cycle).
TEST_CASE("linger: the timer is disarmed when the node goes, kept while it is re-granted")
{
    lock_machine_config c;
    c.linger = 30s;
    lock_machine m(c);
    auto lingers = [&](lock_machine::time_point at) {
        m.acquire(1, 1, never, at);
        m.granted(1, at, false);
        auto a = m.released(1, at);
        CHECK(a.what == kind::linger);
        CHECK(a.arm_linger);
        CHECK_FALSE(a.disarm_linger);
        CHECK(m.linger_timer_armed());
    };
    lingers(t0);
    for (int i = 0; i < 3; ++i) {
        auto a = m.acquire(2, 2, never, t0 + 1ms);
        CHECK(a.what == kind::grant_lingering);
        CHECK_FALSE(a.disarm_linger);
        a = m.released(2, t0 + 2ms);
        CHECK(a.what == kind::linger);
        CHECK_FALSE(a.arm_linger);
        CHECK_FALSE(a.disarm_linger);
    }
    auto a = m.others_queued();  // a contender
    CHECK(a.end_linger);
    CHECK(a.disarm_linger);
    CHECK_FALSE(m.linger_timer_armed());

    lingers(t0 + 1s);
    a = m.end_linger();  // the mutex goes
    CHECK(a.disarm_linger);
    CHECK_FALSE(m.linger_timer_armed());

    lingers(t0 + 2s);
    a = m.lost(0);  // the lingering node is lost (the session closed)
    CHECK(a.disarm_linger);
    CHECK_FALSE(m.linger_timer_armed());

    lingers(t0 + 3s);
    m.acquire(2, 3, never, t0 + 3s);  // held again from lingering, then lost while held
    a = m.lost(2);
    CHECK(a.disarm_linger);
    CHECK_FALSE(m.linger_timer_armed());

    lingers(t0 + 4s);
    m.acquire(2, 4, never, t0 + 4s);  // held again, then others queue: the release gives it back
    m.others_queued();
    a = m.released(2, t0 + 4s);
    CHECK(a.what == kind::give_back);
    CHECK(a.disarm_linger);
    CHECK_FALSE(m.linger_timer_armed());

    lingers(t0 + 5s);
    a = m.linger_fired(t0 + 5s + 30s);  // the window ends: the timer fired, nothing to cancel
    CHECK(a.end_linger);
    CHECK_FALSE(a.disarm_linger);
    CHECK_FALSE(m.linger_timer_armed());
}

TEST_CASE("linger ends when its window is over; never while others queue")
{
    lock_machine_config c;
    c.linger = 100ms;
    lock_machine m(c);
    m.acquire(1, 1, never, t0);
    m.granted(1, t0, true);  // the listing showed someone behind
    CHECK(m.released(1, t0).what == kind::give_back);
    m.acquire(1, 2, never, t0);
    m.granted(1, t0, false);
    m.released(1, t0);
    auto a = m.linger_fired(t0 + 100ms);
    CHECK(a.end_linger);
    CHECK_FALSE(m.lingering());
    m.acquire(1, 3, never, t0 + 200ms);
    m.granted(1, t0 + 200ms, false);
    m.released(1, t0 + 200ms);
    CHECK(m.lingering());
    CHECK(m.end_linger().end_linger);  // the mutex is destroyed
    CHECK_FALSE(m.end_linger().end_linger);
}

TEST_CASE("a loss: the holder no longer holds, the next waiter queues anew, its release is ignored")
{
    lock_machine m;
    m.acquire(1, 1, never, t0);
    m.granted(1, t0, false);
    m.acquire(1, 1, never, t0);  // reentrant: 2
    m.acquire(2, 2, never, t0);
    auto a = m.lost(1);
    CHECK(a.what == kind::promote);
    CHECK(a.waiter == 2);
    CHECK(m.hold_count(1) == 0);
    CHECK(m.lost(1).what == kind::none);  // lost already
    m.granted(2, t0, false);
    CHECK(m.hold_count(2) == 1);
}

TEST_CASE("a lingering node's loss ends the lingering, with nothing to give back")
{
    lock_machine_config c;
    c.linger = 100ms;
    lock_machine m(c);
    m.acquire(1, 1, never, t0);
    m.granted(1, t0, false);
    m.released(1, t0);
    auto a = m.lost(0);
    CHECK(a.what == kind::none);
    CHECK_FALSE(a.end_linger);
    CHECK_FALSE(m.lingering());
    CHECK(m.acquire(2, 2, never, t0).what == kind::start_active);
}

TEST_CASE("without local handoff (a semaphore's leases): every acquisition queues on the backend")
{
    lock_machine_config c;
    c.reentrant = false;
    c.local_handoff = false;
    lock_machine m(c);
    CHECK(m.acquire(1, 1, never, t0).what == kind::start_active);
    CHECK(m.acquire(1, 2, never, t0).what == kind::start_active);
    m.granted(1, t0, false);
    CHECK(m.hold_count(1) == 0);
    auto a = m.released(1, t0);
    CHECK(a.what == kind::give_back);
    CHECK(a.give_back);
}

TEST_CASE("random scripts agree with the reference model")
{
    std::size_t grants = 0;
    std::size_t timeouts = 0;
    for (std::uint32_t seed = 1; seed <= 200; ++seed) {
        std::mt19937 rng(seed);
        lock_machine_model::driver d(lock_machine_model::config_from(static_cast<std::uint8_t>(rng())));
        for (int step = 0; step < 2000; ++step) {
            auto op = static_cast<std::uint8_t>(rng());
            auto arg = static_cast<std::uint8_t>(rng());
            auto f = d.step(op, arg);
            if (f) {
                FAIL_CHECK("seed " << seed << " step " << step << ": " << std::string(f));
                break;
            }
        }
        grants += d.grants();
        timeouts += d.timeouts();
    }
    CHECK(grants > 1000);  // the scripts reach the handoff and the deadlines
    CHECK(timeouts > 100);
}
