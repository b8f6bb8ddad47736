// A lock object: how an acquisition is decided (reentrant, wait in memory, or queue with the
// backend: zookeeper/, redis/), and how a release hands the node on or gives it back.
#include "engine/lock_object.hpp"

#include "engine/acquisition.hpp"

#include <zkcoro/detail/access.hpp>

#include <fmt/format.h>

namespace zkcoro::detail {

void hand_on(const std::shared_ptr<lock_object>& s)
{
    std::shared_ptr<local_waiter> next;
    {
        std::lock_guard lk(s->m);
        auto a = s->machine(lk).failed();
        disarm_timers(*s, a);
        if (a.what == lock_action::kind::promote)
            next = take_waiter(*s, a.waiter, local_waiter::status::promoted);
    }
    notify(s, next);
}

bool mark_lost(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns)
{
    if (ns->lost.exchange(true) || ns->released)
        return false;  // already lost, or released (a lingering node ended): nobody to tell
    std::shared_ptr<object_lease> h;
    std::shared_ptr<local_waiter> next;
    {
        std::lock_guard lk(s->m);
        if (s->lingering == ns) {
            s->lingering = nullptr;  // nobody holds it: nothing to tell
            disarm_timers(*s, s->machine(lk).lost(0));
        }
        h = std::move(ns->current);
        if (h) {
            // A lost node blocks nobody: its holder no longer holds (else a waiter, who gets the
            // lock now, could be refused for a cycle through it).
            if (s->graph && !h->unrecorded) {
                for (std::size_t i = 0; i < h->count; ++i)
                    s->graph->released(h->owner(), s.get());
                h->unrecorded = true;
            }
            ++s->metrics.losses;
            auto it = s->holds.find(h->owner());
            if (it != s->holds.end() && it->second == h)
                s->holds.erase(it);
            auto a = s->machine(lk).lost(h->owner());
            disarm_timers(*s, a);
            if (a.what == lock_action::kind::promote)
                next = take_waiter(*s, a.waiter, local_waiter::status::promoted);
        }
    }
    if (h)
        h->set_lost();
    notify(s, next);
    return true;
}

void lock_object::configure_machine()
{
    lock_machine_config c;
    c.reentrant = recipe.reentrant;
    c.local_handoff = opts.local_handoff;
    c.max_handoffs = max_handoffs;
    c.handoff_batch_time = opts.handoff_batch_time;
    c.linger = opts.linger;
    machine_ = lock_machine(c);
}

lock_object::lock_object(std::shared_ptr<lock_backend> b, asio::any_io_executor e, std::string resource,
                         mutex_options o, recipe_params r)
    : backend(std::move(b)), ex(std::move(e)), path(std::move(resource)), opts(std::move(o)), recipe(std::move(r))
{
    data = opts.data;
    // A revocation request names one node, so one task: every task of a revocable lock queues with
    // a node of its own.
    if (!recipe.local_handoff_allowed || !recipe.reentrant || opts.revocable)
        opts.local_handoff = false;
    // Lingering is for mutexes: not for a read-write lock's sides (their hooks look at the other
    // side), nor for a semaphore's parts, nor where nothing watches who queues behind the node.
    if (!opts.local_handoff || !recipe.watch_own_node || recipe.precheck || recipe.immediate_node)
        opts.linger = std::chrono::milliseconds{0};
    configure_machine();
}

void lock_object::participants(std::shared_ptr<op_state<std::vector<participant>>> op)
{
    backend->participants(shared_from_this(), std::move(op));
}

// Decided here, in this order: the argument, the recipe's hooks, then (under the lock) the
// machine and the wait-for graph; completed or started once, at the end. (One way through this
// file, then out of it: the walk of a mutex acquisition visits each file once.)
void lock_object::acquire(owner_id owner, steady_clock::time_point deadline,
                          std::shared_ptr<op_state<std::optional<guard>>> op)
{
    auto self = shared_from_this();
    const auto started = steady_clock::now();
    error_code ec;
    if (owner == 0)
        ec = client_errc::invalid_argument;
    else if (path_error)
        ec = path_error;
    // The hooks look at the other side of a read-write lock: they run without our lock held.
    std::string immediate;
    if (!ec && (recipe.precheck || recipe.immediate_node) && held_count(owner) == 0) {
        if (recipe.precheck)
            ec = recipe.precheck(owner);
        if (!ec && recipe.immediate_node)
            if (auto name = recipe.immediate_node(owner))
                immediate = std::move(*name);
    }
    std::shared_ptr<object_lease> reentered;
    std::vector<owner_id> cycle;  // detect_deadlocks: the wait refused, the tasks it would close
    if (!ec) {
        std::lock_guard lk(m);
        auto& fsm = machine(lk);
        auto it = holds.find(owner);
        const bool holding = recipe.reentrant && fsm.hold_count(owner) > 0 && it != holds.end();
        if (!holding && graph && !(cycle = graph->wait_unless_cycle(owner, this)).empty()) {
            // Refused below, outside the lock; nothing was changed.
            ec = client_errc::would_deadlock;
        } else if (!holding && !immediate.empty()) {
            // A downgrade: granted with a node of its own, outside the machine's queue.
        } else {
            const waiter_id id = ++last_waiter;
            auto a = fsm.acquire(owner, id, deadline, started, linger_usable(*this));
            switch (a.what) {
            case lock_action::kind::reenter:
                if (it == holds.end()) {  // the machine and holds agree: not reached
                    ec = client_errc::invalid_argument;
                    break;
                }
                ++it->second->count;
                reentered = it->second;
                break;
            case lock_action::kind::grant_lingering:
                // Our node lingers: granted at once, with no request.
                reentered = take_lingering(self, owner);
                break;
            case lock_action::kind::wait: {
                // Behind another task of ours: wait for it to hand the node over in memory, with
                // no coroutine (which keeps a waiting task small).
                auto w = std::make_shared<local_waiter>();
                w->id = id;
                w->owner = owner;
                w->op = op;
                w->deadline = deadline;
                w->started = started;
                enqueue_local(self, w, a);
                return;
            }
            default:  // start_active
                break;
            }
        }
    }
    if (!cycle.empty()) {
        std::string tasks;
        for (auto t : cycle)
            tasks += fmt::format("{}{:#x}", tasks.empty() ? "" : " -> ", t);
        backend->log(log_level::warn,
                    fmt::format("lock {}: task {:#x} would deadlock: the lock's holder waits, through the tasks "
                                "{}, for a lock task {:#x} holds; refused with would_deadlock",
                                path, owner, tasks, owner));
    }
    if (ec || reentered) {
        std::optional<guard> g;
        if (!ec)
            g = access::make_guard(reentered, owner);
        return complete_counted(*this, *op, started, ec, std::move(g), owner);
    }
    if (!immediate.empty())
        return backend->start_immediate(self, owner, std::move(immediate), std::move(op), started);
    backend->start(self, owner, deadline, std::move(op), started, false);  // as start_active
}

void start_active(const std::shared_ptr<lock_object>& s, owner_id owner, steady_clock::time_point deadline,
                  std::shared_ptr<op_state<std::optional<guard>>> op, steady_clock::time_point started, bool promoted)
{
    s->backend->start(s, owner, deadline, std::move(op), started, promoted);
}

std::optional<std::string> lock_object::held_node(owner_id owner)
{
    std::lock_guard lk(m);
    auto it = holds.find(owner);
    if (it == holds.end() || it->second->lost() || it->second->released)
        return std::nullopt;
    return it->second->node()->node;
}

std::size_t lock_object::held_count(owner_id owner)
{
    std::lock_guard lk(m);
    auto it = holds.find(owner);
    return it == holds.end() || it->second->lost() ? 0 : it->second->count;
}

object_lease::object_lease(std::shared_ptr<lock_object> obj, std::shared_ptr<node_state> ns, owner_id owner)
    : lease(obj->ex, ns->fence_base * token_scale + ns->handoffs, owner), obj_(std::move(obj)),
      ns_(std::move(ns))
{
}

// A lock on another backend (Redis) has no ZooKeeper node to check: no fenced transaction there.
client* object_lease::zookeeper() noexcept { return obj_->backend->zookeeper(); }

// Ends one acquisition. The last release of an owner's reentrant acquisitions hands the node to
// the next local waiter (unless the batch of handoffs is used up) or deletes it.
void object_lease::release(any_handler<void(error_code)> handler)
{
    auto& s = *obj_;
    auto op = make_pooled<op_state<>>(std::move(handler), s.ex);
    std::shared_ptr<local_waiter> next;
    bool last = false;
    bool kept = false;         // handed to a local waiter, or lingering: the node stays
    bool list_queue = false;   // learn who queues behind the node (batch bound, lingering)
    {
        std::lock_guard lk(s.m);
        if (count > 0 && s.graph && !unrecorded)
            s.graph->released(owner(), &s);  // one hold of the task's (reentrant ones counted)
        // The machine counts the holds of a lease that is still the node's (not lost).
        const bool counted = count > 0 && !released && !lost() && ns_->current.get() == this;
        auto a = counted ? s.machine(lk).released(owner(), steady_clock::now()) : lock_action{};
        disarm_timers(s, a);
        if (count > 0 && --count == 0 && !released) {
            released = true;
            last = true;
            auto it = s.holds.find(owner());
            if (it != s.holds.end() && it->second.get() == this)
                s.holds.erase(it);
            if (counted) {
                ns_->current = nullptr;
                switch (a.what) {
                case lock_action::kind::grant: {
                    ++ns_->handoffs;
                    ++s.metrics.local_handoffs;
                    next = take_waiter(s, a.waiter, local_waiter::status::granted);
                    auto h2 = make_pooled<object_lease>(obj_, ns_, a.owner);
                    ns_->current = h2;
                    s.holds[a.owner] = h2;
                    next->grant = h2;
                    kept = true;
                    break;
                }
                case lock_action::kind::promote:
                    next = take_waiter(s, a.waiter, local_waiter::status::promoted);
                    if (a.batch_time_ended)
                        ++s.metrics.batch_time_ends;
                    break;
                case lock_action::kind::linger:
                    start_linger(obj_, ns_, a);
                    kept = true;
                    break;
                default:  // give_back
                    break;
                }
                // Listing the queue is for ZooKeeper's mutexes (watch_own_node), not for parts
                // that are held one round trip, nor for a lock whose queue is elsewhere.
                list_queue = kept && s.recipe.watch_own_node && !ns_->queue_watched.exchange(true);
            }
        }
    }
    if (last)
        set_released();
    if (!last || lost())
        return void(op->complete({}));
    notify(obj_, next);
    if (list_queue)
        s.backend->watch_queue(obj_, ns_);
    if (kept)
        return void(op->complete({}));  // handed over or lingering: the node stays
    s.backend->give_back(obj_, ns_, std::move(op));
}

}  // namespace zkcoro::detail
