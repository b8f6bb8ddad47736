// The lock object's one loop: an event (an acquisition, the backend's grant or failure, a release,
// a timer, a cancellation, a loss, someone queueing behind our node) goes to the lock machine
// under the object's lock; carry_out() does what the machine's action says to the handles the
// object keeps (the leases, the waiters' completions, the timers, the node); finish() then does,
// with the lock let go, what reaches outside: completions and requests to the backend.
// carry_out() is the only reader of a lock_action.
#include "engine/lock_object.hpp"

#include "engine/acquisition.hpp"

#include <zkcoro/detail/access.hpp>

namespace zkcoro::detail {

std::shared_ptr<object_lease> lock_object::make_lease(std::shared_ptr<node_state> ns, owner_id owner)
{
    // The fencing token's handoff number: the machine's count of in-process handoffs of the node.
    const int handoff = opts.local_handoff ? machine_.handoffs() : 0;
    auto h = make_pooled<object_lease>(shared_from_this(), std::move(ns), owner, handoff);
    h->ns_->holder_ = h;
    if (recipe.reentrant)
        leases_[owner] = h;
    return h;
}

void lock_object::arm(engine_timer which, steady_clock::time_point at)
{
    std::weak_ptr<lock_object> weak = shared_from_this();
    clock_->arm(which, at, [weak, which] {
        auto s = weak.lock();
        if (!s)
            return;
        event e{which == engine_timer::deadline ? event::kind::deadline : event::kind::linger_fired};
        s->handle(e);
    });
}

bool lock_object::linger_usable() const
{
    // Only while the backend still holds it (ZooKeeper: connected in the session that made the
    // node): otherwise the acquire queues, and its node ends the lingering (or the lost policy has).
    return machine_.lingering() && node_ && !node_->lost() && backend->still_held(*node_);
}

namespace {

// A waiter's cancellation (terminal or partial) reaches the loop as a `cancelled` event.
bool cancels(asio::cancellation_type t)
{
    return (t & (asio::cancellation_type::terminal | asio::cancellation_type::partial)) != asio::cancellation_type::none;
}

}  // namespace

void lock_object::handle(event& e)
{
    follow_up f;
    std::optional<event> late;
    std::optional<follow_up> late_f;
    {
        std::lock_guard lk(m_);
        const auto now = clock_->now();
        // Our node past its own loss bound (Redis: the renewal's timer; ZooKeeper: the lost
        // policy's, when the session may have expired; late on a busy event loop, neither has
        // reported it yet) is lost first, not handed to another task of ours nor reentered
        // (tests/sim: sim_redis's multi-lock seed 2028 was handed a member past its bound).
        if ((e.what == event::kind::released || e.what == event::kind::acquire) && node_ && !node_->ended() &&
            backend->past_bound(*node_, opts)) {
            late.emplace(event::kind::lost);
            late->ns = node_;
            step(*late, late_f.emplace(), now);
        }
        step(e, f, now);
    }
    if (late) {
        if (late->last)
            backend->log(log_level::warn, "lock " + late->ns->node + " lost: past its loss bound (Redis: the last confirmed "
                                          "renewal + TTL - safety margin; ZooKeeper: when the session may have expired) "
                                          "before the timer that watches it ran (a busy event loop?)");
        finish(*late, *late_f);
        if (late->last)
            backend->lost_past_bound(shared_from_this(), late->ns);
    }
    finish(e, f);
}

void lock_object::step(event& e, follow_up& f, steady_clock::time_point now)
{
    lock_action a;
    using k = event::kind;
    switch (e.what) {
    case k::acquire: {
        const bool holding = recipe.reentrant && machine_.hold_count(e.owner) > 0;
        if (!holding && graph && !(e.cycle = graph->wait_unless_cycle(e.owner, this)).empty()) {
            e.ec = client_errc::would_deadlock;  // refused; nothing was changed
            break;
        }
        if (!holding && !e.immediate.empty()) {
            e.start_immediate = true;  // a downgrade: a node of its own, outside the machine's queue
            break;
        }
        e.id = ++last_waiter_;
        a = machine_.acquire(e.owner, e.id, e.deadline, now, linger_usable());
        break;
    }
    case k::granted:
        a = machine_.granted(e.owner, e.ns->granted_at, e.others_queued);
        break;
    case k::failed:
        a = machine_.failed();
        break;
    case k::released: {
        auto& l = *e.lease;
        if (l.ended_)
            break;  // lost: the loss took its holds out already
        if (graph)
            graph->released(l.owner(), this);  // one hold of the task's (reentrant ones counted)
        a = machine_.released(l.owner(), now);
        e.last = !recipe.reentrant || machine_.hold_count(l.owner()) == 0;
        if (e.last) {
            l.ended_ = true;
            if (auto it = leases_.find(l.owner()); it != leases_.end() && it->second.get() == &l)
                leases_.erase(it);
            l.ns_->holder_ = nullptr;
            e.ns = l.ns_;
        }
        break;
    }
    case k::deadline:
        a = machine_.deadline_fired(now);
        break;
    case k::cancelled:
        a = machine_.cancelled(e.id);
        break;
    case k::lost:
        if (e.ns->given_back_ || e.ns->lost_.exchange(true))
            break;  // already lost, or given back (a lingering node ended): nobody to tell
        e.last = true;  // reported
        if (machine_.lingering() && node_ == e.ns) {
            a = machine_.lost(0);  // nobody holds it: nothing to tell
        } else if (auto h = std::move(e.ns->holder_)) {
            // A lost node blocks nobody: its holder no longer holds (else a waiter, who gets
            // the lock now, could be refused for a cycle through it).
            if (graph)
                for (std::size_t i = 0, n = recipe.reentrant ? machine_.hold_count(h->owner()) : 1; i < n; ++i)
                    graph->released(h->owner(), this);
            h->ended_ = true;
            ++metrics_.losses;
            if (auto it = leases_.find(h->owner()); it != leases_.end() && it->second == h)
                leases_.erase(it);
            a = machine_.lost(h->owner());
            f.lost = std::move(h);
        }
        break;
    case k::others_queued:
        if (node_ == e.ns)  // else not the node the handoff is about (any more)
            a = machine_.others_queued();
        break;
    case k::linger_fired:
        a = machine_.linger_fired(now);
        break;
    case k::end_linger:
        if (machine_.lingering())
            a = machine_.end_linger();
        break;
    }
    carry_out(a, e, f);
}

void lock_object::carry_out(const lock_action& a, event& e, follow_up& f)
{
    using k = lock_action::kind;
    // The timers: cancelled when nobody needs them (a pending wait completes as aborted), armed
    // as the machine asks.
    if (a.disarm_deadline)
        clock_->cancel(engine_timer::deadline);
    if (a.disarm_linger)
        clock_->cancel(engine_timer::linger);
    if (a.arm_deadline)
        arm(engine_timer::deadline, *a.arm_deadline);
    if (a.arm_linger)
        arm(engine_timer::linger, *a.arm_linger);
    auto take = [this](waiter_id id) {
        std::unique_ptr<waiter> w;
        if (auto it = waiters_.find(id); it != waiters_.end()) {
            w = std::move(it->second);
            waiters_.erase(it);
        }
        return w;
    };
    for (auto id : a.timed_out)
        if (auto w = take(id))
            f.timed_out.push_back(std::move(w));
    // Our lingering node goes: another node of ours was granted, someone queued, its window ended.
    if (a.end_linger && node_) {
        f.give_back = std::exchange(node_, nullptr);
        f.give_back->given_back_ = true;
    }
    switch (a.what) {
    case k::none:
        break;
    case k::reenter:
        if (auto it = leases_.find(e.owner); it != leases_.end())
            e.lease_out = it->second;
        else  // the machine and the leases agree: not reached
            e.ec = client_errc::invalid_argument;
        break;
    case k::grant_lingering:
        ++metrics_.linger_grants;
        e.lease_out = make_lease(node_, e.owner);
        break;
    case k::wait: {
        // Behind another task of ours: it hands the node over in memory, with no coroutine (which
        // keeps a waiting task small).
        auto w = std::make_unique<waiter>();
        w->owner = e.owner;
        w->deadline = e.deadline;
        w->started = e.started;
        w->op = std::move(e.op);
        std::weak_ptr<lock_object> weak = shared_from_this();
        w->op->bind_cancellation_with([weak, id = e.id](asio::cancellation_type t) {
            if (!cancels(t))
                return;
            if (auto s = weak.lock()) {
                event c{event::kind::cancelled};
                c.id = id;
                s->handle(c);
            }
        });
        waiters_.emplace(e.id, std::move(w));
        break;
    }
    case k::start_active:
        e.start = true;
        break;
    case k::grant:  // a release hands the node over in memory
        ++metrics_.local_handoffs;
        f.granted = take(a.waiter);
        f.granted_lease = make_lease(node_, a.owner);
        break;
    case k::promote:
        f.promoted = take(a.waiter);
        if (a.batch_time_ended)
            ++metrics_.batch_time_ends;
        break;
    case k::give_back:
    case k::linger:
        break;
    case k::cancelled:
        f.cancelled = take(a.waiter);
        break;
    }
    // A release gives its node back (nobody of ours takes it); a node handed on or lingering
    // stays, and learns who queues behind it (the batch's time bound, lingering), once.
    if (a.give_back && e.ns) {
        f.give_back = e.ns;
        f.give_back->given_back_ = true;
    }
    if (e.what == event::kind::granted) {
        e.lease_out = make_lease(e.ns, e.owner);
        e.lease_out->set_revocation(std::move(e.revocation));
        if (opts.local_handoff)
            node_ = e.ns;
    }
    const bool kept = a.what == k::grant || a.what == k::linger;
    if ((a.watch_queue || kept) && recipe.watch_own_node && opts.local_handoff) {
        auto& ns = kept ? node_ : e.ns;
        if (ns && !ns->queue_watched.exchange(true))
            f.watch_queue = ns;
    }
    if (!machine_.has_node())
        node_ = nullptr;
}

void lock_object::finish(event& e, follow_up& f)
{
    if (f.lost)
        f.lost->set_lost();
    if (e.what == event::kind::released && e.last)
        e.lease->set_released();
    for (auto& w : f.timed_out)
        complete_counted(*this, *w->op, w->started, error_code{}, std::optional<guard>{}, w->owner);
    if (f.cancelled)
        complete_counted(*this, *f.cancelled->op, f.cancelled->started, make_error_code(asio::error::operation_aborted),
                         std::optional<guard>{}, f.cancelled->owner);
    if (f.granted)
        complete_counted(*this, *f.granted->op, f.granted->started, error_code{},
                         std::optional<guard>(access::make_guard(f.granted_lease, f.granted->owner)),
                         f.granted->owner);
    // A promoted waiter queues on the backend on its caller's behalf, cancellable through its slot;
    // one whose deadline has passed ends with a timeout, and the role goes on (bounded by the
    // waiters).
    while (f.promoted) {
        auto w = std::move(f.promoted);
        if (clock_->now() < w->deadline) {
            backend->start(active_task(shared_from_this(), w->owner, w->deadline, std::move(w->op), w->started, true));
            break;
        }
        complete_counted(*this, *w->op, w->started, error_code{}, std::optional<guard>{}, w->owner);
        follow_up next;
        event failed{event::kind::failed};
        {
            std::lock_guard lk(m_);
            carry_out(machine_.failed(), failed, next);
        }
        f.promoted = std::move(next.promoted);
    }
    if (f.watch_queue)
        backend->watch_queue(shared_from_this(), f.watch_queue);
    if (f.give_back) {
        // The release's own node completes the release when it is gone; a lingering one that
        // ended is deleted on its own (a failure is logged and counted).
        const bool released_node = e.what == event::kind::released && f.give_back == e.ns && e.release_op;
        auto op = released_node ? std::move(e.release_op) : make_pooled<op_state<>>([](error_code) {}, ex);
        backend->give_back(shared_from_this(), f.give_back, std::move(op));
    }
    if (e.release_op)  // not the last hold, lost, handed over or lingering: the node stays
        e.release_op->complete({});
}

}  // namespace zkcoro::detail
