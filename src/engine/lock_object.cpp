// A lock object: its entry points (an acquisition, a release, what a backend reports), each of
// which goes through the one loop (engine/lock_loop.cpp), and the active task a backend reports
// through.
#include "engine/lock_object.hpp"

#include "engine/acquisition.hpp"

#include <zkcoro/detail/access.hpp>

#include <fmt/format.h>

namespace zkcoro::detail {

namespace {

lock_machine_config machine_config(const recipe_params& recipe, const mutex_options& opts)
{
    lock_machine_config c;
    c.reentrant = recipe.reentrant;
    c.local_handoff = opts.local_handoff;
    c.max_handoffs = max_handoffs;
    c.handoff_batch_time = opts.handoff_batch_time;
    c.linger = opts.linger;
    return c;
}

mutex_options adjusted(mutex_options opts, const recipe_params& recipe)
{
    // A revocation request names one node, so one task: every task of a revocable lock queues with
    // a node of its own.
    if (!recipe.local_handoff_allowed || !recipe.reentrant || opts.revocable)
        opts.local_handoff = false;
    // Lingering is for mutexes: not for a read-write lock's sides (their hooks look at the other
    // side), nor for a semaphore's parts, nor where nothing watches who queues behind the node.
    if (!opts.local_handoff || !recipe.watch_own_node || recipe.precheck || recipe.immediate_node)
        opts.linger = std::chrono::milliseconds{0};
    return opts;
}

}  // namespace

lock_object::lock_object(std::shared_ptr<lock_backend> b, asio::any_io_executor e, std::string resource,
                         mutex_options o, recipe_params r, std::unique_ptr<engine_clock> clock)
    : backend(std::move(b)), ex(std::move(e)), path(std::move(resource)), opts(adjusted(std::move(o), r)),
      recipe(std::move(r)), clock_(clock ? std::move(clock) : make_steady_clock(ex)),
      machine_(machine_config(recipe, opts))
{
    data = opts.data;
}

lock_object::~lock_object() = default;

void lock_object::participants(std::shared_ptr<op_state<std::vector<participant>>> op)
{
    backend->participants(shared_from_this(), std::move(op));
}

// Decided here, in this order: the argument, the recipe's hooks, then the loop (the machine and
// the wait-for graph); completed or started once, at the end. (One way through this file, then
// out of it: the walk of a mutex acquisition visits each file once.)
void lock_object::acquire(owner_id owner, steady_clock::time_point deadline,
                          std::shared_ptr<op_state<std::optional<guard>>> op)
{
    event e{event::kind::acquire};
    e.owner = owner;
    e.deadline = deadline;
    e.started = clock_->now();
    e.op = op;
    if (owner == 0)
        e.ec = client_errc::invalid_argument;
    else if (path_error)
        e.ec = path_error;
    // The hooks look at the other side of a read-write lock: they run without our lock held.
    if (!e.ec && (recipe.precheck || recipe.immediate_node) && held_count(owner) == 0) {
        if (recipe.precheck)
            e.ec = recipe.precheck(owner);
        if (!e.ec && recipe.immediate_node)
            if (auto name = recipe.immediate_node(owner))
                e.immediate = std::move(*name);
    }
    if (!e.ec)
        handle(e);
    if (!e.cycle.empty()) {
        std::string tasks;
        for (auto t : e.cycle)
            tasks += fmt::format("{}{:#x}", tasks.empty() ? "" : " -> ", t);
        backend->log(log_level::warn,
                     fmt::format("lock {}: task {:#x} would deadlock: the lock's holder waits, through the tasks "
                                 "{}, for a lock task {:#x} holds; refused with would_deadlock",
                                 path, owner, tasks, owner));
    }
    if (e.ec || e.lease_out) {
        std::optional<guard> g;
        if (!e.ec)
            g = access::make_guard(e.lease_out, owner);
        return complete_counted(*this, *op, e.started, e.ec, std::move(g), owner);
    }
    if (e.start_immediate)
        return backend->start_immediate(active_task(shared_from_this(), owner, deadline, std::move(op), e.started,
                                                    false, false),
                                        std::move(e.immediate));
    if (e.start)
        backend->start(active_task(shared_from_this(), owner, deadline, std::move(op), e.started, false));
}

std::optional<std::string> lock_object::held_node(owner_id owner)
{
    std::lock_guard lk(m_);
    auto it = leases_.find(owner);
    if (it == leases_.end() || it->second->ended_)
        return std::nullopt;
    return it->second->node()->node;
}

std::size_t lock_object::held_count(owner_id owner)
{
    std::lock_guard lk(m_);
    return machine_.hold_count(owner);
}

bool lock_object::lost(const std::shared_ptr<node_state>& ns)
{
    event e{event::kind::lost};
    e.ns = ns;
    handle(e);
    return e.last;
}

void lock_object::queue_changed(const std::shared_ptr<node_state>& ns)
{
    event e{event::kind::others_queued};
    e.ns = ns;
    handle(e);
}

void lock_object::end_linger()
{
    event e{event::kind::end_linger};
    handle(e);
}

void lock_object::count_release_failure()
{
    std::lock_guard lk(m_);
    ++metrics_.release_failures;
}

lock_metrics lock_object::metrics_snapshot() const
{
    std::lock_guard lk(m_);
    return metrics_;
}

void lock_object::count_outcome(const error_code& ec, bool granted, steady_clock::time_point started)
{
    const auto waited = clock_->now() - started;
    std::lock_guard lk(m_);
    note_outcome(metrics_, ec, granted, waited);
}

void lock_object::release(object_lease& l, any_handler<void(error_code)> handler)
{
    event e{event::kind::released};
    e.lease = &l;
    e.release_op = make_pooled<op_state<>>(std::move(handler), ex);
    handle(e);
}

object_lease::object_lease(std::shared_ptr<lock_object> obj, std::shared_ptr<node_state> ns, owner_id owner,
                           int handoff)
    : lease(obj->ex, ns->fence_base * token_scale + handoff, owner), obj_(std::move(obj)), ns_(std::move(ns))
{
}

bool object_lease::past_bound() const noexcept { return obj_->backend->past_bound(*ns_, obj_->opts); }

// A lock on another backend (Redis) has no ZooKeeper node to check: no fenced transaction there.
client* object_lease::zookeeper() noexcept { return obj_->backend->zookeeper(); }

// Ends one acquisition. The last release of an owner's reentrant acquisitions hands the node to
// the next local waiter (unless the batch of handoffs is used up), keeps it lingering, or gives it
// back.
void object_lease::release(any_handler<void(error_code)> handler) { obj_->release(*this, std::move(handler)); }

// --- the active task -----------------------------------------------------------------------------

active_task::active_task(active_task&& o) noexcept
    : s_(std::move(o.s_)), op_(std::move(o.op_)), owner_(o.owner_), deadline_(o.deadline_), started_(o.started_),
      promoted_(o.promoted_), role_(o.role_), reported_(o.reported_)
{
    o.reported_ = true;
}

active_task& active_task::operator=(active_task&& o) noexcept
{
    if (this != &o) {
        if (s_ && !reported_)
            failed();
        s_ = std::move(o.s_);
        op_ = std::move(o.op_);
        owner_ = o.owner_;
        deadline_ = o.deadline_;
        started_ = o.started_;
        promoted_ = o.promoted_;
        role_ = o.role_;
        reported_ = o.reported_;
        o.reported_ = true;
    }
    return *this;
}

active_task::~active_task()
{
    if (s_ && !reported_)
        failed();
}

std::shared_ptr<object_lease> active_task::granted(std::shared_ptr<node_state> ns, bool others_queued,
                                                   std::shared_ptr<revocation_state> revocation)
{
    reported_ = true;
    lock_object::event e{lock_object::event::kind::granted};
    e.owner = owner_;
    e.ns = std::move(ns);
    e.others_queued = others_queued;
    e.revocation = std::move(revocation);
    s_->handle(e);
    return std::move(e.lease_out);
}

void active_task::failed()
{
    const bool hand_on = s_ && role_ && !reported_;
    reported_ = true;
    if (!hand_on)
        return;
    lock_object::event e{lock_object::event::kind::failed};
    s_->handle(e);
}

void active_task::complete(error_code ec, std::optional<guard> g, bool here)
{
    complete_counted(*s_, *op_, started_, ec, std::move(g), owner_, here);
}

}  // namespace zkcoro::detail
