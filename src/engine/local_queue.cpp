// The local handoff: tasks of this process wait in memory, FIFO, behind the one task of ours in
// ZooKeeper's queue, with no coroutine each; one timer per lock object serves all their deadlines
// (armed while they wait, cancelled when the last one leaves).
#include "engine/acquisition.hpp"
#include "engine/lock_object.hpp"

#include <zkcoro/detail/access.hpp>

#include <algorithm>

namespace zkcoro::detail {

namespace {

// The waiter gave up (cancellation) if it is still waiting. Any thread.
void give_up_local(const std::shared_ptr<lock_object>& s, waiter_id id, error_code ec)
{
    std::shared_ptr<local_waiter> w;
    {
        std::lock_guard lk(s->m);
        auto a = s->machine(lk).cancelled(id);
        if (a.what != lock_action::kind::cancelled)
            return;
        disarm_timers(*s, a);  // the last waiter gone
        w = take_waiter(*s, id, local_waiter::status::waiting);
    }
    if (w)
        complete_counted(*s, *w->op, w->started, ec, std::optional<guard>{}, w->owner);
}

// Times out every waiter whose deadline has come, then sets the timer for the next one.
void on_deadline_timer(const std::weak_ptr<lock_object>& weak_s, error_code ec)
{
    if (ec)
        return;  // re-armed or destroyed
    auto s = weak_s.lock();
    if (!s)
        return;
    std::vector<std::shared_ptr<local_waiter>> expired;
    {
        std::lock_guard lk(s->m);
        auto a = s->machine(lk).deadline_fired(steady_clock::now());
        for (auto id : a.timed_out)
            if (auto w = take_waiter(*s, id, local_waiter::status::waiting))
                expired.push_back(std::move(w));
        arm_deadline_timer(s, a);
    }
    for (auto& w : expired)
        complete_counted(*s, *w->op, w->started, error_code{}, std::optional<guard>{}, w->owner);
}

}  // namespace

void disarm_timers(lock_object& s, const lock_action& a)
{
    // A wait still pending completes as aborted (its handler returns).
    if (a.disarm_deadline && s.deadline_timer)
        s.deadline_timer->cancel();
    if (a.disarm_linger && s.linger_timer)
        s.linger_timer->cancel();
}

void arm_deadline_timer(const std::shared_ptr<lock_object>& s, const lock_action& a)
{
    if (!a.arm_deadline)
        return;
    if (!s->deadline_timer)
        s->deadline_timer = std::make_unique<asio::steady_timer>(s->ex);
    s->deadline_timer->expires_at(*a.arm_deadline);  // a wait still pending completes as aborted
    std::weak_ptr<lock_object> weak_s = s;
    s->deadline_timer->async_wait([weak_s](error_code ec) { on_deadline_timer(weak_s, ec); });
}

// The order of lock_object::waiters (and of its binary searches): by id.
static bool waiter_before(const std::pair<waiter_id, std::shared_ptr<local_waiter>>& e, waiter_id v) noexcept
{
    return e.first < v;
}

void enqueue_local(const std::shared_ptr<lock_object>& s, const std::shared_ptr<local_waiter>& w,
                   const lock_action& a)
{
    auto& q = s->waiters;
    if (q.empty() || q.back().first < w->id)
        q.emplace_back(w->id, w);
    else  // not reached: ids increase; kept in order all the same
        q.emplace(std::lower_bound(q.begin(), q.end(), w->id, waiter_before),
                  w->id, w);
    arm_deadline_timer(s, a);
    std::weak_ptr<lock_object> weak_s = s;
    const waiter_id id = w->id;
    w->op->bind_cancellation_with([weak_s, id](asio::cancellation_type t) {
        if ((t & (asio::cancellation_type::terminal | asio::cancellation_type::partial)) == asio::cancellation_type::none)
            return;
        if (auto ws = weak_s.lock())
            give_up_local(ws, id, asio::error::operation_aborted);
    });
}

std::shared_ptr<local_waiter> take_waiter(lock_object& s, waiter_id id, local_waiter::status st)
{
    auto& ws = s.waiters;
    auto it = std::lower_bound(ws.begin(), ws.end(), id, waiter_before);
    if (it == ws.end() || it->first != id || !it->second)
        return nullptr;
    auto w = std::move(it->second);
    w->st = st;
    // Emptied entries at the ends go at once (the FIFO's front, the usual case); inside, once they
    // are most of the deque (O(1) amortised).
    const bool inside = it != ws.begin() && std::next(it) != ws.end();
    while (!ws.empty() && !ws.front().second)
        ws.pop_front();
    while (!ws.empty() && !ws.back().second)
        ws.pop_back();
    if (inside && ++s.waiters_taken > 16 && s.waiters_taken > ws.size() / 2) {
        std::erase_if(ws, [](const auto& e) { return !e.second; });
        s.waiters_taken = 0;
    }
    if (ws.empty())
        s.waiters_taken = 0;
    return w;
}

void notify(const std::shared_ptr<lock_object>& s, const std::shared_ptr<local_waiter>& w)
{
    if (!w)
        return;
    if (w->st == local_waiter::status::granted)
        return complete_counted(*s, *w->op, w->started, error_code{},
                                std::optional<guard>(access::make_guard(w->grant, w->owner)), w->owner);
    // Promoted: queue on the server on the caller's behalf, cancellable through its slot.
    start_active(s, w->owner, w->deadline, w->op, w->started, true);
}

}  // namespace zkcoro::detail
