// The lock queue protocol, in named steps. Acquire: create our ephemeral-sequential node with a
// protected name (_c_<uuid>-) and list the parent in the same round trip (ZooKeeper runs one
// session's requests in order, so the listing includes our node); hold if the rule says so, else
// leave a watch on the node the rule names (or on the children) and wait. When the watched node's
// deletion grants by itself, no further round trip, provided our own node still exists: a watch
// on it, asked just before the predecessor's, has not fired (ZooKeeper tells one connection the
// changes in their order, so our node's deletion would have been told first). Else we list
// again, as Curator does after every event. The decisions are pure (engine/rules.hpp); this file
// is the I/O around them, and each step's failure handling.
#include "zookeeper/lock_queue.hpp"

#include "async/coroutine.hpp"
#include "zookeeper/node_ops.hpp"

#include <zkcoro/detail/access.hpp>
#include <zkcoro/path.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/random/mersenne_twister.hpp>
#include <boost/uuid/random_generator.hpp>
#include <boost/uuid/uuid_io.hpp>

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <optional>

#include <pthread.h>

namespace zkcoro::detail {

namespace {

using clock = std::chrono::steady_clock;
using asio::awaitable;

// Forks seen so far: a child must not draw the same names as its parent.
std::atomic<unsigned> forks{0};

// A random UUID for a protected node name. It must be unique among the lock's participants, not
// secret: a Mersenne twister per thread, seeded from the OS once (Boost's default generator reads
// the OS's randomness for every UUID: a getrandom system call per acquisition), and again in a
// child process after fork.
boost::uuids::uuid protected_uuid_()
{
    static const int registered = ::pthread_atfork(nullptr, nullptr, [] { forks.fetch_add(1); });
    (void)registered;
    struct seeded {
        unsigned at_fork = forks.load();
        // The 64-bit twister: Boost.UUID draws the 16 bytes as two 64-bit values (the 32-bit
        // one took two draws and a combining step for each).
        boost::uuids::basic_random_generator<boost::random::mt19937_64> gen;
    };
    thread_local std::optional<seeded> tl;
    auto& g = tl;  // one look-up of the thread-local (each costs a call to __tls_get_addr)
    if (!g || g->at_fork != forks.load())
        g.emplace();
    return g->gen();
}

// One acquisition's walk through the queue. Each step returns what to do next.
class queue_walk {
public:
    queue_walk(client& zk, const queue_spec& spec, clock::time_point deadline, std::atomic<bool>& alone,
               asio::any_io_executor ex, std::optional<queue_entry> entered)
        : zk_(zk), spec_(spec), deadline_(deadline), alone_(alone), ex_(std::move(ex)), entered_(std::move(entered))
    {
        prefix_ = entered_ ? entered_->prefix : protected_prefix();
        create_path_ = entry_path(spec_.path, prefix_, spec_.base_name);
    }

    // Each round waits for an event, the deadline or a reply, so it cannot spin; and no cap on
    // their number: a waiter behind a busy queue may see any number of predecessors go.
    awaitable<queue_result> run()
    {
        for (;;) {
            const bool stop = co_await cancelled();
            if (stop)
                co_return give_up(asio::error::operation_aborted);
            auto n = step::evaluate;
            if (node_.empty() && entered_) {
                // The first round trip was made by the caller (see queue_entry).
                auto e = std::move(*entered_);
                entered_.reset();
                n = co_await absorb(e.create_ec, std::move(e.created), e.list_ec, std::move(e.listed));
            } else if (node_.empty())
                n = co_await enter();
            else if (!have_children_)
                n = co_await list();
            if (n == step::done)
                co_return std::move(result_);
            if (n == step::again)
                continue;
            have_children_ = false;
            spec_.sort(children_);
            auto ours = position_of(children_, node_name(node_));
            if (!ours) {
                n = restart();
            } else {
                auto decision = spec_.rule(children_, *ours);
                if (decision.holds)
                    co_return granted();
                if (clock::now() >= deadline_)
                    co_return give_up(error_code{});
                n = co_await wait_turn(decision);
            }
            if (n == step::done)
                co_return std::move(result_);
        }
    }

private:
    enum class step { evaluate, again, done };

