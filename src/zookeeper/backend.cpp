// ZooKeeper as a lock object's backend: the queue of lock nodes (zookeeper/lock_queue.cpp), entered
// without a coroutine when uncontended; the node deleted at the last release.
#include "zookeeper/lock.hpp"

#include "engine/acquisition.hpp"
#include "zookeeper/diagnostics.hpp"
#include "zookeeper/lock_queue.hpp"

#include <zkcoro/detail/access.hpp>
#include <zkcoro/holder_data.hpp>
#include <zkcoro/path.hpp>

#include <fmt/format.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace zkcoro::detail {

namespace {

using asio::awaitable;
using acquire_result = std::tuple<error_code, std::optional<guard>>;

// zkcoro/holder_data.hpp: host, pid, program and the client's label.
std::string default_data(const client& c)
{
    return format_holder_data(this_process(access::holder_label(c)));
}

// The task of ours in ZooKeeper's queue: queue a node until it holds, or hand the role on when
// that fails (the task reports it). A new acquisition always makes its round trip (try_acquire: a
// zero wait is one round trip, then an answer); a promoted one's deadline was checked by the
// engine.
awaitable<acquire_result> queue_in_zk(active_task task, std::optional<queue_entry> entered = {})
{
    co_await asio::this_coro::throw_if_cancelled(false);
    co_await asio::this_coro::reset_cancellation_state(asio::enable_partial_cancellation());
    const auto& s = task.object();
    auto& b = zk_backend_of(*s);
    queue_spec spec{s->path, s->recipe.base_name, s->data, s->recipe.sort, s->recipe.rule, {}};
    // A revocable acquisition watches its node's data from its creation on (Curator's
    // makeRevocable): a request may come while it still queues.
    std::shared_ptr<revocation_state> revocation;
    if (s->opts.revocable) {
        revocation = std::make_shared<revocation_state>(b.zk.get_executor());
        spec.on_created = [s, revocation](const std::string& node) { watch_revocation(zk_of(*s), node, revocation); };
    }
    auto [ec, queued] = co_await queue_acquire(b.zk, spec, task.deadline(), b.alone, std::move(entered));
    if (ec || !queued) {
        if (revocation)
            revocation->end(ec ? ec : make_error_code(asio::error::operation_aborted));
        task.failed();
        co_return acquire_result{ec, std::nullopt};
    }
    co_return acquire_result{error_code{}, hold_node(task, queued->path, queued->stat, std::move(queued->queue_watch),
                                                     queued->others_queued, std::move(revocation),
                                                     std::move(queued->own_watch))};
}

// Granted at once with a node of a given name (a downgrade): no queueing, no handoff.
awaitable<acquire_result> create_immediate(active_task task, std::string name)
{
    co_await asio::this_coro::throw_if_cancelled(false);
    const auto& s = task.object();
    auto [ec, r] = co_await zk_of(*s).async_create(join_path(s->path, name), s->data, create_mode::ephemeral,
                                                   asio::as_tuple(asio::use_awaitable));
    if (ec)
        co_return acquire_result{ec, std::nullopt};
    co_return acquire_result{error_code{}, hold_node(task, r.path, r.stat)};
}

// The uncontended acquisition with no coroutine: our node's create and the listing go out together
// from the caller's call, and when their replies show that the node holds, the guard is made in the
// last reply's completion. Anything else (someone ahead of us, an error, a missing lock path) goes
// on in the queue walk's coroutine from those replies. A cancellation in the meantime is noted
// and, once the replies are in, gives our node up; after that it reaches the coroutine.
class zk_entry : public std::enable_shared_from_this<zk_entry> {
public:
    explicit zk_entry(active_task task) : s_(task.object()), op_(task.op()), task_(std::move(task)) {}

