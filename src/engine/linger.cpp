// Who queues behind the node this process holds, and what follows from it: the time bound of a
// batch of in-process handoffs, and lingering (mutex_options::linger), where the node outlives
// its last release until a contender queues or the window ends.
#include "engine/lock_object.hpp"

#include <zkcoro/detail/access.hpp>

#include <boost/asio/post.hpp>

namespace zkcoro::detail {

namespace {

void on_linger_timer(const std::weak_ptr<lock_object>& weak_s, error_code ec);

// Sets the linger timer to linger_until unless it is already set (to an earlier moment: it then
// re-arms itself when it fires). So a burst of re-grants costs no timer operation. Lock held.
void arm_linger_timer(const std::shared_ptr<lock_object>& s)
{
    if (s->linger_timer_armed)
        return;
    if (!s->linger_timer)
        s->linger_timer = std::make_unique<asio::steady_timer>(s->zk.get_executor());
    s->linger_timer_armed = true;
    s->linger_timer->expires_at(s->linger_until);
    std::weak_ptr<lock_object> weak_s = s;
    s->linger_timer->async_wait([weak_s](error_code ec) { on_linger_timer(weak_s, ec); });
}

void on_linger_timer(const std::weak_ptr<lock_object>& weak_s, error_code ec)
{
    auto s = weak_s.lock();
    if (!s)
        return;
    {
        std::lock_guard lk(s->m);
        s->linger_timer_armed = false;
        if (ec || !s->lingering)
            return;
        if (steady_clock::now() < s->linger_until)
            return arm_linger_timer(s);  // re-granted and lingering again since: a later end
    }
    end_linger(s);
}

// Deletes a node that nobody holds any more; a failure is logged and counted.
void delete_unheld(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns)
{
    delete_released_node(s, ns, std::make_shared<op_state<>>([](error_code) {}, s->zk.get_executor()));
}

}  // namespace

void watch_queue(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns)
{
    s->zk.async_get_children(s->path, leave_watch, [s, ns](error_code ec, children_result r) {
        if (ns->lost || ns->released)
            return;
        // A failure counts as "someone may be queued": the batch is bounded, lingering ends.
        if (ec || r.children.size() != 1)
            return queue_changed(s, ns);
        r.watch.async_wait([s, ns](error_code, watch_event) {
            if (!ns->lost && !ns->released)
                queue_changed(s, ns);
        });
    });
}

void queue_changed(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns)
{
    ns->others_queued = true;
    end_linger(s, ns);
}

bool batch_time_over(const lock_object& s, const node_state& ns)
{
    return s.opts.handoff_batch_time.count() > 0 && ns.others_queued &&
           steady_clock::now() - ns.granted_at >= s.opts.handoff_batch_time;
}

bool start_linger(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns)
{
    if (s->opts.linger.count() <= 0 || !s->opts.local_handoff || ns->others_queued || ns->lost ||
        ns->handoffs >= max_handoffs || s->lingering)
        return false;
    s->lingering = ns;
    s->linger_until = steady_clock::now() + s->opts.linger;
    arm_linger_timer(s);
    return true;
}

std::shared_ptr<object_lease> take_lingering(const std::shared_ptr<lock_object>& s, owner_id owner)
{
    // Only while connected in the session that made the node: otherwise the acquire queues, and
    // its node ends the lingering (or the lost policy has).
    auto ns = s->lingering;
    if (!ns || ns->lost || ns->others_queued || ns->handoffs >= max_handoffs ||
        s->zk.session_generation() != ns->generation || s->zk.state() != session_state::connected)
        return nullptr;
    s->lingering = nullptr;
    ++ns->handoffs;
    ++s->metrics.linger_grants;
    auto h = std::make_shared<object_lease>(s, ns, owner);
    ns->current = h;
    s->holds[owner] = h;
    s->active = true;
    return h;
}

void end_linger(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns)
{
    std::shared_ptr<node_state> gone;
    {
        std::lock_guard lk(s->m);
        if (!s->lingering || (ns && s->lingering != ns))
            return;
        gone = std::move(s->lingering);
        s->lingering = nullptr;
    }
    delete_unheld(s, gone);
}

}  // namespace zkcoro::detail