    // Creates our node and lists the queue in one round trip. When we expect to be alone, the
    // listing leaves a children watch: a holder granted by it learns from it, at no extra request,
    // when the queue changes (see watch_held_node); a semaphore waits on it.
    awaitable<step> enter()
    {
        // Two statements, not a conditional expression: GCC 12 miscompiles a co_await of a
        // conditional, destroying the awaitable's frame twice.
        std::tuple<std::array<std::size_t, 2>, error_code, create_result, error_code, children_result> r;
        if (alone_)
            r = co_await asio::experimental::make_parallel_group(
                    zk_.async_create(create_path_, spec_.data, create_mode::ephemeral_sequential, asio::deferred),
                    zk_.async_get_children(spec_.path, leave_watch, asio::deferred))
                    .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
        else
            r = co_await asio::experimental::make_parallel_group(
                    zk_.async_create(create_path_, spec_.data, create_mode::ephemeral_sequential, asio::deferred),
                    zk_.async_get_children(spec_.path, asio::deferred))
                    .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
        co_return co_await absorb(std::get<1>(r), std::move(std::get<2>(r)), std::get<3>(r), std::move(std::get<4>(r)));
    }

    // What the entry's create and listing replies mean.
    awaitable<step> absorb(error_code cr_ec, create_result cr, error_code ch_ec, children_result ch)
    {
        if (!ch_ec)
            alone_ = ch.children.size() == 1;
        const bool stop = co_await cancelled();
        if (stop)
            co_return finish(give_up(asio::error::operation_aborted));
        if (cr_ec == zk_errc::no_node) {
            // The lock path does not exist yet: make it, then enter again. A session lost meanwhile
            // is lost as anywhere else in the walk: start over on the next one (a failure here,
            // found by the simulation, tests/sim/test_sim_leaders.cpp, selector seed 430).
            auto ec = co_await ensure_path(zk_, spec_.path, &created_parents_);
            if (is_session_lost(ec))
                co_return co_await session_lost(ec);
            // ZNONODE: a parent made here went before its child (a give-up elsewhere removes the
            // empty parents it made): enter again, which makes them again.
            if (ec && !is_retriable(ec) && ec != zk_errc::no_node)
                co_return finish(give_up(ec));
            co_return step::again;
        }
        if (is_retriable(cr_ec))
            co_return co_await recover_create();
        if (is_session_lost(cr_ec))
            co_return co_await session_lost(cr_ec);
        if (cr_ec)
            co_return finish(give_up(cr_ec));
        node_ = cr.path;
        node_stat_ = cr.stat;
        if (spec_.on_created)
            spec_.on_created(node_);
        // The node is made, but the listing beside it may have failed (its reply lost): list
        // again (step::again goes to list()), not judge by an empty listing without our node,
        // which read as "vanished" and put a second node behind the first (found by tests/sim).
        have_children_ = !ch_ec;
        children_ = std::move(ch.children);
        children_watch_ = std::move(ch.watch);
        co_return have_children_ ? step::evaluate : step::again;
    }

