// The session, as the driver runs it: connecting (and waiting for it), waiting for a change of
// state, and the C library's session events turned into the state machine's actions
// (session/session_fsm.hpp decides, purely; this file applies its decisions to the handle).
#include "driver/client_impl.hpp"

#include <zkcoro/error.hpp>

#include <fmt/format.h>

namespace zkcoro::detail {

// ---------------------------------------------------------------------------------------------
// Connect and close

void client_impl::connect(std::shared_ptr<op_state<>> op)
{
    zk_guard g(this);
    if (closed_)
        return void(op->complete(closed_reason()));
    if (config_error_)
        return void(op->complete(config_error_));
    if (fsm_.state() == session_state::connected)
        return void(op->complete({}));
    connect_waiter w{op, nullptr};
    if (cfg.connect_timeout.count() > 0) {
        w.timer = std::make_shared<asio::steady_timer>(executor, cfg.connect_timeout);
        w.timer->async_wait([op](const error_code& ec) {
            if (!ec)
                op->complete(client_errc::connect_timeout);
        });
    }
    op->bind_cancellation();
    connect_waiters_.push_back(std::move(w));
    if (!started_) {
        started_ = true;
        begin_handle();
    }
}

void client_impl::wait_state(session_state known, std::shared_ptr<op_state<session_state>> op)
{
    zk_guard g(this);
    if (fsm_.state() != known)
        return void(op->complete({}, fsm_.state()));
    std::erase_if(state_waiters_, [](auto& w) { return w.second->done.load(); });
    op->bind_cancellation();
    state_waiters_.emplace_back(known, std::move(op));
}

void client_impl::listen_state(std::weak_ptr<state_listener> l)
{
    zk_guard g(this);
    std::erase_if(state_listeners_, [](auto& w) { return w.expired(); });
    state_listeners_.push_back(std::move(l));
}

error_code client_impl::closed_reason()
{
    zk_guard g(this);
    return closed_by_ ? closed_by_ : make_error_code(client_errc::closed);
}

void client_impl::fail_pending(error_code ec)
{
    while (ops_head_) {
        pending_request* r = ops_head_;
        unlink(r);  // the C library still owns it: its callback frees it
        r->op->fail(ec);
    }
    for (auto* m : {&data_watches_, &child_watches_}) {
        for (auto& [path, ws] : *m)
            for (auto& w : ws)
                w->deliver(ec, watch_event{});
        m->clear();
    }
    cleanup_paths_.clear();
}

void client_impl::apply(const session_action& a)
{
    state_atomic = fsm_.state();
    generation_atomic = fsm_.generation();
    if (a.fail_pending)
        fail_pending(a.fail_with);
    if (a.state_changed) {
        auto waiters = std::move(state_waiters_);
        state_waiters_.clear();
        for (auto& [known, op] : waiters)
            op->complete({}, fsm_.state());
        std::erase_if(state_listeners_, [](auto& w) { return w.expired(); });
        for (auto& w : state_listeners_)
            if (auto l = w.lock())
                asio::post(executor, [l = std::move(l)] { l->state_changed(); });
        log(log_level::info, fmt::format("session 0x{:x}: {}", fsm_.session_id(), to_string(fsm_.state())));
    }
    if (a.recreate_handle)
        need_recreate_ = true;
    if (a.release_handle)
        need_release_ = true;
}

// ---------------------------------------------------------------------------------------------
// Session and watch events (called by the C library inside zookeeper_process, lock held)

void client_impl::watcher_thunk(zhandle_t* zh, int type, int state, const char* path, void* ctx)
{
    auto* self = static_cast<client_impl*>(ctx);
    if (!self || zh != self->zh_)
        return;
    if (type == ZOO_SESSION_EVENT) {
        ++self->session_events_;
        self->on_session_event(state);
    }
    else
        self->on_watch_event(type, path);
}

void client_impl::on_session_event(int state)
{
    zk_session_event ev;
    if (state == ZOO_CONNECTED_STATE || state == ZOO_READONLY_STATE)
        ev = zk_session_event::connected;
    else if (state == ZOO_EXPIRED_SESSION_STATE)
        ev = zk_session_event::expired;
    else if (state == ZOO_AUTH_FAILED_STATE)
        ev = zk_session_event::auth_failed;
    else
        ev = zk_session_event::connecting;
    std::int64_t sid = zoo_client_id(zh_)->client_id;
    if (ev == zk_session_event::connected) {
        // Before the re-registered watches can fire: they come after the connect on the socket.
        connections.fetch_add(1, std::memory_order_release);
        negotiated_timeout_ms = zoo_recv_timeout(zh_);
        mark_heard();
        on_established();
    }
    if (ev == zk_session_event::auth_failed)
        closed_by_ = client_errc::auth_failed;  // what later requests and waits fail with
    auto a = fsm_.on_event(ev, sid);
    apply(a);
    if (ev == zk_session_event::connected) {
        for (auto& w : connect_waiters_)
            w.op->complete({});
        connect_waiters_.clear();
        auto paths = std::move(cleanup_paths_);
        cleanup_paths_.clear();
        for (auto& p : paths)
            cleanup_node(std::move(p));
        // The ensemble's member list, at every connection: it may have changed while away.
        read_ensemble();
        leave_if_not_member();
    } else if (ev == zk_session_event::auth_failed) {
        for (auto& w : connect_waiters_)
            w.op->complete(client_errc::auth_failed);
        connect_waiters_.clear();
        closed_ = true;
    }
}

}  // namespace zkcoro::detail
