#include "session/session_fsm.hpp"
#include <zkcoro/error.hpp>

namespace zkcoro::detail {

session_action session_fsm::move_to(session_state s) noexcept
{
    session_action a;
    a.state_changed = s != state_;
    state_ = s;
    return a;
}

session_action session_fsm::on_event(zk_session_event ev, std::int64_t session_id) noexcept
{
    // Nothing the library says after close() or a failed authentication matters any more.
    if (state_ == session_state::closed)
        return {};
    switch (ev) {
    case zk_session_event::connecting:
        // Before the first connection (or after an expiry) there is no session to suspend.
        if (state_ == session_state::connected)
            return move_to(session_state::suspended);
        return {};
    case zk_session_event::connected: {
        auto a = move_to(session_state::connected);
        if (session_id != session_id_) {
            a.new_session = true;
            session_id_ = session_id;
            ++generation_;
        }
        return a;
    }
    case zk_session_event::expired: {
        if (state_ == session_state::expired)
            return {};
        auto a = move_to(session_state::expired);
        a.fail_pending = true;
        a.fail_with = client_errc::session_expired;
        a.recreate_handle = true;
        return a;
    }
    case zk_session_event::auth_failed: {
        auto a = move_to(session_state::closed);
        a.fail_pending = true;
        a.fail_with = client_errc::auth_failed;
        a.release_handle = true;
        return a;
    }
    }
    return {};
}

session_action session_fsm::on_handle_recreated() noexcept
{
    if (state_ != session_state::expired)
        return {};
    return move_to(session_state::connecting);
}

session_action session_fsm::on_close() noexcept
{
    if (state_ == session_state::closed)
        return {};
    auto a = move_to(session_state::closed);
    a.fail_pending = true;
    a.fail_with = client_errc::closed;
    a.release_handle = true;
    return a;
}

}  // namespace zkcoro::detail
