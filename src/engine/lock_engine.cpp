// The lock queue engine (Curator's LockInternals protocol) and the reentrant mutex on it.
//
// Acquire: create our ephemeral-sequential node with a protected name (_c_<uuid>-) and list the
// parent in the same round trip (ZooKeeper runs one session's requests in order, so the listing
// includes our node); hold if we sort first, else leave a watch on the node just before ours and
// wait. When that predecessor was the head of the listing, its deletion makes us the head: no
// further round trip. Timeout, cancellation and errors delete our node from a task that does not
// share the caller's (possibly cancelled) cancellation slot.
#include "driver/client_impl.hpp"
#include "engine/lock_engine.hpp"

#include "session/session_fsm.hpp"
#include <zkcoro/mutex.hpp>
#include <zkcoro/path.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/uuid/random_generator.hpp>
#include <boost/uuid/uuid_io.hpp>

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <deque>
#include <functional>
#include <mutex>
#include <unordered_map>

namespace zkcoro {

std::string_view sequence_key(std::string_view name, std::string_view marker) noexcept
{
    auto pos = name.rfind(marker);
    return pos == std::string_view::npos ? name : name.substr(pos + marker.size());
}

void sort_by_sequence(std::vector<std::string>& names, std::string_view marker)
{
    std::stable_sort(names.begin(), names.end(), [marker](const std::string& a, const std::string& b) {
        return sequence_key(a, marker) < sequence_key(b, marker);
    });
}

namespace detail {

using namespace std::chrono_literals;
using asio::awaitable;
using clock = std::chrono::steady_clock;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// The mutex rule: the first in the queue holds; the others watch the node just before them.
queue_decision mutex_rule(const std::vector<std::string>&, std::size_t ours)
{
    if (ours == 0)
        return {true, 0, false};
    return {false, ours - 1, ours == 1};
}

// What the engine got: our node in the queue, holding.
struct queued_node {
    std::string path;
    zkcoro::stat stat;
    // The children watch of the listing that granted (when the queue had one): it fires on any
    // change of the queue since, our node's deletion included.
    zkcoro::watch queue_watch;
};

struct hold;
struct local_waiter;
// The deadlines of direct waiters, for one timer per mutex object instead of one per waiter.
struct deadline_entry {
    clock::time_point at;
    std::weak_ptr<local_waiter> w;
    bool operator<(const deadline_entry& o) const noexcept { return at > o.at; }  // min-heap
};

// The one znode this process holds (or queues with) on the path, shared by the in-process
// handoff: several tasks hold it one after another without touching ZooKeeper.
struct node_state {
    std::string node;
    std::int64_t czxid = 0;
    std::int64_t session_id = 0;
    std::uint64_t generation = 0;
    std::atomic<bool> lost{false};
    std::atomic<bool> released{false};  // our own delete is under way: its deletion is no loss
    int handoffs = 0;                // guarded by mutex_state::m
    std::shared_ptr<hold> current;   // guarded by mutex_state::m
    asio::cancellation_signal monitor_stop;  // client's executor only
};

// In-process handoffs of one node before it goes back to the end of ZooKeeper's queue, so that
// other processes get their turn. Fencing tokens are czxid * 64 + handoff number.
constexpr int max_handoffs = 63;
constexpr std::int64_t token_scale = 64;

struct mutex_state {
    mutex_state(client& c, std::string p, mutex_options o, recipe_params r)
        : zk(client_access::share(c)), path(std::move(p)), opts(std::move(o)), recipe(std::move(r))
    {
        data = opts.data.empty() ? default_data() : opts.data;
        if (!recipe.sort)
            recipe.sort = [](std::vector<std::string>& names) { sort_by_sequence(names, "lock-"); };
        if (!recipe.rule)
            recipe.rule = mutex_rule;
        if (recipe.markers.empty())
            recipe.markers.push_back(recipe.base_name);
        if (!recipe.local_handoff_allowed || !recipe.reentrant)
            opts.local_handoff = false;
        if (auto pc = check_path(path); !pc.ok()) {
            path_error = pc.ec;
            zk.log(log_level::warn, "lock: " + pc.describe(path));
        }
    }

    static std::string default_data()
    {
        char host[256] = {};
        ::gethostname(host, sizeof host - 1);
        return fmt::format("{}:{}", host, ::getpid());
    }