    void start()
    {
        // The emission goes to the client's executor, where the walk's coroutine runs (see
        // spawn_with), through our own signal, which lives as long as this entry. The slot is
        // cleared when the operation completes.
        op_->bind_cancellation_with([weak = weak_from_this(), ex = s_->ex](asio::cancellation_type t) {
            auto self = weak.lock();
            if (!self || (t & (asio::cancellation_type::terminal | asio::cancellation_type::partial)) ==
                             asio::cancellation_type::none)
                return;
            self->cancelled_ = true;
            asio::dispatch(ex, [self, t] { self->signal_.emit(t); });
        });
        entry_.prefix = protected_prefix();
        auto& b = zk_backend_of(*s_);
        b.zk.async_create(entry_path(s_->path, entry_.prefix, s_->recipe.base_name), s_->data,
                          create_mode::ephemeral_sequential,
                          pooled([self = shared_from_this()](error_code ec, create_result r) {
                              self->entry_.create_ec = ec;
                              self->entry_.created = std::move(r);
                              self->arrived();
                          }));
        auto listed = pooled([self = shared_from_this()](error_code ec, children_result r) {
            self->entry_.list_ec = ec;
            self->entry_.listed = std::move(r);
            self->arrived();
        });
        // When the queue was empty last time, the listing leaves a children watch (queue_walk::enter).
        if (b.alone)
            b.zk.async_get_children(s_->path, leave_watch, std::move(listed));
        else
            b.zk.async_get_children(s_->path, std::move(listed));
    }

private:
    // Each reply's completion; the last one decides (they may run on two threads at once).
    void arrived()
    {
        if (pending_.fetch_sub(1, std::memory_order_acq_rel) != 1)
            return;
        auto& b = zk_backend_of(*s_);
        if (!entry_.list_ec)
            b.alone = entry_.listed.children.size() == 1;
        if (cancelled_) {
            abandon_entry(b.zk, s_->path, entry_);
            task_.failed();
            return task_.complete(make_error_code(asio::error::operation_aborted), std::nullopt, true);
        }
        if (auto q = granted_at_entry(s_->recipe.sort, s_->recipe.rule, entry_)) {
            auto g = hold_node(task_, q->path, q->stat, std::move(q->queue_watch), q->others_queued);
            return task_.complete(error_code{}, std::optional<guard>(std::move(g)), true);
        }
        // The walk goes on from these replies; our signal carries later cancellations to it.
        const auto started = task_.started();
        const auto owner = task_.owner();
        spawn_with(s_->ex, queue_in_zk(std::move(task_), std::move(entry_)), signal_,
                   [self = shared_from_this(), started, owner](error_code ec, std::optional<guard> g) {
                       complete_counted(*self->s_, *self->op_, started, ec, std::move(g), owner, true);
                   });
        // A cancellation that came before the signal was connected.
        if (cancelled_)
            signal_.emit(asio::cancellation_type::terminal);
    }

    std::shared_ptr<lock_object> s_;
    std::shared_ptr<op_state<std::optional<guard>>> op_;
    active_task task_;
    queue_entry entry_;
    std::atomic<int> pending_{2};
    std::atomic<bool> cancelled_{false};
    asio::cancellation_signal signal_;
};

}  // namespace

zk_backend::zk_backend(const client& c) : zk(access::share(c)) {}

void zk_backend::start(active_task task)
{
    // A revocable acquisition watches its node from its creation on: the coroutine does that.
    if (task.promoted() || task.object()->opts.revocable)
        return spawn_task(task, [](active_task t) { return queue_in_zk(std::move(t)); });
    make_pooled<zk_entry>(std::move(task))->start();
}

void zk_backend::give_back(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns,
                           std::shared_ptr<op_state<>> op)
{
    delete_released_node(s, ns, std::move(op));
}

void zk_backend::participants(const std::shared_ptr<lock_object>& s,
                              std::shared_ptr<op_state<std::vector<participant>>> op)
{
    list_queue(s, std::move(op));
}

void zk_backend::log_failure(std::string_view operation, std::string_view resource, const error_code& ec)
{
    detail::log_failure(zk, operation, resource, ec);
}

