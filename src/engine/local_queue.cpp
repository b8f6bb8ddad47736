// The local handoff: tasks of this process wait in memory, FIFO, behind the one task of ours in
// ZooKeeper's queue, with no coroutine each; one timer per lock object serves all their deadlines.
#include "engine/acquisition.hpp"
#include "engine/lock_object.hpp"

#include <zkcoro/detail/access.hpp>

#include <algorithm>

namespace zkcoro::detail {

namespace {

// A waiting local waiter gives up (timeout or cancellation). Lock held. The queue is compacted
// once most of it has given up, so that removal stays O(1) amortised.
void abandon_local(lock_object& s, local_waiter& w)
{
    w.st = local_waiter::status::abandoned;
    if (!s.queue.empty() && s.queue.back().get() == &w) {
        s.queue.pop_back();
        return;
    }
    if (++s.abandoned_in_queue > 16 && s.abandoned_in_queue > s.queue.size() / 2) {
        std::erase_if(s.queue, [](const auto& q) { return q->st != local_waiter::status::waiting; });
        s.abandoned_in_queue = 0;
    }
}

// The waiter gave up (timeout or cancellation) if it is still waiting. Any thread.
void give_up_local(const std::shared_ptr<lock_object>& s, const std::shared_ptr<local_waiter>& w, error_code ec)
{
    {
        std::lock_guard lk(s->m);
        if (w->st != local_waiter::status::waiting)
            return;
        abandon_local(*s, *w);
    }
    complete_counted(*s, *w->op, w->started, ec, std::optional<guard>{}, w->owner);
}

void on_deadline_timer(const std::weak_ptr<lock_object>& weak_s, error_code ec);

// Sets the deadline timer to the earliest deadline. Lock held.
void arm_deadline_timer(const std::shared_ptr<lock_object>& s)
{
    if (s->deadlines.empty() || s->deadlines.front().at >= s->timer_at)
        return;
    if (!s->deadline_timer)
        s->deadline_timer = std::make_unique<asio::steady_timer>(s->ex);
    s->timer_at = s->deadlines.front().at;
    s->deadline_timer->expires_at(s->timer_at);  // a wait still pending completes as aborted
    std::weak_ptr<lock_object> weak_s = s;
    s->deadline_timer->async_wait([weak_s](error_code ec) { on_deadline_timer(weak_s, ec); });
}

// Records a waiter's deadline. Lock held. Entries of waiters that are done are dropped once they
// make up most of the heap, so it stays within twice the waiters (amortised O(log n)).
void add_deadline(const std::shared_ptr<lock_object>& s, const std::shared_ptr<local_waiter>& w)
{
    auto& d = s->deadlines;
    std::size_t waiting = s->queue.size() - std::min(s->queue.size(), s->abandoned_in_queue);
    if (d.size() > 64 && d.size() > 2 * waiting) {
        std::erase_if(d, [](const deadline_entry& e) {
            auto ew = e.w.lock();
            return !ew || ew->st != local_waiter::status::waiting;
        });
        std::make_heap(d.begin(), d.end());
    }
    d.push_back({w->deadline, w});
    std::push_heap(d.begin(), d.end());
    arm_deadline_timer(s);
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
        s->timer_at = steady_clock::time_point::max();
        auto now = steady_clock::now();
        auto& d = s->deadlines;
        // Bounded by the heap's size, which only shrinks here.
        while (!d.empty() && d.front().at <= now) {
            std::pop_heap(d.begin(), d.end());
            auto w = d.back().w.lock();
            d.pop_back();
            if (w && w->st == local_waiter::status::waiting) {
                abandon_local(*s, *w);
                expired.push_back(std::move(w));
            }
        }
        arm_deadline_timer(s);
    }
    for (auto& w : expired)
        complete_counted(*s, *w->op, w->started, error_code{}, std::optional<guard>{}, w->owner);
}

}  // namespace

void enqueue_local(const std::shared_ptr<lock_object>& s, const std::shared_ptr<local_waiter>& w)
{
    s->queue.push_back(w);
    if (w->deadline != steady_clock::time_point::max())
        add_deadline(s, w);
    std::weak_ptr<local_waiter> weak_w = w;
    std::weak_ptr<lock_object> weak_s = s;
    w->op->bind_cancellation_with([weak_s, weak_w](asio::cancellation_type t) {
        if ((t & (asio::cancellation_type::terminal | asio::cancellation_type::partial)) == asio::cancellation_type::none)
            return;
        auto ws = weak_s.lock();
        auto ww = weak_w.lock();
        if (ws && ww)
            give_up_local(ws, ww, asio::error::operation_aborted);
    });
}

std::shared_ptr<local_waiter> pop_waiting(lock_object& s)
{
    while (!s.queue.empty()) {
        auto w = std::move(s.queue.front());
        s.queue.pop_front();
        if (w->st == local_waiter::status::waiting)
            return w;
        if (s.abandoned_in_queue > 0)
            --s.abandoned_in_queue;
    }
    return nullptr;
}

std::shared_ptr<local_waiter> promote_next(lock_object& s)
{
    if (auto w = pop_waiting(s)) {
        w->st = local_waiter::status::promoted;
        return w;
    }
    s.active = false;
    return nullptr;
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