    client zk;
    std::string path;
    mutex_options opts;
    recipe_params recipe;
    std::string data;
    error_code path_error;
    std::mutex m;
    // Guarded by m.
    std::unordered_map<owner_id, std::shared_ptr<hold>> holds;
    bool active = false;                  // a task of ours is in ZooKeeper's queue or holds
    std::deque<std::shared_ptr<local_waiter>> queue;  // tasks waiting behind it, FIFO
    std::size_t abandoned_in_queue = 0;   // entries of `queue` that gave up (removed lazily)
    // Direct waiters' deadlines (entries of waiters no longer waiting are dropped lazily) and the
    // timer set to the earliest one.
    std::vector<deadline_entry> deadlines;
    std::unique_ptr<asio::steady_timer> deadline_timer;
    clock::time_point timer_at = clock::time_point::max();
    lock_metrics metrics;
    // The queue was empty at this object's last listing (see queue_acquire). Starts false: a
    // first acquire watches its node with one request rather than risk a stray event.
    std::atomic<bool> alone{false};
};

struct hold {
    std::shared_ptr<mutex_state> state;
    std::shared_ptr<node_state> ns;
    std::int64_t token = 0;
    owner_id owner = 0;
    std::atomic<bool> lost{false};
    // Guarded by state->m.
    std::size_t count = 1;
    bool released = false;
    std::vector<std::shared_ptr<op_state<>>> lost_waiters;
    // Emitted on the client's executor.
    asio::cancellation_signal lost_signal;
};

// A task of this process waiting for the in-process handoff. Two kinds: a waiter inside
// acquire_coro is woken through `wake`; a direct waiter (queued by start_acquire with no
// coroutine at all, which keeps a waiting task small) is completed through `direct`.
struct local_waiter {
    enum class status { waiting, granted, promoted, abandoned };
    owner_id owner = 0;
    status st = status::waiting;          // guarded by mutex_state::m
    std::shared_ptr<hold> grant;          // set with granted
    std::shared_ptr<op_state<>> wake;     // completes when st leaves waiting
    // Direct waiters only.
    std::shared_ptr<op_state<std::optional<guard>>> direct;
    clock::time_point deadline;
    clock::time_point started;
};


namespace {

bool cancelled(const asio::cancellation_state& cs) { return cs.cancelled() != asio::cancellation_type::none; }

bool is_zk(const error_code& ec, int code) { return ec == make_zk_error(code); }

// Waits until the client is connected, at most until `deadline`. False on timeout, session end
// or cancellation.
awaitable<bool> wait_connected(client& zk, clock::time_point deadline)
{
    auto ex = co_await asio::this_coro::executor;
    for (int i = 0; i < 1000; ++i) {
        auto s = zk.state();
        if (s == session_state::connected)
            co_return true;
        if (s == session_state::closed || clock::now() >= deadline)
            co_return false;
        asio::steady_timer t(ex, deadline);
        [[maybe_unused]] auto [order, ec1, st, ec2] = co_await asio::experimental::make_parallel_group(
                                         zk.async_wait_state(s, asio::deferred), t.async_wait(asio::deferred))
                                         .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
        if (cancelled(co_await asio::this_coro::cancellation_state))
            co_return false;
    }
    co_return false;
}

// Deletes a node until it is gone: retried across connection losses; a lost session took the
// ephemeral node with it. Bounded in attempts.
awaitable<error_code> guaranteed_delete(client zk, std::string node)
{
    for (int attempt = 0; attempt < 100; ++attempt) {
        auto [ec] = co_await zk.async_remove(node, -1, use_tuple);
        if (!ec || is_zk(ec, ZNONODE) || is_session_lost(ec))
            co_return error_code{};
        if (!is_retriable(ec))
            co_return ec;
        if (!co_await wait_connected(zk, clock::now() + 60s))
            co_return zk.state() == session_state::closed ? error_code{} : ec;
    }
    co_return make_zk_error(ZOPERATIONTIMEOUT);
}

// Finds the child a create with protected name prefix `prefix` made, if any, and checks that the
// current session owns it; a node left by an earlier session is deleted.
awaitable<std::tuple<error_code, std::string, zkcoro::stat>> find_protected(client& zk, const std::string& parent,
                                                                            const std::string& prefix)
{
    auto [ec, ch] = co_await zk.async_get_children(parent, use_tuple);
    if (is_zk(ec, ZNONODE))
        co_return std::tuple{error_code{}, std::string{}, zkcoro::stat{}};
    if (ec)
        co_return std::tuple{ec, std::string{}, zkcoro::stat{}};
    for (auto& name : ch.children) {
        if (name.rfind(prefix, 0) != 0)
            continue;
        auto path = join_path(parent, name);
        auto [ec2, ex] = co_await zk.async_exists(path, use_tuple);
        if (ec2)
            co_return std::tuple{ec2, std::string{}, zkcoro::stat{}};
        if (!ex.stat)
            break;
        if (ex.stat->ephemeral_owner != zk.session().id) {
            co_await guaranteed_delete(client_access::share(zk), path);
            break;
        }
        co_return std::tuple{error_code{}, path, *ex.stat};
    }
    co_return std::tuple{error_code{}, std::string{}, zkcoro::stat{}};
}

// Removes what an unfinished acquire left: the node we know, or the one our protected name made.
awaitable<void> abandon(client zk, std::string parent, std::string prefix, std::string node)
{
    if (node.empty()) {
        for (int attempt = 0; attempt < 20 && node.empty(); ++attempt) {
            auto [ec, path, st] = co_await find_protected(zk, parent, prefix);
            if (!ec)
                break;
            if (!is_retriable(ec) || !co_await wait_connected(zk, clock::now() + 60s))
                co_return;
        }
        // A find before the create's reply would miss it: the client layer deletes an abandoned
        // create's node itself when the reply comes.
        auto [ec, path, st] = co_await find_protected(zk, parent, prefix);
        node = path;
    }
    if (!node.empty())
        co_await guaranteed_delete(std::move(zk), node);
}

// Creates the parents of `path` (and `path` itself) as container nodes where missing.
awaitable<error_code> ensure_path(client& zk, const std::string& path)
{
    std::vector<std::string> chain;
    for (std::string p = path; p != "/"; p = std::string(parent_path(p)))
        chain.push_back(p);
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
        auto [ec, r] = co_await zk.async_create(*it, "", create_mode::container, use_tuple);
        if (ec && !is_zk(ec, ZNODEEXISTS))
            co_return ec;
    }
    co_return error_code{};
}

// The first local waiter still waiting, taken off the queue (null if none). Lock held.
std::shared_ptr<local_waiter> pop_waiting(mutex_state& s)
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

// A waiting local waiter gives up (timeout or cancellation). Lock held. The queue is compacted
// once most of it has given up, so that removal stays O(1) amortised.
void abandon(mutex_state& s, local_waiter& w)
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

// Passes the "our task is in ZooKeeper's queue" role to the first local waiter, or clears it.
// Returns the waiter to notify (outside the lock). Lock held.
std::shared_ptr<local_waiter> promote_next(mutex_state& s)
{
    if (auto w = pop_waiting(s)) {
        w->st = local_waiter::status::promoted;
        return w;
    }
    s.active = false;
    return nullptr;
}

void finish_direct(const std::shared_ptr<mutex_state>& s, const std::shared_ptr<local_waiter>& w);

// Tells a waiter whose status changed (granted or promoted) about it. Lock not held.
void notify(const std::shared_ptr<mutex_state>& s, const std::shared_ptr<local_waiter>& w)
{
    if (!w)
        return;
    if (w->wake)
        w->wake->complete({});
    else if (w->direct)
        finish_direct(s, w);
}

// The node is lost: its holder's guard reports it, the node is deleted (the session may come
// back), and the next local waiter queues anew.
void fire_lost(const std::shared_ptr<mutex_state>& s, const std::shared_ptr<node_state>& ns, std::string_view why)
{
    if (ns->lost.exchange(true))
        return;
    std::shared_ptr<hold> h;
    std::vector<std::shared_ptr<op_state<>>> waiters;
    std::shared_ptr<local_waiter> next;
    {
        std::lock_guard lk(s->m);
        h = std::move(ns->current);
        if (h) {
            ++s->metrics.losses;
            h->lost = true;
            auto it = s->holds.find(h->owner);
            if (it != s->holds.end() && it->second == h)
                s->holds.erase(it);
            waiters = std::move(h->lost_waiters);
            h->lost_waiters.clear();
            next = promote_next(*s);
        }
    }
    s->zk.log(log_level::warn, fmt::format("lock {} lost: {}", ns->node, why));
    if (h)
        h->lost_signal.emit(asio::cancellation_type::terminal);
    for (auto& w : waiters)
        w->complete(client_errc::lock_lost);
    notify(s, next);
    asio::co_spawn(s->zk.get_executor(), guaranteed_delete(client_access::share(s->zk), ns->node), asio::detached);
}

// Whether an exists reply shows our node still there, owned by the session that created it.
bool still_ours(const exists_result& r, const node_state& ns)
{
    return r.stat && r.stat->ephemeral_owner == ns.session_id;
}

// Watches the session of a held node and applies the lost policy. Runs on the client's executor
// until the node is released (monitor_stop) or lost.
// `left_connected`: the session has left the connected state since the node was taken (so a
// reconnection must check that the node survived).
awaitable<void> monitor(std::shared_ptr<mutex_state> st, std::shared_ptr<node_state> ns, bool left_connected)
{
    co_await asio::this_coro::throw_if_cancelled(false);
    auto& zk = st->zk;
    auto ex = co_await asio::this_coro::executor;
    bool was_suspended = left_connected;
    // No cap on the number of state changes: each round waits for one, and a lock may be held
    // for months across many reconnections. It ends at the release (cancellation) or the loss.
    while (!ns->lost) {
        auto s = zk.state();
        if (zk.session_generation() != ns->generation || s == session_state::expired ||
            s == session_state::closed || s == session_state::connecting) {
            fire_lost(st, ns, "the session expired or was closed");
            co_return;
        }
        if (s == session_state::suspended) {
            was_suspended = true;
            if (st->opts.policy == lost_policy::suspended) {
                fire_lost(st, ns, "the connection was lost (policy: suspended)");
                co_return;
            }
            if (st->opts.policy == lost_policy::deadline) {
                auto timeout = zk.session_timeout();
                auto margin = st->opts.safety_margin.count() > 0 ? st->opts.safety_margin : timeout / 5;
                asio::steady_timer t(ex, may_expire_at(zk.last_heard(), timeout, margin));
                auto [order, ec1, next, ec2] =
                    co_await asio::experimental::make_parallel_group(zk.async_wait_state(s, asio::deferred),
                                                                     t.async_wait(asio::deferred))
                        .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
                if (cancelled(co_await asio::this_coro::cancellation_state))
                    co_return;
                if (order[0] == 1 && !ec2) {
                    fire_lost(st, ns, "the session may have expired: not reconnected in time (policy: deadline)");
                    co_return;
                }
                continue;
            }
        }
        if (s == session_state::connected && was_suspended) {
            was_suspended = false;
            // Back on the same session: make sure our node survived.
            auto [ec, r] = co_await zk.async_exists(ns->node, use_tuple);
            if (cancelled(co_await asio::this_coro::cancellation_state))
                co_return;
            if (!ec && !still_ours(r, *ns)) {
                fire_lost(st, ns, "the lock node is gone");
                co_return;
            }
            continue;
        }
        auto [ec, next] = co_await zk.async_wait_state(s, use_tuple);
        if (ec)
            co_return;
    }
}

// Applies the lost policy to a held node. In the steady state (connected, same session) this is
// one wait for a change of the session state, with no coroutine; the monitor runs once the state
// changes. Both stop at monitor_stop (the release), which is emitted on the client's executor.
// The completion handlers keep the node state, and so the signal, alive: co_spawn clears the
// slot after the coroutine's frame (and its reference) is gone.
void watch_session(const std::shared_ptr<mutex_state>& s, const std::shared_ptr<node_state>& ns)
{
    auto state = s->zk.state();
    if (state != session_state::connected || s->zk.session_generation() != ns->generation) {
        asio::co_spawn(s->zk.get_executor(), monitor(s, ns, false),
                       asio::bind_cancellation_slot(ns->monitor_stop.slot(), [ns](std::exception_ptr) {}));
        return;
    }
    s->zk.async_wait_state(
        state, asio::bind_cancellation_slot(ns->monitor_stop.slot(), [s, ns](error_code ec, session_state) {
            if (ec || ns->lost)
                return;  // released (operation_aborted), or the client is closed
            asio::co_spawn(s->zk.get_executor(), monitor(s, ns, true),
                           asio::bind_cancellation_slot(ns->monitor_stop.slot(), [ns](std::exception_ptr) {}));
        }));
}

// Watches our own node while this process has it, so that a node deleted by anyone (an operator
// "breaking" a stuck lock, a script) counts as a loss within one round trip, even while the
// connection never dropped. The exists request is sent after the grant and nobody waits for its
// reply. A data change re-arms the watch.
void watch_node(const std::shared_ptr<mutex_state>& s, const std::shared_ptr<node_state>& ns)
{
    s->zk.async_exists(ns->node, leave_watch, [s, ns](error_code ec, exists_result r) {
        if (ns->lost || ns->released)
            return;
        if (ec)
            return;  // the session ended or the connection dropped: the session monitor decides
        if (!still_ours(r, *ns))
            return fire_lost(s, ns, "the lock node is gone (deleted by someone else)");
        r.watch.async_wait([s, ns](error_code wec, watch_event ev) {
            if (wec || ns->lost || ns->released)
                return;
            if (ev.type == watch_event_type::deleted)
                return fire_lost(s, ns, "the lock node was deleted by someone else");
            watch_node(s, ns);
        });
    });
}

// Watches a node we were just granted. When the listing that granted it left a children watch,
// that watch already covers our node's deletion at no extra request (the uncontended case);
// the first change of the queue (someone queues, or our node goes) moves us to watch_node.
void watch_held_node(const std::shared_ptr<mutex_state>& s, const std::shared_ptr<node_state>& ns,
                     zkcoro::watch queue_watch)
{
    if (!queue_watch.valid())
        return watch_node(s, ns);
    queue_watch.async_wait([s, ns](error_code ec, watch_event) {
        if (ec || ns->lost || ns->released)
            return;  // session ended (the monitor decides), or released: our own deletion
        watch_node(s, ns);
    });
}

// A release whose delete failed for good: counted, logged, and reported to the caller.
void release_failed(mutex_state& s, const std::string& node, op_state<>& op, error_code ec)
{
    {
        std::lock_guard lk(s.m);
        ++s.metrics.release_failures;
    }
    s.zk.log(log_level::error, fmt::format("lock {}: release failed: {}; the node stays until it is deleted "
                                           "or the session ends", node, ec.message()));
    op.complete(ec);
}

using engine_result = std::tuple<error_code, std::optional<queued_node>>;

// The lock queue engine: enters ZooKeeper's queue under `path` with a protected
// ephemeral-sequential node named `base_name`, and waits until `rule` says we hold. An empty
// result with no error: the deadline passed. On any unsuccessful end our node is deleted.
// `alone`: whether this lock object found the queue empty last time (its guess that it will now).
// When it guesses so, the first listing leaves a children watch, which then covers our node's
// deletion at no extra request; a waiter that guessed wrong gets one stray event when the queue
// next changes, and guesses "contended" next time, so under contention no listing leaves one.
awaitable<engine_result> queue_acquire(client& zk, std::string path, std::string base_name,
                                       std::function<void(std::vector<std::string>&)> sort, std::string data,
                                       queue_rule rule, clock::time_point deadline, std::atomic<bool>& alone)
{
    auto ex = co_await asio::this_coro::executor;
    // One generator per thread: constructing one seeds a Mersenne twister from the OS each time.
    thread_local boost::uuids::random_generator uuid_gen;
    const std::string prefix = "_c_" + boost::uuids::to_string(uuid_gen()) + "-";
    const std::string create_path = join_path(path, prefix + base_name);
    std::string node;
    zkcoro::stat node_stat;
    auto give_up = [&](error_code ec) -> engine_result {
        asio::co_spawn(ex, abandon(client_access::share(zk), path, prefix, node), asio::detached);
        return engine_result{ec, std::nullopt};
    };

    std::vector<std::string> children;
    bool have_children = false;
    // For rules that wait on the children (semaphores): list with a watch and wait on it.
    bool list_with_watch = false;
    zkcoro::watch children_watch;
    // Each round waits for an event, the deadline, or a reply, so it cannot spin; and no cap on
    // their number: a waiter behind a busy queue may see any number of predecessors go.
    for (;;) {
        if (cancelled(co_await asio::this_coro::cancellation_state))
            co_return give_up(asio::error::operation_aborted);
        if (node.empty()) {
            // Create and list in one round trip. When we expect to be alone, the listing leaves a
            // children watch: a holder granted by this listing learns from it, at no extra
            // request, when the queue changes (see watch_held_node); a semaphore waits on it.
            // (Two statements, not a conditional expression: see below.)
            std::tuple<std::array<std::size_t, 2>, error_code, create_result, error_code, children_result> r;
            if (alone)
                r = co_await asio::experimental::make_parallel_group(
                        zk.async_create(create_path, data, create_mode::ephemeral_sequential, asio::deferred),
                        zk.async_get_children(path, leave_watch, asio::deferred))
                        .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
            else
                r = co_await asio::experimental::make_parallel_group(
                        zk.async_create(create_path, data, create_mode::ephemeral_sequential, asio::deferred),
                        zk.async_get_children(path, asio::deferred))
                        .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
            auto& [order, cr_ec, cr, ch_ec, ch] = r;
            if (!ch_ec)
                alone = ch.children.size() == 1;
            if (cancelled(co_await asio::this_coro::cancellation_state))
                co_return give_up(asio::error::operation_aborted);
            if (is_zk(cr_ec, ZNONODE)) {
                if (auto ec = co_await ensure_path(zk, path); ec && !is_retriable(ec))
                    co_return give_up(ec);
                continue;
            }
            if (is_retriable(cr_ec)) {
                // The create may or may not have happened: find it by its protected name.
                if (!co_await wait_connected(zk, deadline))
                    co_return give_up(clock::now() >= deadline ? error_code{}
                                                               : make_error_code(client_errc::session_expired));
                auto [fe, found, st] = co_await find_protected(zk, path, prefix);
                if (!fe && !found.empty()) {
                    node = found;
                    node_stat = st;
                }
                continue;
            }
            if (cr_ec)
                co_return give_up(cr_ec);
            node = cr.path;
            node_stat = cr.stat;
            have_children = !ch_ec;
            children = std::move(ch.children);
            children_watch = std::move(ch.watch);
        }
        if (!have_children) {
            // (Two statements, not a conditional expression: GCC 12 miscompiles a co_await of a
            // conditional, destroying the awaitable's frame twice.)
            error_code ec;
            children_result ch;
            if (list_with_watch)
                std::tie(ec, ch) = co_await zk.async_get_children(path, leave_watch, use_tuple);
            else
                std::tie(ec, ch) = co_await zk.async_get_children(path, use_tuple);
            if (cancelled(co_await asio::this_coro::cancellation_state))
                co_return give_up(asio::error::operation_aborted);
            if (is_retriable(ec)) {
                if (!co_await wait_connected(zk, deadline))
                    co_return give_up(error_code{});
                continue;
            }
            if (ec)
                co_return give_up(ec);
            children = std::move(ch.children);
            children_watch = std::move(ch.watch);
        }
        have_children = false;
        sort(children);
        auto our_name = node_name(node);
        auto it = std::find(children.begin(), children.end(), our_name);
        if (it == children.end()) {
            // Our node is gone: the session was lost. Start over with a new node.
            zk.log(log_level::warn, fmt::format("lock node {} vanished while waiting; starting over", node));
            node.clear();
            if (clock::now() >= deadline)
                co_return give_up(error_code{});
            continue;
        }
        auto decision = rule(children, static_cast<std::size_t>(it - children.begin()));
        if (decision.holds)
            co_return engine_result{error_code{}, queued_node{node, node_stat, std::move(children_watch)}};
        if (clock::now() >= deadline)
            co_return give_up(error_code{});
        zkcoro::watch w;
        if (decision.watch_children) {
            if (!children_watch.valid()) {
                list_with_watch = true;
                continue;
            }
            w = std::move(children_watch);
        } else {
            auto watched = join_path(path, children[decision.watch_index]);
            // A get_data watch: an exists watch on a node that vanished meanwhile would stay.
            auto [gd_ec, gd] = co_await zk.async_get_data(watched, leave_watch, use_tuple);
            if (cancelled(co_await asio::this_coro::cancellation_state))
                co_return give_up(asio::error::operation_aborted);
            if (is_zk(gd_ec, ZNONODE))
                continue;
            if (is_retriable(gd_ec)) {
                if (!co_await wait_connected(zk, deadline))
                    co_return give_up(error_code{});
                continue;
            }
            if (gd_ec)
                co_return give_up(gd_ec);
            w = std::move(gd.watch);
        }
        asio::steady_timer timer(ex, deadline);
        auto [order, w_ec, ev, t_ec] =
            co_await asio::experimental::make_parallel_group(w.async_wait(asio::deferred),
                                                             timer.async_wait(asio::deferred))
                .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
        if (cancelled(co_await asio::this_coro::cancellation_state))
            co_return give_up(asio::error::operation_aborted);
        if (order[0] == 1)
            co_return give_up(error_code{});
        if (w_ec) {
            // The session ended while we waited: our node went with it.
            if (is_session_lost(w_ec)) {
                node.clear();
                if (zk.state() == session_state::closed)
                    co_return give_up(w_ec);
                continue;
            }
            co_return give_up(w_ec);
        }
        if (ev.type == watch_event_type::deleted && decision.deletion_grants)
            co_return engine_result{error_code{}, queued_node{node, node_stat, std::move(children_watch)}};
    }
}

using acquire_result = std::tuple<error_code, std::optional<guard>>;

// Waits for a local waiter's turn (grant or promotion), the deadline, or cancellation.
awaitable<void> wait_local(const std::shared_ptr<mutex_state>& s, const std::shared_ptr<local_waiter>& w,
                           clock::time_point deadline)
{
    auto ex = co_await asio::this_coro::executor;
    asio::steady_timer timer(ex, deadline);
    auto wait_turn = asio::async_initiate<decltype(asio::deferred), void(error_code)>(
        [s, w, ex](auto handler) {
            auto op = std::make_shared<op_state<>>(std::move(handler), ex);
            std::lock_guard lk(s->m);
            if (w->st != local_waiter::status::waiting)
                return void(op->complete({}));
            op->bind_cancellation();
            w->wake = op;
        },
        asio::deferred);
    co_await asio::experimental::make_parallel_group(std::move(wait_turn), timer.async_wait(asio::deferred))
        .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
}

std::shared_ptr<hold> make_hold(const std::shared_ptr<mutex_state>& s, const std::shared_ptr<node_state>& ns,
                                owner_id owner)
{
    auto h = std::make_shared<hold>();
    h->state = s;
    h->ns = ns;
    h->owner = owner;
    h->token = ns->czxid * token_scale + ns->handoffs;
    return h;
}

// We hold `node`: record it, watch its session, and give the owner its guard.
guard hold_node(const std::shared_ptr<mutex_state>& s, owner_id owner, const std::string& node,
                const zkcoro::stat& st, zkcoro::watch queue_watch = {})
{
    auto ns = std::make_shared<node_state>();
    ns->node = node;
    ns->czxid = st.czxid;
    ns->session_id = st.ephemeral_owner;
    ns->generation = s->zk.session_generation();
    auto h = make_hold(s, ns, owner);
    {
        std::lock_guard lk(s->m);
        ns->current = h;
        if (s->recipe.reentrant)
            s->holds[owner] = h;
    }
    watch_session(s, ns);
    if (s->recipe.watch_own_node)
        watch_held_node(s, ns, std::move(queue_watch));
    return guard(h, owner);
}

// Our turn in ZooKeeper's queue (we hold the "active" role): queue a node until it holds, or
// hand the role on to the next local waiter when that fails.
awaitable<acquire_result> queue_in_zk(std::shared_ptr<mutex_state> s, owner_id owner, clock::time_point deadline)
{
    auto [ec, queued] = co_await queue_acquire(s->zk, s->path, s->recipe.base_name, s->recipe.sort, s->data,
                                               s->recipe.rule, deadline, s->alone);
    if (ec || !queued) {
        std::shared_ptr<local_waiter> next;
        {
            std::lock_guard lk(s->m);
            next = promote_next(*s);
        }
        notify(s, next);
        co_return acquire_result{ec, std::nullopt};
    }
    co_return acquire_result{error_code{},
                             hold_node(s, owner, queued->path, queued->stat, std::move(queued->queue_watch))};
}

awaitable<acquire_result> acquire_coro(std::shared_ptr<mutex_state> s, owner_id owner, clock::time_point deadline)
{
    co_await asio::this_coro::throw_if_cancelled(false);
    co_await asio::this_coro::reset_cancellation_state(asio::enable_partial_cancellation());
    if (owner == 0)
        co_return acquire_result{client_errc::invalid_argument, std::nullopt};
    if (s->path_error)
        co_return acquire_result{s->path_error, std::nullopt};
    std::shared_ptr<local_waiter> w;
    std::string immediate;
    // The hooks look at the other side of a read-write lock: call them without our lock held.
    if (held_count(*s, owner) == 0) {
        if (s->recipe.precheck)
            if (auto pe = s->recipe.precheck(owner))
                co_return acquire_result{pe, std::nullopt};
        if (s->recipe.immediate_node)
            if (auto name = s->recipe.immediate_node(owner))
                immediate = std::move(*name);
    }
    {
        std::lock_guard lk(s->m);
        auto it = s->holds.find(owner);
        if (s->recipe.reentrant && it != s->holds.end() && !it->second->released && !it->second->lost) {
            ++it->second->count;
            co_return acquire_result{error_code{}, guard(it->second, owner)};
        }
        if (!immediate.empty()) {
            // Granted at once (downgrade): no queueing, no handoff.
        } else if (s->active && s->opts.local_handoff) {
            w = std::make_shared<local_waiter>();
            w->owner = owner;
            s->queue.push_back(w);
        } else {
            s->active = true;
        }
    }

    if (w) {
        // Behind another task of ours: wait for it to hand the lock over in memory.
        co_await wait_local(s, w, deadline);
        bool aborted = cancelled(co_await asio::this_coro::cancellation_state);
        std::shared_ptr<hold> granted;
        {
            std::lock_guard lk(s->m);
            if (w->st == local_waiter::status::granted) {
                granted = w->grant;
            } else if (w->st == local_waiter::status::waiting) {
                // Timed out or cancelled while still queued.
                abandon(*s, *w);
                co_return acquire_result{aborted ? make_error_code(asio::error::operation_aborted) : error_code{},
                                         std::nullopt};
            }
        }
        if (granted) {
            guard g(granted, owner);
            if (aborted) {
                // Granted and cancelled at the same moment: pass it on.
                co_return acquire_result{asio::error::operation_aborted, std::nullopt};
            }
            co_return acquire_result{error_code{}, std::move(g)};
        }
        // Promoted: we are now the task of ours in ZooKeeper's queue.
        if (aborted || clock::now() >= deadline) {
            std::shared_ptr<local_waiter> next;
            {
                std::lock_guard lk(s->m);
                next = promote_next(*s);
            }
            notify(s, next);
            co_return acquire_result{aborted ? make_error_code(asio::error::operation_aborted) : error_code{},
                                     std::nullopt};
        }
    }

    if (!immediate.empty()) {
        auto [ec, r] = co_await s->zk.async_create(join_path(s->path, immediate), s->data, create_mode::ephemeral, use_tuple);
        if (ec)
            co_return acquire_result{ec, std::nullopt};
        co_return acquire_result{error_code{}, hold_node(s, owner, r.path, r.stat)};
    }
    co_return co_await queue_in_zk(s, owner, deadline);
}

// A direct waiter's turn in ZooKeeper's queue (it was promoted).
awaitable<acquire_result> acquire_promoted(std::shared_ptr<mutex_state> s, owner_id owner, clock::time_point deadline)
{
    co_await asio::this_coro::throw_if_cancelled(false);
    co_await asio::this_coro::reset_cancellation_state(asio::enable_partial_cancellation());
    if (clock::now() >= deadline) {
        std::shared_ptr<local_waiter> next;
        {
            std::lock_guard lk(s->m);
            next = promote_next(*s);
        }
        notify(s, next);
        co_return acquire_result{error_code{}, std::nullopt};
    }
    co_return co_await queue_in_zk(s, owner, deadline);
}

// Completes a direct acquisition and counts it. Any thread.
void complete_direct(mutex_state& s, local_waiter& w, error_code ec, std::optional<guard> g)
{
    complete_counted(s, *w.direct, w.started, ec, std::move(g));
}

void finish_direct(const std::shared_ptr<mutex_state>& s, const std::shared_ptr<local_waiter>& w)
{
    if (w->st == local_waiter::status::granted) {
        guard g(w->grant, w->owner);
        complete_direct(*s, *w, error_code{}, std::move(g));
        return;
    }
    // Promoted: queue in ZooKeeper on the caller's behalf, cancellable through its slot.
    spawn_counted(s, acquire_promoted(s, w->owner, w->deadline), w->direct, w->started);
}

// The direct waiter gave up (timeout or cancellation) if it is still waiting. Any thread.
void give_up_direct(const std::shared_ptr<mutex_state>& s, const std::shared_ptr<local_waiter>& w, error_code ec)
{
    {
        std::lock_guard lk(s->m);
        if (w->st != local_waiter::status::waiting)
            return;
        abandon(*s, *w);
    }
    complete_direct(*s, *w, ec, std::nullopt);
}

void on_deadline_timer(const std::weak_ptr<mutex_state>& weak_s, error_code ec);

// Sets the deadline timer to the earliest deadline. Lock held.
void arm_deadline_timer(const std::shared_ptr<mutex_state>& s)
{
    if (s->deadlines.empty() || s->deadlines.front().at >= s->timer_at)
        return;
    if (!s->deadline_timer)
        s->deadline_timer = std::make_unique<asio::steady_timer>(s->zk.get_executor());
    s->timer_at = s->deadlines.front().at;
    s->deadline_timer->expires_at(s->timer_at);  // a wait still pending completes as aborted
    std::weak_ptr<mutex_state> weak_s = s;
    s->deadline_timer->async_wait([weak_s](error_code ec) { on_deadline_timer(weak_s, ec); });
}

// Records a direct waiter's deadline. Lock held. Entries of waiters that are done are dropped
// once they make up most of the heap, so it stays within twice the waiters (amortised O(log n)).
void add_deadline(const std::shared_ptr<mutex_state>& s, const std::shared_ptr<local_waiter>& w,
                  clock::time_point at)
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
    d.push_back({at, w});
    std::push_heap(d.begin(), d.end());
    arm_deadline_timer(s);
}

// Times out every direct waiter whose deadline has come, then sets the timer for the next one.
void on_deadline_timer(const std::weak_ptr<mutex_state>& weak_s, error_code ec)
{
    if (ec)
        return;  // re-armed or destroyed
    auto s = weak_s.lock();
    if (!s)
        return;
    std::vector<std::shared_ptr<local_waiter>> expired;
    {
        std::lock_guard lk(s->m);
        s->timer_at = clock::time_point::max();
        auto now = clock::now();
        auto& d = s->deadlines;
        for (std::size_t i = 0; i < 10'000'000 && !d.empty() && d.front().at <= now; ++i) {
            std::pop_heap(d.begin(), d.end());
            auto w = d.back().w.lock();
            d.pop_back();
            if (w && w->st == local_waiter::status::waiting) {
                abandon(*s, *w);
                expired.push_back(std::move(w));
            }
        }
        arm_deadline_timer(s);
    }
    for (auto& w : expired)
        complete_direct(*s, *w, error_code{}, std::nullopt);
}

// The fast path of start_acquire: when another task of ours is already in ZooKeeper's queue or
// holds, wait behind it in memory with no coroutine. Returns false when the caller must take the
// full path. Only for recipes without hooks (hooks are called without the lock held).
bool try_direct(const std::shared_ptr<mutex_state>& s, owner_id owner, clock::time_point deadline,
                const std::shared_ptr<op_state<std::optional<guard>>>& op)
{
    if (owner == 0 || s->path_error || s->recipe.precheck || s->recipe.immediate_node || !s->opts.local_handoff)
        return false;
    std::shared_ptr<local_waiter> w;
    {
        std::lock_guard lk(s->m);
        if (!s->active)
            return false;
        auto it = s->holds.find(owner);
        if (it != s->holds.end() && !it->second->released && !it->second->lost)
            return false;  // reentrant: the full path counts it
        // Allocated only now: an uncontended acquire takes the full path and needs no waiter.
        w = std::make_shared<local_waiter>();
        w->owner = owner;
        w->direct = op;
        w->deadline = deadline;
        w->started = clock::now();
        s->queue.push_back(w);
        if (deadline != clock::time_point::max())
            add_deadline(s, w, deadline);
    }
    std::weak_ptr<local_waiter> weak_w = w;
    std::weak_ptr<mutex_state> weak_s = s;
    op->bind_cancellation_with([weak_s, weak_w](asio::cancellation_type t) {
        if ((t & (asio::cancellation_type::terminal | asio::cancellation_type::partial)) == asio::cancellation_type::none)
            return;
        auto ws = weak_s.lock();
        auto ww = weak_w.lock();
        if (ws && ww)
            give_up_direct(ws, ww, asio::error::operation_aborted);
    });
    return true;
}

awaitable<std::tuple<error_code, std::vector<participant>>> participants_coro(std::shared_ptr<mutex_state> s)
{
    using result = std::tuple<error_code, std::vector<participant>>;
    if (s->path_error)
        co_return result{s->path_error, {}};
    auto [ec, ch] = co_await s->zk.async_get_children(s->path, use_tuple);
    if (is_zk(ec, ZNONODE))
        co_return result{};
    if (ec)
        co_return result{ec, {}};
    s->recipe.sort(ch.children);
    std::vector<participant> out;
    for (auto& name : ch.children) {
        auto path = join_path(s->path, name);
        auto [dec, d] = co_await s->zk.async_get_data(path, use_tuple);
        if (is_zk(dec, ZNONODE))
            continue;
        if (dec)
            co_return result{dec, {}};
        const bool foreign = std::none_of(s->recipe.markers.begin(), s->recipe.markers.end(),
                                          [&](const std::string& m) { return name.find(m) != std::string::npos; });
        out.push_back({name, path, std::move(d.data), d.stat.ephemeral_owner, d.stat.ctime, d.stat.czxid, foreign});
    }
    co_return result{error_code{}, std::move(out)};
}

}  // namespace

