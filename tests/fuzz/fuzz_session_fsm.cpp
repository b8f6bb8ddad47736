// Fuzz target for detail::session_fsm. Each input byte is one step: the low three bits choose
// what happens (a session event from the C library, the handle re-created, close(), or time
// passing), the high bits choose a session id among a few (1 to 32: ZooKeeper never hands out
// session id 0, and a connected event always carries a real id), so that ids repeat as they do
// in real life. A model written from the header's comments and the unit tests predicts each state.
//
// Properties checked after every step:
// - state_changed is true exactly when the state changed;
// - fail_pending is true exactly when fail_with is set, and fail_with is session_expired,
//   auth_failed or closed, matching the state entered (expired or closed);
// - recreate_handle only on entering expired, release_handle only on entering closed (once);
// - closed is terminal: afterwards every input yields an empty action;
// - the generation grows by exactly one with each new_session, which only a connected event
//   with a session id different from the current one brings, and the session id changes only
//   then;
// - suspended only follows connected; on_handle_recreated only moves expired to connecting;
// - may_expire_at, computed from the last time a connected state was seen, never moves back.
#include "fuzz_check.hpp"

#include "session/session_fsm.hpp"
#include <zkcoro/error.hpp>
#include <zkcoro/types.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace {

using zkcoro::session_state;
using zkcoro::client_errc;
using zkcoro::detail::session_action;
using zkcoro::detail::session_fsm;
using zkcoro::detail::zk_session_event;

bool empty_action(const session_action& a)
{
    return !a.state_changed && !a.new_session && !a.fail_pending && !a.recreate_handle && !a.release_handle &&
           !a.fail_with;
}

bool known_state(session_state s)
{
    switch (s) {
    case session_state::connecting:
    case session_state::connected:
    case session_state::suspended:
    case session_state::expired:
    case session_state::closed:
        return true;
    }
    return false;
}

// The state the model expects after an event, from the documented behaviour.
session_state expected_after_event(session_state s, zk_session_event ev)
{
    if (s == session_state::closed)
        return s;
    switch (ev) {
    case zk_session_event::connecting:
        return s == session_state::connected ? session_state::suspended : s;
    case zk_session_event::connected:
        return session_state::connected;
    case zk_session_event::expired:
        return session_state::expired;
    case zk_session_event::auth_failed:
        return session_state::closed;
    }
    return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    using namespace std::chrono;
    session_fsm fsm;
    FUZZ_CHECK(fsm.state() == session_state::connecting);
    FUZZ_CHECK(fsm.generation() == 0);
    FUZZ_CHECK(fsm.session_id() == 0);

    bool released = false;
    // A simulated clock: "time passes" steps advance it, connected states refresh last_heard.
    steady_clock::time_point now{};
    steady_clock::time_point last_heard{};
    steady_clock::time_point previous_deadline = steady_clock::time_point::min();
    constexpr milliseconds session_timeout{4000}, margin{500};

    for (std::size_t i = 0; i < size; ++i) {
        unsigned step = data[i] & 7u;
        // Ids 1..32: a small set, so that reconnecting to the same session happens often.
        std::int64_t id = (data[i] >> 3) + 1;
        session_state before = fsm.state();
        std::int64_t id_before = fsm.session_id();
        std::uint64_t gen_before = fsm.generation();
        session_action a;
        session_state expected = before;
        bool event = false;
        zk_session_event ev{};

        switch (step) {
        case 0: ev = zk_session_event::connecting; event = true; break;
        case 1: ev = zk_session_event::connected; event = true; break;
        case 2: ev = zk_session_event::expired; event = true; break;
        case 3: ev = zk_session_event::auth_failed; event = true; break;
        case 4:
            a = fsm.on_handle_recreated();
            expected = before == session_state::expired ? session_state::connecting : before;
            break;
        case 5:
            a = fsm.on_close();
            expected = session_state::closed;
            break;
        default:
            // Time passes: from 1 ms to 32 s, by the id bits.
            now += milliseconds(std::int64_t{1} << (id % 16));
            break;
        }
        if (event) {
            a = fsm.on_event(ev, id);
            expected = expected_after_event(before, ev);
        }
        session_state after = fsm.state();

        FUZZ_CHECK(known_state(after));
        FUZZ_CHECK(after == expected);
        FUZZ_CHECK(a.state_changed == (after != before));
        if (before == session_state::closed)
            FUZZ_CHECK(empty_action(a));

        // Failing pending work goes with a code that says why, and only on entering a state
        // in which the session (expired) or the client (closed) is gone.
        FUZZ_CHECK(a.fail_pending == static_cast<bool>(a.fail_with));
        if (a.fail_pending) {
            FUZZ_CHECK(a.state_changed);
            if (after == session_state::expired)
                FUZZ_CHECK(a.fail_with == client_errc::session_expired);
            else
                FUZZ_CHECK(after == session_state::closed &&
                           (a.fail_with == client_errc::auth_failed || a.fail_with == client_errc::closed));
            if (after == session_state::closed)
                FUZZ_CHECK(a.fail_with == (step == 3 ? client_errc::auth_failed : client_errc::closed));
        }
        if (a.state_changed && (after == session_state::expired || after == session_state::closed))
            FUZZ_CHECK(a.fail_pending);
        FUZZ_CHECK(a.recreate_handle == (a.state_changed && after == session_state::expired));
        FUZZ_CHECK(a.release_handle == (a.state_changed && after == session_state::closed));
        if (a.release_handle) {
            FUZZ_CHECK(!released);
            released = true;
        }

        // Sessions and generations.
        if (a.new_session) {
            FUZZ_CHECK(event && ev == zk_session_event::connected);
            FUZZ_CHECK(id != id_before);
            FUZZ_CHECK(fsm.session_id() == id);
            FUZZ_CHECK(fsm.generation() == gen_before + 1);
        } else {
            FUZZ_CHECK(fsm.session_id() == id_before);
            FUZZ_CHECK(fsm.generation() == gen_before);
        }
        if (event && ev == zk_session_event::connected && before != session_state::closed)
            FUZZ_CHECK(a.new_session == (id != id_before));
        if (after == session_state::suspended)
            FUZZ_CHECK(before == session_state::connected || before == session_state::suspended);
        if (after == session_state::suspended || after == session_state::connected)
            FUZZ_CHECK(fsm.generation() >= 1);

        // The lock-loss deadline only moves forward while the client keeps hearing from the
        // server, and stays a fixed distance after the last time it did.
        if (after == session_state::connected)
            last_heard = now;
        auto deadline = zkcoro::detail::may_expire_at(last_heard, session_timeout, margin);
        FUZZ_CHECK(deadline >= previous_deadline);
        FUZZ_CHECK(deadline - last_heard == session_timeout - margin);
        previous_deadline = deadline;
    }
    return 0;
}
