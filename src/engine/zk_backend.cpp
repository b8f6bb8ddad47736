// ZooKeeper as a lock object's backend: the queue of lock nodes (engine/lock_queue.cpp), entered
// without a coroutine when uncontended; the node deleted at the last release.
#include "engine/acquisition.hpp"
#include "engine/lock_object.hpp"
#include "engine/lock_queue.hpp"

#include <zkcoro/detail/access.hpp>
#include <zkcoro/path.hpp>

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

// The task of ours in ZooKeeper's queue: queue a node until it holds, or hand the role on when
// that fails. A promoted waiter whose deadline has passed hands it on at once; a new acquisition
// always makes its round trip (try_acquire: a zero wait is one round trip, then an answer).
awaitable<acquire_result> queue_in_zk(std::shared_ptr<lock_object> s, owner_id owner, steady_clock::time_point deadline,
                                      bool promoted, std::optional<queue_entry> entered = {})
{
    co_await asio::this_coro::throw_if_cancelled(false);
    co_await asio::this_coro::reset_cancellation_state(asio::enable_partial_cancellation());
    if (promoted && steady_clock::now() >= deadline) {
        hand_on(s);
        co_return acquire_result{error_code{}, std::nullopt};
    }
    queue_spec spec{s->path, s->recipe.base_name, s->data, s->recipe.sort, s->recipe.rule, {}};
    // A revocable acquisition watches its node's data from its creation on (Curator's
    // makeRevocable): a request may come while it still queues.
    std::shared_ptr<revocation_state> revocation;
    if (s->opts.revocable) {
        revocation = std::make_shared<revocation_state>(s->zk.get_executor());
        spec.on_created = [s, revocation](const std::string& node) { watch_revocation(s->zk, node, revocation); };
    }
    auto [ec, queued] = co_await queue_acquire(s->zk, spec, deadline, s->alone, std::move(entered));
    if (ec || !queued) {
        if (revocation)
            revocation->end(ec ? ec : make_error_code(asio::error::operation_aborted));
        hand_on(s);
        co_return acquire_result{ec, std::nullopt};
    }
    co_return acquire_result{error_code{}, hold_node(s, owner, queued->path, queued->stat, std::move(queued->queue_watch),
                                                           queued->others_queued, std::move(revocation))};
}

// Granted at once with a node of a given name (a downgrade): no queueing, no handoff.
awaitable<acquire_result> create_immediate(std::shared_ptr<lock_object> s, owner_id owner, std::string name)
{
    co_await asio::this_coro::throw_if_cancelled(false);
    auto [ec, r] = co_await s->zk.async_create(join_path(s->path, name), s->data, create_mode::ephemeral,
                                               asio::as_tuple(asio::use_awaitable));
    if (ec)
        co_return acquire_result{ec, std::nullopt};
    co_return acquire_result{error_code{}, hold_node(s, owner, r.path, r.stat)};
}

// The uncontended acquisition with no coroutine: our node's create and the listing go out together
// from the caller's call, and when their replies show that the node holds, the guard is made in the
// last reply's completion. Anything else (someone ahead of us, an error, a missing lock path) goes
// on in the queue walk's coroutine from those replies. A cancellation in the meantime is noted
// and, once the replies are in, gives our node up; after that it reaches the coroutine.
class zk_entry : public std::enable_shared_from_this<zk_entry> {
public:
    zk_entry(std::shared_ptr<lock_object> s, owner_id owner, steady_clock::time_point deadline,
             std::shared_ptr<op_state<std::optional<guard>>> op, steady_clock::time_point started)
        : s_(std::move(s)), owner_(owner), deadline_(deadline), started_(started), op_(std::move(op))
    {
    }

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
        auto& zk = s_->zk;
        zk.async_create(entry_path(s_->path, entry_.prefix, s_->recipe.base_name), s_->data, create_mode::ephemeral_sequential,
                        [self = shared_from_this()](error_code ec, create_result r) {
                            self->entry_.create_ec = ec;
                            self->entry_.created = std::move(r);
                            self->arrived();
                        });
        auto listed = [self = shared_from_this()](error_code ec, children_result r) {
            self->entry_.list_ec = ec;
            self->entry_.listed = std::move(r);
            self->arrived();
        };
        // When the queue was empty last time, the listing leaves a children watch (queue_walk::enter).
        if (s_->alone)
            zk.async_get_children(s_->path, leave_watch, std::move(listed));
        else
            zk.async_get_children(s_->path, std::move(listed));
    }

