// Who queues behind the node this process holds, and what follows from it: the time bound of a
// batch of in-process handoffs, and lingering (mutex_options::linger), where the node outlives
// its last release until a contender queues or the window ends.
#include "engine/lock_object.hpp"

#include <zkcoro/detail/access.hpp>

#include <boost/asio/post.hpp>

#include <utility>

namespace zkcoro::detail {

namespace {

void on_linger_timer(const std::weak_ptr<lock_object>& weak_s, error_code ec);

}  // namespace

// The machine arms the linger timer only when it is not armed already (to an earlier moment: it
// then re-arms itself when it fires), so that a burst of re-grants costs no timer operation.
void arm_linger_timer(const std::shared_ptr<lock_object>& s, const lock_action& a)
{
    if (!a.arm_linger)
        return;
    if (!s->linger_timer)
        s->linger_timer = std::make_unique<asio::steady_timer>(s->ex);
    s->linger_timer->expires_at(*a.arm_linger);
    std::weak_ptr<lock_object> weak_s = s;
    s->linger_timer->async_wait([weak_s](error_code ec) { on_linger_timer(weak_s, ec); });
}

std::shared_ptr<node_state> ended_linger(lock_object& s, const lock_action& a)
{
    disarm_timers(s, a);  // the node gone: its linger timer with it
    if (!a.end_linger)
        return nullptr;
    return std::exchange(s.lingering, nullptr);
}

namespace {

// Deletes a node that nobody holds any more; a failure is logged and counted.
void delete_unheld(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns)
{
    s->backend->give_back(s, ns, make_pooled<op_state<>>([](error_code) {}, s->ex));
}

void on_linger_timer(const std::weak_ptr<lock_object>& weak_s, error_code ec)
{
    if (ec)
        return;  // cancelled: the node went, or the object is being destroyed
    auto s = weak_s.lock();
    if (!s)
        return;
    std::shared_ptr<node_state> gone;
    {
        std::lock_guard lk(s->m);
        auto a = s->machine(lk).linger_fired(steady_clock::now());
        arm_linger_timer(s, a);  // re-granted and lingering again since: a later end
        gone = ended_linger(*s, a);
    }
    if (gone)
        delete_unheld(s, gone);
}

}  // namespace

void queue_changed(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns)
{
    std::shared_ptr<node_state> gone;
    {
        std::lock_guard lk(s->m);
        if (s->handoff_node.lock() != ns)
            return;  // not the node the handoff is about (any more)
        gone = ended_linger(*s, s->machine(lk).others_queued());
    }
    if (gone)
        delete_unheld(s, gone);
}

void start_linger(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns, const lock_action& a)
{
    s->lingering = ns;
    arm_linger_timer(s, a);
}

bool linger_usable(const lock_object& s)
{
    // Only while the backend still holds it (ZooKeeper: connected in the session that made the
    // node): otherwise the acquire queues, and its node ends the lingering (or the lost policy has).
    auto& ns = s.lingering;
    return ns && !ns->lost && s.backend->still_held(*ns);
}

std::shared_ptr<object_lease> take_lingering(const std::shared_ptr<lock_object>& s, owner_id owner)
{
    auto ns = std::exchange(s->lingering, nullptr);
    ++ns->handoffs;
    ++s->metrics.linger_grants;
    auto h = std::make_shared<object_lease>(s, ns, owner);
    ns->current = h;
    s->holds[owner] = h;
    return h;
}

void end_linger(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns)
{
    std::shared_ptr<node_state> gone;
    {
        std::lock_guard lk(s->m);
        if (!s->lingering || (ns && s->lingering != ns))
            return;
        gone = ended_linger(*s, s->machine(lk).end_linger());
    }
    if (gone)
        delete_unheld(s, gone);
}

bool record_grant(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns,
                  const std::shared_ptr<object_lease>& h, bool others_queued)
{
    std::shared_ptr<node_state> gone;
    bool waiters = false;
    {
        std::lock_guard lk(s->m);
        ns->current = h;
        if (s->recipe.reentrant)
            s->holds[h->owner()] = h;
        auto a = s->machine(lk).granted(h->owner(), ns->granted_at, others_queued);
        if (s->opts.local_handoff)
            s->handoff_node = ns;
        gone = ended_linger(*s, a);
        waiters = a.watch_queue;
    }
    if (gone)
        delete_unheld(s, gone);
    return waiters;
}

}  // namespace zkcoro::detail
