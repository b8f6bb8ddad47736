// The session state machine, with no I/O: fed with what the C library reports, it says what the
// client must do. Unit-tested without a server.
#ifndef ZKCORO_DETAIL_SESSION_FSM_HPP
#define ZKCORO_DETAIL_SESSION_FSM_HPP

#include <zkcoro/detail/api.hpp>
#include <zkcoro/error.hpp>
#include <zkcoro/types.hpp>

#include <chrono>
#include <cstdint>

namespace zkcoro::detail {

// What the C library's session watcher reported.
enum class zk_session_event {
    connecting,   // ZOO_CONNECTING_STATE / ZOO_ASSOCIATING_STATE: the connection is down
    connected,    // ZOO_CONNECTED_STATE (or read-only)
    expired,      // ZOO_EXPIRED_SESSION_STATE
    auth_failed,  // ZOO_AUTH_FAILED_STATE
};

// What the client must do after an input.
struct session_action {
    bool state_changed = false;    // notify state waiters
    bool new_session = false;      // the session id changed (first connect or after expiry)
    bool fail_pending = false;     // complete pending operations and watches with `fail_with`
    bool recreate_handle = false;  // close the dead handle (off the driver) and create a new one
    bool release_handle = false;   // close the handle for good
    error_code fail_with;
};

class ZKCORO_API session_fsm {
public:
    session_state state() const noexcept { return state_; }
    std::int64_t session_id() const noexcept { return session_id_; }
    std::uint64_t generation() const noexcept { return generation_; }

    // The C library reported a session event; session_id is zoo_client_id()'s at that time.
    session_action on_event(zk_session_event ev, std::int64_t session_id) noexcept;

    // The handle was re-created after an expiry: a new session is being established.
    session_action on_handle_recreated() noexcept;

    // close() was called.
    session_action on_close() noexcept;

private:
    session_action move_to(session_state s) noexcept;

    session_state state_ = session_state::connecting;
    std::int64_t session_id_ = 0;
    std::uint64_t generation_ = 0;
};

// When the session may have expired on the server, seen from the client: the server expires a
// session that it has not heard from for the session timeout; the client last heard from the
// server at `last_heard`, and the server heard from the client no earlier than that. Subtract a
// safety margin for clock-rate differences and the time a reply spends in flight.
inline std::chrono::steady_clock::time_point may_expire_at(
    std::chrono::steady_clock::time_point last_heard, std::chrono::milliseconds session_timeout,
    std::chrono::milliseconds margin) noexcept
{
    return last_heard + session_timeout - margin;
}

}  // namespace zkcoro::detail

#endif
