// The session state machine, driven without a server.
#include "session/session_fsm.hpp"
#include <zkcoro/error.hpp>

#include <doctest/doctest.h>

using namespace zkcoro;
using detail::session_fsm;
using detail::zk_session_event;

// First connection: connecting -> connected, a new session (generation 1).
TEST_CASE("first connect establishes generation 1")
{
    session_fsm f;
    CHECK(f.state() == session_state::connecting);
    auto a = f.on_event(zk_session_event::connecting, 0);
    CHECK_FALSE(a.state_changed);
    a = f.on_event(zk_session_event::connected, 42);
    CHECK(a.state_changed);
    CHECK(a.new_session);
    CHECK(f.generation() == 1);
    CHECK(f.session_id() == 42);
}

// A disconnection suspends; reconnecting to the same session is not a new session.
TEST_CASE("suspend and resume keep the session")
{
    session_fsm f;
    f.on_event(zk_session_event::connected, 7);
    auto a = f.on_event(zk_session_event::connecting, 7);
    CHECK(a.state_changed);
    CHECK(f.state() == session_state::suspended);
    CHECK_FALSE(a.fail_pending);
    a = f.on_event(zk_session_event::connected, 7);
    CHECK(f.state() == session_state::connected);
    CHECK_FALSE(a.new_session);
    CHECK(f.generation() == 1);
}

// Expiry fails what is pending, asks for a new handle, and the next connect is a new session.
TEST_CASE("expiry leads to a new session")
{
    session_fsm f;
    f.on_event(zk_session_event::connected, 7);
    f.on_event(zk_session_event::connecting, 7);
    auto a = f.on_event(zk_session_event::expired, 7);
    CHECK(f.state() == session_state::expired);
    CHECK(a.fail_pending);
    CHECK(a.fail_with == client_errc::session_expired);
    CHECK(a.recreate_handle);
    // A repeated expiry notice changes nothing.
    CHECK_FALSE(f.on_event(zk_session_event::expired, 7).recreate_handle);
    CHECK(f.on_handle_recreated().state_changed);
    CHECK(f.state() == session_state::connecting);
    // No suspension without a session.
    CHECK_FALSE(f.on_event(zk_session_event::connecting, 0).state_changed);
    a = f.on_event(zk_session_event::connected, 8);
    CHECK(a.new_session);
    CHECK(f.generation() == 2);
}

// Authentication failure and close are terminal: nothing after them changes the state.
TEST_CASE("auth failure and close are terminal")
{
    session_fsm f;
    auto a = f.on_event(zk_session_event::auth_failed, 0);
    CHECK(f.state() == session_state::closed);
    CHECK(a.fail_with == client_errc::auth_failed);
    CHECK(a.release_handle);
    CHECK_FALSE(f.on_event(zk_session_event::connected, 1).state_changed);
    CHECK(f.state() == session_state::closed);

    session_fsm g;
    g.on_event(zk_session_event::connected, 1);
    a = g.on_close();
    CHECK(a.fail_with == client_errc::closed);
    CHECK_FALSE(g.on_close().state_changed);
}

// The lock-loss deadline: last heard + session timeout - margin.
TEST_CASE("may_expire_at")
{
    using namespace std::chrono;
    steady_clock::time_point t0{seconds(100)};
    CHECK(detail::may_expire_at(t0, milliseconds(4000), milliseconds(500)) == t0 + milliseconds(3500));
}