std::string zk_backend::failure_context(std::string_view operation, std::string_view resource, const error_code& ec)
{
    return detail::failure_context(zk, operation, resource, ec);
}

void zk_backend::log(log_level level, std::string_view message) { access::log(zk, level, std::string(message)); }

bool zk_backend::still_held(const node_state& ns) const noexcept
{
    return zk.session_generation() == ns.generation && zk.state() == session_state::connected;
}

// The lost policy's rule (held_node.cpp's monitor applies it when the session's state changes
// or its deadline's timer fires), read from the session's state now.
bool zk_backend::past_bound(const node_state& ns, const mutex_options& opts) const noexcept
{
    const auto s = zk.state();
    if (s == session_state::connected)
        return zk.session_generation() != ns.generation;
    if (zk.session_generation() != ns.generation || s != session_state::suspended)
        return true;  // expired, closed, or a new session on the way
    switch (opts.policy) {
    case lost_policy::suspended: return true;
    case lost_policy::expired: return false;
    case lost_policy::deadline: break;
    }
    return steady_clock::now() >= policy_deadline(zk, opts);
}

void zk_backend::lost_past_bound(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns)
{
    end_lost_node(s, ns);
}

void zk_backend::watch_queue(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns)
{
    detail::watch_queue(s, ns);
}

void zk_backend::start_immediate(active_task task, std::string name)
{
    spawn_task(task, [name = std::move(name)](active_task t) mutable { return create_immediate(std::move(t), std::move(name)); });
}

std::shared_ptr<lock_object> make_zk_lock(const client& c, std::string path, mutex_options opts, recipe_params recipe)
{
    // Exact only where every holder blocks every waiter: a mutex (Curator's rule), not a
    // shared_mutex's sides (readers share) nor a semaphore (other leases may free up).
    const bool exclusive = !recipe.rule && recipe.reentrant && recipe.watch_own_node && !recipe.precheck &&
                           !recipe.immediate_node;
    if (!recipe.sort)
        recipe.sort = [](std::vector<std::string>& names) { sort_by_sequence(names, lock_marker); };
    if (!recipe.rule)
        recipe.rule = mutex_rule;
    if (recipe.markers.empty())
        recipe.markers.push_back(recipe.base_name);
    if (!recipe.listing_holds)
        recipe.listing_holds = [rule = recipe.rule, markers = recipe.markers](const std::vector<std::string>& sorted,
                                                                             std::size_t i) {
            return holds_at(sorted, i, rule, markers);
        };
    auto backend = std::make_shared<zk_backend>(c);
    auto ex = backend->zk.get_executor();
    auto s = std::make_shared<lock_object>(backend, std::move(ex), std::move(path), opts, std::move(recipe));
    // A revocable node stores nothing (Curator's makeRevocable): its data is the request channel.
    s->data = opts.revocable ? std::string() : opts.data.empty() ? default_data(c) : opts.data;
    if (exclusive && access::detect_deadlocks(c))
        s->graph = &process_wait_graph();
    auto refuse = [&](const std::string& why) {
        s->path_error = make_error_code(client_errc::invalid_argument);
        backend->log(log_level::warn, why);
    };
    if (auto pc = check_path(s->path); !pc.ok()) {
        s->path_error = pc.ec;
        backend->log(log_level::warn, "lock: " + pc.describe(s->path));
    } else if (opts.revocable && (!s->recipe.reentrant || !s->recipe.watch_own_node)) {
        refuse(fmt::format("lock {}: revocable is for mutexes and the sides of a shared_mutex (Curator's "
                           "makeRevocable); a semaphore has no revocation", s->path));
    } else if (opts.revocable && !opts.data.empty()) {
        refuse(fmt::format("lock {}: a revocable lock's node stores no data (its data carries revocation "
                           "requests): leave mutex_options::data empty", s->path));
    }
    return s;
}

}  // namespace zkcoro::detail