    // The create failed in a way that leaves it unknown whether it happened: once connected, find
    // it by its protected name (or go round and create anew). A look-up that itself meets a lost
    // connection looks again: creating anew would leave a node the create did make ahead of the
    // new one, and the acquisition would wait behind its own node (found by tests/sim).
    awaitable<step> recover_create()
    {
        error_code ec;
        std::string found;
        node_stat st;
        for (;;) {
            // (The awaited value in a variable of its own, not under `!` in the condition: g++ 12
            // miscompiles a co_await there, issue 32.)
            const bool connected = co_await wait_connected(zk_, deadline_);
            const bool stop = co_await cancelled();  // which ends the wait too: no time-out, no loss
            if (stop)
                co_return finish(give_up(asio::error::operation_aborted));
            if (!connected)
                co_return finish(give_up(not_connected(zk_, deadline_, client_errc::session_expired)));
            std::tie(ec, found, st) = co_await find_protected(zk_, spec_.path, prefix_);
            if (!is_retriable(ec))
                break;
        }
        if (is_session_lost(ec))
            co_return co_await session_lost(ec);
        if (ec)
            co_return finish(give_up(ec));
        if (!found.empty()) {
            access::log(zk_, log_level::info,
                        fmt::format("lock {}: the create's reply was lost; found our node {} by its protected name",
                                    spec_.path, found));
            node_ = found;
            node_stat_ = st;
            if (spec_.on_created)
                spec_.on_created(node_);
        } else {
            access::log(zk_, log_level::info,
                        fmt::format("lock {}: the create's reply was lost and it made no node; creating again", spec_.path));
        }
        co_return step::again;
    }

    // Lists the queue again (with a children watch for rules that wait on the children).
    awaitable<step> list()
    {
        error_code ec;
        children_result ch;
        if (list_with_watch_)
            std::tie(ec, ch) = co_await zk_.async_get_children(spec_.path, leave_watch, use_tuple);
        else
            std::tie(ec, ch) = co_await zk_.async_get_children(spec_.path, use_tuple);
        const bool stop = co_await cancelled();
        if (stop)
            co_return finish(give_up(asio::error::operation_aborted));
        if (is_retriable(ec))
            co_return co_await reconnected();
        if (is_session_lost(ec))
            co_return co_await session_lost(ec);
        if (ec)
            co_return finish(give_up(ec));
        children_ = std::move(ch.children);
        children_watch_ = std::move(ch.watch);
        co_return step::evaluate;
    }

    // Our node is not in the listing: the session was lost, or someone deleted it (an operator, a
    // reaper). Start over with a new node, behind the queue as it is now.
    step restart()
    {
        access::log(zk_, log_level::warn, fmt::format("lock node {} vanished while waiting; starting over", node_));
        node_.clear();
        own_watch_ = {};
        if (clock::now() >= deadline_)
            return finish(give_up(error_code{}));
        return step::again;
    }