// Completes a guard's wait for loss (or release).
void async_wait_lost_impl(std::shared_ptr<hold> h, any_handler<void(error_code)> handler)
{
    auto ex = h ? h->state->zk.get_executor() : asio::any_io_executor(asio::system_executor());
    auto op = std::make_shared<op_state<>>(std::move(handler), ex);
    if (!h)
        return void(op->complete(client_errc::invalid_argument));
    {
        std::lock_guard lk(h->state->m);
        if (!h->lost && !h->released) {
            op->bind_cancellation();
            h->lost_waiters.push_back(op);
            return;
        }
    }
    op->complete(h->lost ? make_error_code(client_errc::lock_lost) : make_error_code(asio::error::operation_aborted));
}

std::shared_ptr<mutex_state> make_mutex_state(client& c, std::string path, mutex_options opts, recipe_params params)
{
    return std::make_shared<mutex_state>(c, std::move(path), std::move(opts), std::move(params));
}

std::optional<std::string> held_node(mutex_state& s, owner_id owner)
{
    std::lock_guard lk(s.m);
    auto it = s.holds.find(owner);
    if (it == s.holds.end() || it->second->lost || it->second->released)
        return std::nullopt;
    return it->second->ns->node;
}

std::size_t held_count(mutex_state& s, owner_id owner)
{
    std::lock_guard lk(s.m);
    auto it = s.holds.find(owner);
    return it == s.holds.end() || it->second->lost ? 0 : it->second->count;
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// guard

guard::guard(std::shared_ptr<detail::hold> h, owner_id owner) noexcept : hold_(std::move(h)), owner_(owner) {}
guard::guard(guard&& o) noexcept : hold_(std::move(o.hold_)), owner_(o.owner_) {}
guard& guard::operator=(guard&& o) noexcept
{
    if (this != &o) {
        if (hold_)
            release_with([](error_code) {});  // a failure is logged and counted by release_with
        hold_ = std::move(o.hold_);
        owner_ = o.owner_;
    }
    return *this;
}

guard::~guard()
{
    if (hold_)
        release_with([](error_code) {});  // a failure is logged and counted by release_with
}

std::int64_t guard::fencing_token() const noexcept { return hold_ ? hold_->token : 0; }
const std::string& guard::node_path() const noexcept
{
    static const std::string empty;
    return hold_ ? hold_->ns->node : empty;
}
std::int64_t guard::session_id() const noexcept { return hold_ ? hold_->ns->session_id : 0; }
bool guard::lost() const noexcept { return hold_ && hold_->lost; }
asio::cancellation_slot guard::lost_slot() noexcept
{
    return hold_ ? hold_->lost_signal.slot() : asio::cancellation_slot();
}

asio::awaitable<void> guard::release()
{
    co_await async_release(asio::use_awaitable);
}

void guard::release_with(detail::any_handler<void(error_code)> handler)
{
    using detail::op_state;
    if (!hold_) {
        auto op = std::make_shared<op_state<>>(std::move(handler), asio::any_io_executor(asio::system_executor()));
        return void(op->complete(client_errc::invalid_argument));
    }
    auto h = hold_;
    auto& s = *h->state;
    auto op = std::make_shared<op_state<>>(std::move(handler), s.zk.get_executor());
    hold_.reset();
    std::vector<std::shared_ptr<op_state<>>> waiters;
    std::shared_ptr<detail::local_waiter> next;
    auto ns = h->ns;
    bool last = false;
    bool handed = false;
    {
        std::lock_guard lk(s.m);
        if (h->count > 0 && --h->count == 0 && !h->released) {
            h->released = true;
            last = true;
            auto it = s.holds.find(h->owner);
            if (it != s.holds.end() && it->second == h)
                s.holds.erase(it);
            waiters = std::move(h->lost_waiters);
            h->lost_waiters.clear();
            if (!h->lost && ns->current == h) {
                ns->current = nullptr;
                // Hand over in memory to the next task of ours, unless the batch is used up.
                if (ns->handoffs < detail::max_handoffs)
                    if (auto w = detail::pop_waiting(s)) {
                    ++ns->handoffs;
                    ++s.metrics.local_handoffs;
                    auto h2 = detail::make_hold(h->state, ns, w->owner);
                    ns->current = h2;
                    s.holds[w->owner] = h2;
                    w->grant = h2;
                    w->st = detail::local_waiter::status::granted;
                    next = w;
                }
                handed = ns->current != nullptr;
                if (!handed)
                    next = detail::promote_next(s);
            }
        }
    }
    for (auto& w : waiters)
        w->complete(asio::error::operation_aborted);
    if (!last || h->lost)
        return void(op->complete({}));
    if (handed) {
        // Handed over: the node stays.
        detail::notify(h->state, next);
        return void(op->complete({}));
    }
    detail::notify(h->state, next);
    // Stop the monitor (on the executor it runs on), then delete the node. The first attempt is
    // a plain request; only a retriable failure starts the retrying coroutine.
    ns->released = true;  // from here on, the deletion our own watch sees is ours
    asio::post(s.zk.get_executor(), [ns, op, st = h->state] {
        ns->monitor_stop.emit(asio::cancellation_type::terminal);
        st->zk.async_remove(ns->node, -1, [ns, op, st](error_code ec) {
            if (!ec || ec == make_zk_error(ZNONODE) || is_session_lost(ec))
                return void(op->complete({}));
            if (!is_retriable(ec))
                return detail::release_failed(*st, ns->node, *op, ec);
            asio::co_spawn(st->zk.get_executor(), detail::guaranteed_delete(detail::client_access::share(st->zk), ns->node),
                           [op, ns, st](std::exception_ptr e, error_code ec2) {
                               if (e)
                                   ec2 = make_zk_error(ZSYSTEMERROR);
                               if (ec2)
                                   return detail::release_failed(*st, ns->node, *op, ec2);
                               op->complete({});
                           });
        });
    });
}

// ---------------------------------------------------------------------------------------------
// mutex

mutex::mutex(client& c, std::string path, mutex_options opts)
    : state_(detail::make_mutex_state(c, std::move(path), std::move(opts), {}))
{
}

mutex::mutex(std::shared_ptr<detail::mutex_state> state) noexcept : state_(std::move(state)) {}

mutex::mutex(mutex&&) noexcept = default;

mutex::~mutex() = default;

const std::string& mutex::path() const noexcept { return state_->path; }
client::executor_type mutex::get_executor() const noexcept { return state_->zk.get_executor(); }
bool mutex::is_read_side() const noexcept { return state_->recipe.base_name == "__READ__"; }

std::uint64_t mutex::local_handoffs() const
{
    std::lock_guard lk(state_->m);
    return state_->metrics.local_handoffs;
}

lock_metrics mutex::metrics() const
{
    std::lock_guard lk(state_->m);
    return state_->metrics;
}

std::size_t mutex::hold_count(owner_id owner) const { return detail::held_count(*state_, owner); }

asio::awaitable<guard> mutex::acquire()
{
    auto me = co_await this_task::id();
    auto g = co_await async_acquire(me, std::chrono::steady_clock::duration::max(), asio::use_awaitable);
    co_return std::move(*g);
}

asio::awaitable<std::optional<guard>> mutex::acquire(std::chrono::steady_clock::duration timeout)
{
    auto me = co_await this_task::id();
    co_return co_await async_acquire(me, timeout, asio::use_awaitable);
}

asio::awaitable<std::optional<guard>> mutex::try_acquire()
{
    return acquire(std::chrono::steady_clock::duration::zero());
}

void mutex::start_acquire(owner_id o, std::chrono::steady_clock::duration t,
                          detail::any_handler<void(error_code, std::optional<guard>)> handler)
{
    auto deadline = detail::deadline_after(t);
    auto op = std::make_shared<detail::op_state<std::optional<guard>>>(std::move(handler), state_->zk.get_executor());
    if (detail::try_direct(state_, o, deadline, op))
        return;
    detail::spawn_counted(state_, detail::acquire_coro(state_, o, deadline), std::move(op),
                          std::chrono::steady_clock::now());
}

void mutex::start_participants(detail::any_handler<void(error_code, std::vector<participant>)> handler)
{
    auto op = std::make_shared<detail::op_state<std::vector<participant>>>(std::move(handler), state_->zk.get_executor());
    asio::co_spawn(state_->zk.get_executor(), detail::participants_coro(state_),
                   [op](std::exception_ptr e, std::tuple<error_code, std::vector<participant>> r) {
                       if (e)
                           return void(op->complete(make_zk_error(ZSYSTEMERROR), std::vector<participant>{}));
                       op->complete(std::get<0>(r), std::move(std::get<1>(r)));
                   });
}

}  // namespace zkcoro
