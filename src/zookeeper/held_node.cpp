// The node this process holds: the lost policy applied to its session, the watch on the node
// itself and on who queues behind it, what a loss does, and the delete after the last release.
#include "zookeeper/lock.hpp"

#include "async/coroutine.hpp"
#include "zookeeper/node_ops.hpp"

#include "session/session_fsm.hpp"

#include <zkcoro/detail/access.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fmt/format.h>

namespace zkcoro::detail {

namespace {

using asio::awaitable;

void unwatch_session(lock_object& s, const std::shared_ptr<node_state>& ns);
void session_changed(const std::shared_ptr<lock_object>& s);

// After a loss: nothing left to watch the node for, and it is deleted (the session may come back).
void forget_lost(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns)
{
    unwatch_session(*s, ns);
    auto& zk = zk_of(*s);
    asio::co_spawn(zk.get_executor(), delete_or_log(access::share(zk), ns->node, "the lost lock node"),
                   asio::detached);
}

// The node is lost: its holder's guard reports it, the node is deleted, and the next local
// waiter queues anew.
void fire_lost(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns, std::string_view why)
{
    if (!s->lost(ns))
        return;
    access::log(zk_of(*s), log_level::warn, fmt::format("lock {} lost: {}", ns->node, why));
    forget_lost(s, ns);
}

// Whether an exists reply shows our node still there, owned by the session that created it.
bool still_ours(const exists_result& r, const node_state& ns)
{
    return r.stat && r.stat->ephemeral_owner == ns.session_id;
}

// Watches the session of a held node and applies the lost policy. Runs on the client's executor
// until the node is released (monitor_stop) or lost.
// `left_connected`: the session has left the connected state since the node was taken (so a
// reconnection must check that the node survived).
awaitable<void> monitor(std::shared_ptr<lock_object> st, std::shared_ptr<node_state> ns, bool left_connected)
{
    co_await asio::this_coro::throw_if_cancelled(false);
    auto& zk = zk_of(*st);
    auto ex = co_await asio::this_coro::executor;
    bool was_suspended = left_connected;
    // No cap on the number of state changes: each round waits for one, and a lock may be held
    // for months across many reconnections. It ends at the release (cancellation) or the loss.
    while (!ns->lost()) {
        auto s = zk.state();
        if (zk.session_generation() != ns->generation || s == session_state::expired ||
            s == session_state::closed || s == session_state::connecting) {
            fire_lost(st, ns, "the session expired or was closed");
            co_return;
        }
        if (s == session_state::suspended) {
            was_suspended = true;
            if (st->opts.policy == lost_policy::suspended) {
                fire_lost(st, ns, "the connection was lost (policy: suspended)");
                co_return;
            }
            if (st->opts.policy == lost_policy::deadline) {
                asio::steady_timer t(ex, policy_deadline(zk, st->opts));
                auto [order, ec1, next, ec2] =
                    co_await asio::experimental::make_parallel_group(zk.async_wait_state(s, asio::deferred),
                                                                     t.async_wait(asio::deferred))
                        .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
                const bool stopped = co_await cancelled();  // (not in the condition: see docs/building.md, Compilers)
                if (stopped)
                    co_return;
                if (order[0] == 1 && !ec2) {
                    fire_lost(st, ns, "the session may have expired: not reconnected in time (policy: deadline)");
                    co_return;
                }
                continue;
            }
        }
        if (s == session_state::connected && was_suspended) {
            was_suspended = false;
            // Back on the same session: make sure our node survived.
            auto [ec, r] = co_await zk.async_exists(ns->node, use_tuple);
            const bool stopped = co_await cancelled();
            if (stopped)
                co_return;
            if (!ec && !still_ours(r, *ns)) {
                fire_lost(st, ns, "the lock node is gone");
                co_return;
            }
            continue;
        }
        auto [ec, next] = co_await zk.async_wait_state(s, use_tuple);
        if (ec)
            co_return;
    }
}

// A monitor of the node's own, stopped at monitor_stop (the release), which is emitted on the
// client's executor. The completion handler keeps the node state, and so the signal, alive:
// co_spawn clears the slot after the coroutine's frame (and its reference) is gone.
void start_monitor(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns, bool left_connected)
{
    asio::co_spawn(zk_of(*s).get_executor(), monitor(s, ns, left_connected),
                   asio::bind_cancellation_slot(ns->monitor_stop.slot(), [ns](std::exception_ptr) {}));
}

// The lock object's one registration with the client for the state changes.
struct session_watch final : state_listener {
    std::weak_ptr<lock_object> object;
    void state_changed() override
    {
        if (auto s = object.lock())
            session_changed(s);
    }
};

// Watches our own node while this process has it, so that a node deleted by anyone (an operator
// "breaking" a stuck lock, a script) counts as a loss within one round trip, even while the
// connection never dropped. The exists request is sent after the grant and nobody waits for its
// reply. A data change re-arms the watch.
void watch_node(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns);

// Waits for the event of a watch on our node: a deletion is a loss, a data change re-arms.
void await_node_event(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns, zkcoro::watch w)
{
    w.async_wait([s, ns](error_code wec, watch_event ev) {
        if (wec || ns->ended())
            return;
        if (ev.type == watch_event_type::deleted)
            return fire_lost(s, ns, "the lock node was deleted by someone else");
        watch_node(s, ns);
    });
}

void watch_node(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns)
{
    zk_of(*s).async_exists(ns->node, leave_watch, [s, ns](error_code ec, exists_result r) {
        if (ns->ended())
            return;
        if (ec)
            return;  // the session ended or the connection dropped: the session monitor decides
        if (!still_ours(r, *ns))
            return fire_lost(s, ns, "the lock node is gone (deleted by someone else)");
        await_node_event(s, ns, std::move(r.watch));
    });
}

// Watches a node we were just granted. When the listing that granted it left a children watch,
// that watch already covers our node's deletion at no extra request (the uncontended case);
// the first change of the queue (someone queues, or our node goes) moves us to watch_node. A
// node that waited has its own watch already (set before its predecessor's deletion granted it).
void watch_held_node(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns,
                     zkcoro::watch queue_watch, zkcoro::watch own_watch)
{
    if (!queue_watch.valid() && own_watch.valid())
        return await_node_event(s, ns, std::move(own_watch));
    if (!queue_watch.valid())
        return watch_node(s, ns);
    queue_watch.async_wait(pooled([s, ns](error_code ec, watch_event) {
        if (ns->ended())
            return;  // given back: our own deletion
        s->queue_changed(ns);  // someone queued (a lingering node goes), or our node went
        if (!ec)
            watch_node(s, ns);  // else the session ended: the monitor decides
    }));
}

// A release whose delete failed for good: counted, logged, and reported to the caller.
void release_failed(lock_object& s, const std::string& node, op_state<>& op, error_code ec)
{
    s.count_release_failure();
    access::log(zk_of(s), log_level::error, fmt::format("lock {}: release failed: {}; the node stays until it is deleted "
                                                    "or the session ends", node, ec.message()));
    op.complete(ec);
}

// Applies the lost policy to a held node: one registration per lock object in the steady state,
// else a monitor of its own (a coroutine, until the release or the loss).
void watch_session(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns)
{
    auto steady = [&] {
        return zk_of(*s).state() == session_state::connected && zk_of(*s).session_generation() == ns->generation;
    };
    if (!steady())
        return start_monitor(s, ns, false);
    auto& b = zk_backend_of(*s);
    std::shared_ptr<state_listener> listen;
    {
        std::lock_guard lk(b.session_m);
        b.session_nodes.push_back(ns);
        if (!b.session_listener) {
            auto w = std::make_shared<session_watch>();
            w->object = s;
            listen = b.session_listener = std::move(w);
        }
    }
    if (listen)
        access::listen_state(b.zk, listen);
    // A change just before the node was listed was told before it was there: the node goes to a
    // monitor of its own, unless session_changed took it already.
    if (!steady()) {
        bool ours = false;
        {
            std::lock_guard lk(b.session_m);
            auto it = std::find(b.session_nodes.begin(), b.session_nodes.end(), ns);
            if (it != b.session_nodes.end()) {
                b.session_nodes.erase(it);
                ours = true;
            }
        }
        if (ours)
            start_monitor(s, ns, true);
    }
}

// The node is released or lost: no longer watched (a monitor of its own stops at monitor_stop).
void unwatch_session(lock_object& s, const std::shared_ptr<node_state>& ns)
{
    auto& b = zk_backend_of(s);
    std::lock_guard lk(b.session_m);
    std::erase(b.session_nodes, ns);
}

// The session's state changed: each node watched in the steady state goes to a monitor of its own.
void session_changed(const std::shared_ptr<lock_object>& s)
{
    std::vector<std::shared_ptr<node_state>> nodes;
    {
        auto& b = zk_backend_of(*s);
        std::lock_guard lk(b.session_m);
        nodes.swap(b.session_nodes);
    }
    for (auto& ns : nodes)
        if (!ns->ended())
            start_monitor(s, ns, true);
}

}  // namespace

steady_clock::time_point policy_deadline(const client& zk, const mutex_options& opts) noexcept
{
    const auto timeout = zk.session_timeout();
    return may_expire_at(zk.last_heard(), timeout, opts.safety_margin.count() > 0 ? opts.safety_margin : timeout / 5);
}

void end_lost_node(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns)
{
    asio::dispatch(zk_of(*s).get_executor(), [ns] { ns->monitor_stop.emit(asio::cancellation_type::terminal); });
    forget_lost(s, ns);
}

guard hold_node(active_task& task, const std::string& node, const node_stat& st, zkcoro::watch queue_watch,
                bool others_queued, std::shared_ptr<revocation_state> revocation, zkcoro::watch own_watch)
{
    const auto s = task.object();
    auto ns = make_pooled<node_state>();
    ns->node = node;
    ns->fence_base = st.czxid;
    ns->session_id = st.ephemeral_owner;
    ns->generation = zk_of(*s).session_generation();
    ns->granted_at = steady_clock::now();
    ns->queue_watched = queue_watch.valid() && s->recipe.watch_own_node;
    // When tasks of ours wait to be handed the node, the engine asks for watch_queue: whether
    // anyone else queues, for the time bound of the batch.
    auto h = task.granted(ns, others_queued, std::move(revocation));
    watch_session(s, ns);
    if (s->recipe.watch_own_node)
        watch_held_node(s, ns, std::move(queue_watch), std::move(own_watch));
    return access::make_guard(std::move(h), task.owner());
}

void delete_released_node(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns,
                          std::shared_ptr<op_state<>> op)
{
    // Stop the monitor (on the executor it runs on: at once when we are there already), then
    // delete the node. The first attempt is a plain request; only a retriable failure starts the
    // retrying coroutine. The engine has marked it given back: from here on, the deletion our own
    // watch sees is ours.
    unwatch_session(*s, ns);
    asio::dispatch(zk_of(*s).get_executor(), [ns, op, s] {
        ns->monitor_stop.emit(asio::cancellation_type::terminal);
        zk_of(*s).async_remove(ns->node, -1, pooled([ns, op, s](error_code ec) {
            if (!ec || ec == zk_errc::no_node || is_session_lost(ec))
                return void(op->complete_here({}));
            if (!is_retriable(ec))
                return release_failed(*s, ns->node, *op, ec);
            asio::co_spawn(zk_of(*s).get_executor(), guaranteed_delete(access::share(zk_of(*s)), ns->node),
                           [op, ns, s](std::exception_ptr e, error_code ec2) {
                               if (e)
                                   ec2 = zk_errc::system_error;
                               if (ec2)
                                   return release_failed(*s, ns->node, *op, ec2);
                               op->complete({});
                           });
        }));
    });
}

void watch_queue(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns)
{
    zk_of(*s).async_get_children(s->path, leave_watch, [s, ns](error_code ec, children_result r) {
        if (ns->ended())
            return;
        // A failure counts as "someone may be queued": the batch is bounded, lingering ends.
        if (ec || r.children.size() != 1)
            return s->queue_changed(ns);
        r.watch.async_wait([s, ns](error_code, watch_event) {
            if (!ns->ended())
                s->queue_changed(ns);
        });
    });
}

}  // namespace zkcoro::detail