    // Not holding: wait for the node the rule names, or for a change of the children, or the
    // deadline. When the named node's deletion would grant by itself, also for our own node's
    // deletion (see own_watch_armed).
    awaitable<step> wait_turn(const queue_decision& decision)
    {
        zkcoro::watch w;
        // The listing is not read again (every round after a wait lists anew): freed before the
        // requests and the wait, or a waiter behind N nodes keeps N names while it waits, and N
        // waiters N x N (10 000 waiters of one process on one lock: 4.8 GB, bench/scale.sh).
        const auto watched = decision.watch_children ? std::string() : join_path(spec_.path, children_[decision.watch_index]);
        children_ = {};
        if (decision.watch_children) {
            if (!children_watch_.valid()) {
                list_with_watch_ = true;
                co_return step::again;
            }
            w = std::move(children_watch_);
        } else {
            // A get_data watch: an exists watch on a node that vanished meanwhile would stay.
            error_code ec;
            data_result d;
            if (decision.deletion_grants && !own_watch_armed()) {
                // Ours first, then the predecessor's: both replies come before any event of the
                // predecessor's watch. The count of connections is read before either is sent.
                own_connections_ = access::connections(zk_);
                auto [order, own_ec, own, d_ec, dr] =
                    co_await asio::experimental::make_parallel_group(
                        zk_.async_exists(node_, leave_watch, asio::deferred),
                        zk_.async_get_data(watched, leave_watch, asio::deferred))
                        .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
                (void)order;
                ec = d_ec;
                d = std::move(dr);
                if (!own_ec && (!own.stat || own.stat->ephemeral_owner != node_stat_.ephemeral_owner)) {
                    const bool stop = co_await cancelled();
                    if (stop)
                        co_return finish(give_up(asio::error::operation_aborted));
                    co_return restart();  // ours is gone already
                }
                own_watch_ = own_ec ? zkcoro::watch{} : std::move(own.watch);
                if (!ec && own_ec)
                    ec = own_ec;  // then go round as for the predecessor's failure
            } else {
                std::tie(ec, d) = co_await zk_.async_get_data(watched, leave_watch, use_tuple);
            }
            const bool stop = co_await cancelled();
            if (stop)
                co_return finish(give_up(asio::error::operation_aborted));
            if (ec == zk_errc::no_node)
                co_return step::again;  // gone already: list again
            if (is_retriable(ec))
                co_return co_await reconnected();
            if (is_session_lost(ec))
                co_return co_await session_lost(ec);
            if (ec)
                co_return finish(give_up(ec));
            w = std::move(d.watch);
        }
        asio::steady_timer timer(ex_, deadline_);
        std::array<std::size_t, 3> order{};
        error_code w_ec;
        watch_event ev;
        if (decision.deletion_grants && own_watch_.valid()) {
            // Our own node's event wakes us too: a waiter whose node was deleted starts over now.
            std::tie(order, w_ec, ev, std::ignore, std::ignore, std::ignore) =
                co_await asio::experimental::make_parallel_group(w.async_wait(asio::deferred),
                                                                 timer.async_wait(asio::deferred),
                                                                 own_watch_.async_wait(asio::deferred))
                    .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
        } else {
            std::array<std::size_t, 2> two{};
            std::tie(two, w_ec, ev, std::ignore) =
                co_await asio::experimental::make_parallel_group(w.async_wait(asio::deferred),
                                                                 timer.async_wait(asio::deferred))
                    .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
            order[0] = two[0];
        }
        const bool stop = co_await cancelled();
        if (stop)
            co_return finish(give_up(asio::error::operation_aborted));
        if (order[0] == 1)
            co_return finish(give_up(error_code{}));
        if (order[0] == 2) {
            // Our own node changed or went: the listing tells which.
            own_watch_ = {};
            co_return step::again;
        }
        if (w_ec) {
            if (!is_session_lost(w_ec))
                co_return finish(give_up(w_ec));
            co_return co_await session_lost(w_ec);  // the session ended while we waited
        }
        if (ev.type == watch_event_type::deleted && decision.deletion_grants) {
            if (!own_watch_armed()) {
                // Our node's watch fired (it changed or went) or the connection was made anew since
                // it was set (the server then fires re-registered watches in an order of its own):
                // whether our node is still there is not known. List, as Curator does.
                own_watch_ = {};
                co_return step::again;
            }
            // The listing's children watch, if any, saw the queue before our turn: stale.
            children_watch_ = {};
            children_.clear();
            result_ = granted();
            co_return step::done;
        }
        co_return step::again;
    }

    // Whether our own node's watch says that it still exists, in the order of the server's
    // changes: set on this connection (none made since it was asked for) and not fired.
    bool own_watch_armed() const
    {
        return own_watch_.valid() && !own_watch_.ready() && access::connections(zk_) == own_connections_;
    }

    // A retriable failure: go round once connected again, or give up at the deadline.
    awaitable<step> reconnected()
    {
        const bool connected = co_await wait_connected(zk_, deadline_);  // (see recover_create)
        const bool stop = co_await cancelled();
        if (stop)
            co_return finish(give_up(asio::error::operation_aborted));
        if (!connected)
            co_return finish(give_up(not_connected(zk_, deadline_, client_errc::session_expired)));
        co_return step::again;
    }

