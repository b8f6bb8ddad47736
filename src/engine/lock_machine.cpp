// The lock object's decisions (see lock_machine.hpp): pure, no I/O, the clock passed in.
#include "engine/lock_machine.hpp"

#include <algorithm>

namespace zkcoro::detail {

namespace {

// The order of the machine's queue (and of its binary searches): by id.
template <class Queued>
bool id_before(const Queued& q, waiter_id v) noexcept
{
    return q.id < v;
}

}  // namespace

std::size_t lock_machine::hold_count(machine_owner owner) const noexcept
{
    auto it = holds_.find(owner);
    return it == holds_.end() ? 0 : it->second;
}

void lock_machine::erase_hold(machine_owner owner)
{
    holds_.erase(owner);
}

bool lock_machine::batch_time_over(time_point now) const noexcept
{
    return cfg_.handoff_batch_time.count() > 0 && others_queued_ && now - granted_at_ >= cfg_.handoff_batch_time;
}

// The first waiter still waiting, taken off the queue. Bounded by the queue's length.
bool lock_machine::pop_waiting(waiter_id& id, machine_owner& owner)
{
    while (!queue_.empty()) {
        const queued q = queue_.front();
        queue_.pop_front();
        if (q.owner != 0) {
            id = q.id;
            owner = q.owner;
            --waiting_;
            return true;
        }
        if (abandoned_ > 0)
            --abandoned_;
    }
    return false;
}

// The queue is in id order: a binary search.
const lock_machine::queued* lock_machine::find_waiting(waiter_id id) const noexcept
{
    auto it = std::lower_bound(queue_.begin(), queue_.end(), id,
                               id_before<queued>);
    return it != queue_.end() && it->id == id && it->owner != 0 ? &*it : nullptr;
}

// Passes the active role to the first waiter, or clears it.
void lock_machine::promote_next(lock_action& a)
{
    waiter_id id = 0;
    machine_owner owner = 0;
    if (pop_waiting(id, owner)) {
        a.what = lock_action::kind::promote;
        a.waiter = id;
        a.owner = owner;
        left(a);
        return;
    }
    active_ = false;
}

// A waiter left the queue (granted, promoted, cancelled). When it was the last, nobody needs the
// deadline timer: it is cancelled now rather than left to fire for nobody, which would keep the
// executor busy (run() from returning) until the longest timeout (issue 40). Only a queue that
// had waiters with a deadline pays for it; the uncontended path never arms the timer. While
// waiters without a deadline remain it stays, and when it fires it is re-armed only to a
// deadline still pending (deadline_fired).
void lock_machine::left(lock_action& a)
{
    if (waiting_ > 0)
        return;
    deadlines_.clear();  // all of them are of waiters that are gone
    if (timer_at_ == never)
        return;
    timer_at_ = never;
    a.disarm_deadline = true;
}

// The node goes (given back, handed on with a promotion, lost, its lingering ended): the linger
// timer, armed for it, has nothing left to end. A node re-granted from lingering keeps it (the
// burst of re-grants costs no timer operation).
void lock_machine::node_gone(lock_action& a)
{
    node_ = false;
    if (!linger_armed_)
        return;
    linger_armed_ = false;
    a.disarm_linger = true;
}

// A waiter (still waiting) gives up. The queue is compacted once most of it has given up (O(1)
// amortised).
void lock_machine::abandon(waiter_id id)
{
    auto* q = const_cast<queued*>(find_waiting(id));
    if (!q)
        return;
    --waiting_;
    if (q == &queue_.back()) {
        queue_.pop_back();
        return;
    }
    q->owner = 0;
    if (++abandoned_ > 16 && abandoned_ > queue_.size() / 2) {
        std::erase_if(queue_, [](const queued& e) { return e.owner == 0; });
        abandoned_ = 0;
    }
}

void lock_machine::rearm(lock_action& a)
{
    if (deadlines_.empty() || deadlines_.front().at >= timer_at_)
        return;
    timer_at_ = deadlines_.front().at;
    a.arm_deadline = timer_at_;
}

// Entries of waiters that are done are dropped once they make up most of the heap.
void lock_machine::add_deadline(waiter_id id, time_point at, lock_action& a)
{
    if (deadlines_.size() > 64 && deadlines_.size() > 2 * waiting_) {
        std::erase_if(deadlines_, [this](const deadline_entry& e) { return !is_waiting(e.id); });
        std::make_heap(deadlines_.begin(), deadlines_.end());
    }
    deadlines_.push_back({at, id});
    std::push_heap(deadlines_.begin(), deadlines_.end());
    rearm(a);
}

lock_action lock_machine::acquire(machine_owner owner, waiter_id id, time_point deadline, time_point now,
                                  bool linger_usable)
{
    (void)now;
    lock_action a;
    if (cfg_.reentrant) {
        auto it = holds_.find(owner);
        if (it != holds_.end() && it->second > 0) {
            ++it->second;
            a.what = lock_action::kind::reenter;
            return a;
        }
    }
    if (!active_ && lingering_ && linger_usable && !others_queued_ &&
        handoffs_ < cfg_.max_handoffs) {
        lingering_ = false;
        ++handoffs_;
        active_ = true;
        if (cfg_.reentrant)
            holds_[owner] = 1;
        a.what = lock_action::kind::grant_lingering;
        return a;
    }
    if (active_ && cfg_.local_handoff) {
        if (queue_.empty() || queue_.back().id < id)
            queue_.push_back({id, owner});
        else  // numbered out of order by the caller: kept in order all the same
            queue_.insert(std::lower_bound(queue_.begin(), queue_.end(), id,
                                           id_before<queued>),
                          queued{id, owner});
        ++waiting_;
        if (deadline != never)
            add_deadline(id, deadline, a);
        a.what = lock_action::kind::wait;
        return a;
    }
    active_ = true;
    a.what = lock_action::kind::start_active;
    return a;
}

lock_action lock_machine::granted(machine_owner owner, time_point now, bool others_queued)
{
    lock_action a;
    if (cfg_.reentrant)
        holds_[owner] = 1;
    if (!cfg_.local_handoff)
        return a;
    if (lingering_) {  // another node of ours lingered: it goes (ours queued behind it)
        lingering_ = false;
        a.end_linger = true;
    }
    node_gone(a);  // the other node's linger timer, if armed
    node_ = true;
    handoffs_ = 0;
    granted_at_ = now;
    others_queued_ = others_queued;
    a.watch_queue = waiting_ > 0;
    return a;
}

lock_action lock_machine::failed()
{
    lock_action a;
    promote_next(a);
    return a;
}

lock_action lock_machine::released(machine_owner owner, time_point now)
{
    lock_action a;
    if (cfg_.reentrant) {
        auto it = holds_.find(owner);
        if (it == holds_.end() || it->second == 0)
            return a;
        if (--it->second > 0)
            return a;
        holds_.erase(it);
    }
    if (!cfg_.local_handoff) {
        promote_next(a);
        a.give_back = true;
        if (a.what == lock_action::kind::none)
            a.what = lock_action::kind::give_back;
        return a;
    }
    if (!node_)
        return a;  // lost: the loss handed the role on already
    const bool over = batch_time_over(now);
    waiter_id id = 0;
    machine_owner next = 0;
    if (handoffs_ < cfg_.max_handoffs && !over && pop_waiting(id, next)) {
        ++handoffs_;
        if (cfg_.reentrant)
            holds_[next] = 1;
        a.what = lock_action::kind::grant;
        a.waiter = id;
        a.owner = next;
        left(a);
        return a;
    }
    promote_next(a);
    if (a.what == lock_action::kind::promote) {
        a.batch_time_ended = over;
        a.give_back = true;
        node_gone(a);
        return a;
    }
    if (cfg_.linger.count() > 0 && !others_queued_ && handoffs_ < cfg_.max_handoffs && !lingering_) {
        lingering_ = true;
        linger_until_ = now + cfg_.linger;
        if (!linger_armed_) {
            linger_armed_ = true;
            a.arm_linger = linger_until_;
        }
        a.what = lock_action::kind::linger;
        return a;
    }
    node_gone(a);
    a.what = lock_action::kind::give_back;
    a.give_back = true;
    return a;
}

lock_action lock_machine::deadline_fired(time_point now)
{
    lock_action a;
    timer_at_ = never;
    // Bounded by the heap's size, which only shrinks here.
    while (!deadlines_.empty() && deadlines_.front().at <= now) {
        std::pop_heap(deadlines_.begin(), deadlines_.end());
        waiter_id id = deadlines_.back().id;
        deadlines_.pop_back();
        if (is_waiting(id)) {
            abandon(id);
            a.timed_out.push_back(id);
        }
    }
    // The waiters gone since (granted, cancelled) left their entries: the timer is re-armed only
    // for a deadline still pending, else left unarmed.
    if (waiting_ == 0)
        deadlines_.clear();
    while (!deadlines_.empty() && !is_waiting(deadlines_.front().id)) {
        std::pop_heap(deadlines_.begin(), deadlines_.end());
        deadlines_.pop_back();
    }
    rearm(a);
    return a;
}

lock_action lock_machine::cancelled(waiter_id id)
{
    lock_action a;
    if (!is_waiting(id))
        return a;
    abandon(id);
    a.what = lock_action::kind::cancelled;
    a.waiter = id;
    left(a);
    return a;
}

lock_action lock_machine::lost(machine_owner holder)
{
    lock_action a;
    if (holder == 0) {
        if (lingering_) {  // nobody holds it: nothing to tell, nothing to give back
            lingering_ = false;
            node_gone(a);
        }
        return a;
    }
    if (cfg_.reentrant)
        erase_hold(holder);
    if (cfg_.local_handoff) {
        if (!node_)
            return a;
        node_gone(a);
    }
    promote_next(a);
    return a;
}

lock_action lock_machine::others_queued()
{
    lock_action a;
    if (node_)
        others_queued_ = true;
    if (lingering_) {
        lingering_ = false;
        node_gone(a);
        a.end_linger = true;
    }
    return a;
}

lock_action lock_machine::linger_fired(time_point now)
{
    lock_action a;
    linger_armed_ = false;
    if (!lingering_)
        return a;
    if (now < linger_until_) {  // re-granted and lingering again since: a later end
        linger_armed_ = true;
        a.arm_linger = linger_until_;
        return a;
    }
    lingering_ = false;
    node_ = false;
    a.end_linger = true;
    return a;
}

lock_action lock_machine::end_linger()
{
    lock_action a;
    if (lingering_) {
        lingering_ = false;
        node_gone(a);
        a.end_linger = true;
    }
    return a;
}

}  // namespace zkcoro::detail