private:
    // Each reply's completion; the last one decides (they may run on two threads at once).
    void arrived()
    {
        if (pending_.fetch_sub(1, std::memory_order_acq_rel) != 1)
            return;
        if (!entry_.list_ec)
            s_->alone = entry_.listed.children.size() == 1;
        if (cancelled_) {
            abandon_entry(s_->zk, s_->path, entry_);
            hand_on(s_);
            return complete_counted(*s_, *op_, started_, make_error_code(asio::error::operation_aborted),
                                    std::optional<guard>{}, owner_, true);
        }
        if (auto q = granted_at_entry(s_->recipe.sort, s_->recipe.rule, entry_)) {
            auto g = hold_node(s_, owner_, q->path, q->stat, std::move(q->queue_watch), q->others_queued);
            return complete_counted(*s_, *op_, started_, error_code{}, std::optional<guard>(std::move(g)), owner_,
                                    true);
        }
        // The walk goes on from these replies; our signal carries later cancellations to it.
        auto self = shared_from_this();
        asio::co_spawn(s_->ex, queue_in_zk(s_, owner_, deadline_, false, std::move(entry_)),
                       asio::bind_cancellation_slot(signal_.slot(), [self](std::exception_ptr e, acquire_result r) {
                           auto ec = e ? make_error_code(client_errc::internal_error) : std::get<0>(r);
                           complete_counted(*self->s_, *self->op_, self->started_, ec, std::move(std::get<1>(r)),
                                            self->owner_, true);
                       }));
        // A cancellation that came before the signal was connected.
        if (cancelled_)
            signal_.emit(asio::cancellation_type::terminal);
    }

    std::shared_ptr<lock_object> s_;
    owner_id owner_;
    steady_clock::time_point deadline_, started_;
    std::shared_ptr<op_state<std::optional<guard>>> op_;
    queue_entry entry_;
    std::atomic<int> pending_{2};
    std::atomic<bool> cancelled_{false};
    asio::cancellation_signal signal_;
};

// ZooKeeper as the backend: the queue of lock nodes; the node deleted at the last release.
class zk_backend final : public lock_backend {
public:
    explicit zk_backend(const client& c) : zk_(access::share(c)) {}

    void start(const std::shared_ptr<lock_object>& s, owner_id owner, steady_clock::time_point deadline,
               std::shared_ptr<op_state<std::optional<guard>>> op, steady_clock::time_point started,
               bool promoted) override
    {
        // A revocable acquisition watches its node from its creation on: the coroutine does that.
        if (promoted || s->opts.revocable)
            return spawn_counted(s, queue_in_zk(s, owner, deadline, promoted), std::move(op), started, owner);
        std::make_shared<zk_entry>(s, owner, deadline, std::move(op), started)->start();
    }
    void give_back(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns,
                   std::shared_ptr<op_state<>> op) override
    {
        delete_released_node(s, ns, std::move(op));
    }
    void participants(const std::shared_ptr<lock_object>& s,
                      std::shared_ptr<op_state<std::vector<participant>>> op) override
    {
        list_queue(s, std::move(op));
    }
    void log_failure(std::string_view operation, std::string_view resource, const error_code& ec) override
    {
        detail::log_failure(zk_, operation, resource, ec);
    }
    std::string failure_context(std::string_view operation, std::string_view resource, const error_code& ec) override
    {
        return detail::failure_context(zk_, operation, resource, ec);
    }
    client* zookeeper(lock_object& s) noexcept override { return &s.zk; }

private:
    client zk_;
};

}  // namespace

std::shared_ptr<lock_backend> make_zk_backend(const client& c)
{
    return std::make_shared<zk_backend>(c);
}

void start_immediate(const std::shared_ptr<lock_object>& s, owner_id owner, std::string name,
                     std::shared_ptr<op_state<std::optional<guard>>> op, steady_clock::time_point started)
{
    spawn_counted(s, create_immediate(s, owner, std::move(name)), std::move(op), started);
}

}  // namespace zkcoro::detail