    // The session ended under a request or a watch (the client fails what was pending with
    // session_expired, and refuses requests until its new handle connects): our node went with
    // it. Unless the client was closed, start over on the next session, behind the queue as it is
    // then, within the deadline (a waiting acquisition survives its session's expiry).
    awaitable<step> session_lost(error_code ec)
    {
        node_.clear();
        own_watch_ = {};
        children_watch_ = {};
        have_children_ = false;
        if (zk_.state() == session_state::closed)
            co_return finish(give_up(ec));
        co_return co_await reconnected();
    }

    queue_result granted()
    {
        // Our node's watch, if still armed, serves the held node's (watch_held_node): no new request.
        zkcoro::watch own;
        if (own_watch_.valid() && !own_watch_.ready())
            own = std::move(own_watch_);
        return queue_result{error_code{}, queued_node{node_, node_stat_, std::move(children_watch_),
                                                      children_.size() > 1, std::move(own)}};
    }

    // Ends unsuccessfully: our node (or the one our protected name may have made) is deleted.
    queue_result give_up(error_code ec)
    {
        asio::co_spawn(ex_, abandon_node(access::share(zk_), spec_.path, prefix_, node_, std::move(created_parents_)),
                       asio::detached);
        return queue_result{ec, std::nullopt};
    }

    step finish(queue_result r)
    {
        result_ = std::move(r);
        return step::done;
    }

    client& zk_;
    const queue_spec& spec_;
    clock::time_point deadline_;
    std::atomic<bool>& alone_;
    asio::any_io_executor ex_;
    std::optional<queue_entry> entered_;
    std::string prefix_;
    std::string create_path_;
    std::string node_;
    node_stat node_stat_;
    std::vector<std::string> created_parents_;  // by this acquisition, in creation order
    std::vector<std::string> children_;
    bool have_children_ = false;
    bool list_with_watch_ = false;  // for rules that wait on the children (semaphores)
    zkcoro::watch children_watch_;
    // An exists watch on our own node, set with the first wait whose predecessor's deletion would
    // grant, and the count of connections before it was asked for (see own_watch_armed).
    zkcoro::watch own_watch_;
    std::uint64_t own_connections_ = 0;
    queue_result result_;
};

}  // namespace

std::string protected_prefix()
{
    std::string r(3 + 36 + 1, '-');
    r[0] = '_';
    r[1] = 'c';
    r[2] = '_';
    boost::uuids::to_chars(protected_uuid_(), r.data() + 3);
    return r;
}

std::string entry_path(std::string_view path, std::string_view prefix, std::string_view base_name)
{
    std::string r;
    r.reserve(path.size() + 1 + prefix.size() + base_name.size());
    r += path;
    if (r.empty() || r.back() != '/')
        r += '/';
    r += prefix;
    r += base_name;
    return r;
}

std::optional<queued_node> granted_at_entry(const std::function<void(std::vector<std::string>&)>& sort,
                                            const queue_rule& rule, queue_entry& e)
{
    if (e.create_ec || e.list_ec)
        return std::nullopt;
    auto& children = e.listed.children;
    sort(children);
    auto ours = position_of(children, node_name(e.created.path));
    if (!ours || !rule(children, *ours).holds)
        return std::nullopt;
    return queued_node{std::move(e.created.path), e.created.stat, std::move(e.listed.watch), children.size() > 1, {}};
}

void abandon_entry(client& zk, const std::string& path, const queue_entry& e)
{
    asio::co_spawn(zk.get_executor(),
                   abandon_node(access::share(zk), path, e.prefix, e.create_ec ? std::string() : e.created.path, {}),
                   asio::detached);
}

awaitable<queue_result> queue_acquire(client& zk, const queue_spec& spec, clock::time_point deadline,
                                      std::atomic<bool>& alone, std::optional<queue_entry> entered)
{
    queue_walk walk(zk, spec, deadline, alone, co_await asio::this_coro::executor, std::move(entered));
    co_return co_await walk.run();
}

}  // namespace zkcoro::detail
