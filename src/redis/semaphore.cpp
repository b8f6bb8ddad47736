// The Redis semaphore (redis_semaphore): each acquisition runs one script that grants its n
// leases when they fit beside the holders' and those of every waiter queued before it (FIFO, all
// or nothing), else queues it (redis/semaphore_scripts.cpp); a release, or a script that dropped
// an expired holder or a gone waiter, tells the waiters at the head that now fit, and only them
// (a message naming each on its process's channel, as the fair lock's). The holder is the other
// Redis locks': one guard for its n leases, renewal (redis/renewal.cpp), lost signal and fencing
// token; the lock object runs every acquisition on the server in its own right (no handoff in
// memory, not reentrant).
#include "redis/backend.hpp"

#include <zkcoro/detail/access.hpp>
#include <zkcoro/redis_semaphore.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <unordered_map>
#include <utility>

namespace zkcoro {

namespace detail {

struct sem_keys {
    std::string leases, max_key;             // P:leases (holders -> expiry), P:max
    std::string max_arg, ttl_arg, wait_arg;  // max_leases, the TTL and the waiter timeout, as ARGV
    int max_leases = 0;
    // The leases each pending acquisition asks for, by its operation: the lock object starts the
    // backend's part (start_sem) within the acquisition's own call, which passes no count.
    std::mutex m;
    std::unordered_map<const void*, int> asks;  // guarded by m
};

namespace {

// An acquire script's reply: {1, fencing token} (granted) or {0, position, ms until the first
// holder's leases expire or -1, ms left of the head's timeout or -1} (queued).
bool sem_reply_ok(const redis_reply& r)
{
    using k = redis_reply::kind;
    if (r.type != k::array || r.elements.size() < 2 || r.elements[0].type != k::integer ||
        r.elements[1].type != k::integer)
        return false;
    return r.elements[0].integer == 1 ||
           (r.elements.size() >= 4 && r.elements[2].type == k::integer && r.elements[3].type == k::integer);
}

// The acquisition of `n` leases: as the fair lock's (redis/fair_lock.cpp), with the semaphore's
// script and its reply.
asio::awaitable<redis_acquire_result> sem_take(active_task task, std::shared_ptr<redis_backend> b, int n)
{
    co_await asio::this_coro::throw_if_cancelled(false);
    co_await asio::this_coro::reset_cancellation_state(asio::enable_partial_cancellation());
    const auto& s = task.object();
    const auto deadline = task.deadline();
    // Every attempt sent may have queued us, or granted us with its reply lost: leaving runs the
    // release script, which gives back what our value holds, takes us out of the queue and tells
    // the waiters that then fit (sent after the attempts on the connection, so run after them).
    bool sent_any = false;
    const std::string count = std::to_string(n);
    const std::string value = new_value(task.owner()) + ":s" + count;
    auto fail = [&](error_code ec) {
        if (sent_any && !b->rc->closing())
            b->take_back(s->path, value);
        task.failed();
        return redis_acquire_result{ec, std::nullopt};
    };
    if (b->config_error)
        co_return fail(b->config_error);
    if (n < 1 || n > b->sem->max_leases)
        co_return fail(redis_errc::bad_leases);
    auto ex = co_await asio::this_coro::executor;
    const auto refresh = b->fair->waiter_timeout / 3;  // a live waiter's timeout never runs out
    waiter me;
    me.value = &value;
    b->ensure_close_hook();
    b->waiters.push_back(&me);
    struct unlist {
        redis_backend& b;
        waiter& w;
        ~unlist() { b.waiters.remove(&w); }
    } unlist_me{*b, me};
    std::chrono::milliseconds retry{0};
    error_code transient;  // as in take(): what the acquisition fails with at its deadline
    // Each round: one attempt (which also renews our place in the queue), then a wait for a
    // message naming us, our refresh time, the first holder's expiry (at the head), the head's
    // timeout (second in line), a resubscription or the deadline. The deadline bounds the rounds.
    for (;;) {
        me.notified = false;
        co_await b->wait_connected(deadline);
        const bool stopped = co_await cancelled();  // (not in the condition: see docs/building.md, Compilers)
        if (stopped)
            co_return fail(asio::error::operation_aborted);
        const auto sent = steady_clock::now();
        sent_any = true;
        const auto args = b->sem_args(value, count);
        error_code ec;
        redis_reply r;
        std::tie(ec, r) = co_await b->run(semaphore_acquire_script().text, semaphore_acquire_script().sha, 5, args,
                                          std::max(deadline, sent + std::chrono::seconds(1)));
        const bool stopped_now = co_await cancelled();
        if (stopped_now)
            co_return fail(asio::error::operation_aborted);
        std::chrono::milliseconds wait{0};
        if (ec == redis_errc::connection_lost || ec == asio::error::timed_out) {
            // Unknown whether it ran: the next attempt finds out (our own value counts as ours).
            if (ec == redis_errc::connection_lost)
                transient = ec;
            if (steady_clock::now() >= deadline)
                co_return fail(transient);
        } else if (ec) {
            if (r.type == redis_reply::kind::error)
                b->keep_server_text(ec, std::move(r.str));
            if (!transient_acquire_error(ec) || steady_clock::now() >= deadline ||
                b->rc->state.load() == redis_state::closed || b->rc->closing())
                co_return fail(ec);
            if (ec != redis_errc::not_replicated)
                b->rc->log(ec == transient ? log_level::debug : log_level::warn,
                           fmt::format("redis semaphore {}: {}; trying again within the acquisition's deadline",
                                       s->path, ec.message()));
            transient = ec;
            wait = next_retry(retry);
        } else {
            if (!sem_reply_ok(r))
                co_return fail(redis_errc::unexpected_reply);
            if (r.elements[0].integer == 1) {
                if (steady_clock::now() < b->held_until(sent))
                    co_return redis_acquire_result{error_code{}, hold_key(task, b, value, r.elements[1].integer, sent)};
                // Too late to be sure of (see take()): the next attempt, at once, is granted again
                // (our value holds) or finds our leases expired and queues again.
                b->rc->log(log_level::warn, fmt::format("redis semaphore {}: granted, but the reply came later "
                                                        "than the TTL less the safety margin; trying again",
                                                        s->path));
                if (steady_clock::now() >= deadline)
                    co_return fail(transient);
                continue;
            }
            transient = {};
            retry = {};
            const auto position = r.elements[1].integer;
            const auto first_expiry = r.elements[2].integer;
            const auto head_left = r.elements[3].integer;
            wait = std::chrono::duration_cast<std::chrono::milliseconds>(refresh);
            // The head: a crashed holder tells nobody; its leases come back when they expire.
            if (position == 0 && first_expiry >= 0)
                wait = std::min(wait, std::chrono::milliseconds(first_expiry + 1));
            else if (position == 1 && head_left >= 0)
                wait = std::min(wait, std::chrono::milliseconds(head_left + 1));  // the head may be gone by then
        }
        if (steady_clock::now() >= deadline)
            co_return fail(transient);
        if (!b->subscribed) {
            // Subscribe; its confirmation wakes every waiter (a message before it is missed).
            b->ensure_subscribed();
            wait = std::min(wait, b->opts.ttl);
        }
        if (me.notified)
            continue;
        asio::steady_timer t(ex);
        t.expires_at(std::min(deadline, steady_clock::now() + wait));
        me.timer = &t;
        co_await t.async_wait(use_tuple);
        me.timer = nullptr;
        const bool stopped_waiting = co_await cancelled();
        if (stopped_waiting)
            co_return fail(asio::error::operation_aborted);
        if (b->rc->closing())
            co_return fail(redis_errc::closed);
        if (steady_clock::now() >= deadline)
            co_return fail(transient);
    }
}

// A fresh owner per acquisition: the leases of one task's acquisitions are separate holds.
owner_id sem_owner()
{
    static std::atomic<owner_id> next{1};
    return (owner_id{1} << (sizeof(owner_id) * 8 - 1)) | next++;
}

}  // namespace

void redis_backend::start_sem(active_task task)
{
    int n = 0;
    {
        std::lock_guard lk(sem->m);
        if (auto it = sem->asks.find(task.op().get()); it != sem->asks.end()) {
            n = it->second;
            sem->asks.erase(it);
        }
    }
    spawn_task(task, [self = shared_from_this(), n](active_task t) { return sem_take(std::move(t), self, n); });
}

std::array<std::string_view, 11> redis_backend::sem_args(std::string_view value, std::string_view n) const
{
    return {sem->leases, fence_key,      fair->queue, fair->timeouts, sem->max_key, value,
            sem->ttl_arg, sem->wait_arg, fair->prefix, sem->max_arg,  n};
}

// ZRANGE of the holders and LRANGE of the queue, pipelined; the first error, if any.
void redis_backend::sem_participants(const std::shared_ptr<lock_object>&,
                                     std::shared_ptr<op_state<std::vector<participant>>> op)
{
    auto out = std::make_shared<std::vector<participant>>();
    auto first_ec = std::make_shared<error_code>();
    auto add = [out, first_ec](error_code ec, const redis_reply& r, const std::string& path, bool holds) {
        if (ec && !*first_ec)
            *first_ec = ec;
        for (auto& e : r.elements) {
            participant p;
            p.name = p.data = e.str;
            p.path = path;
            p.holds = holds;
            out->push_back(std::move(p));
        }
    };
    auto holders = std::make_shared<reply_op>(
        [add, path = sem->leases](error_code ec, redis_reply r) { add(ec, r, path, true); }, rc->strand);
    auto waiting = std::make_shared<reply_op>(
        [add, op, out, first_ec, path = fair->queue](error_code ec, redis_reply r) {
            add(ec, r, path, false);
            op->complete(*first_ec, std::move(*out));
        },
        rc->strand);
    asio::dispatch(rc->strand, [rc = rc, holders, waiting, leases = sem->leases, queue = fair->queue] {
        const std::string_view zrange[] = {"ZRANGE", leases, "0", "-1"};
        rc->exec(zrange, holders);
        const std::string_view lrange[] = {"LRANGE", queue, "0", "-1"};
        rc->exec(lrange, waiting);
    });
}

}  // namespace detail

namespace {

std::shared_ptr<detail::lock_object> make_semaphore_object(redis_client& c, std::string key, int max_leases,
                                                           const redis_semaphore_options& opts)
{
    auto impl = detail::access::redis_of(c);
    // The recipes' one naming rule (key() says {key} on a cluster); the semaphore's keys are all
    // under P, the same either way.
    key = detail::recipe_key(impl->url, std::move(key));
    redis_mutex_options m;
    m.ttl = opts.ttl;
    m.safety_margin = opts.safety_margin;
    m.local_handoff = false;
    const auto prefix = detail::fair_prefix(key);
    detail::fair_keys f;
    f.queue = prefix + ":queue";
    f.timeouts = prefix + ":timeouts";
    f.prefix = prefix + ":wake:";
    f.waiter_timeout = opts.waiter_timeout.count() == 0 ? opts.ttl : opts.waiter_timeout;
    auto k = std::make_shared<detail::sem_keys>();
    k->leases = prefix + ":leases";
    k->max_key = prefix + ":max";
    k->max_arg = std::to_string(max_leases);
    k->ttl_arg = std::to_string(opts.ttl.count());
    k->wait_arg = std::to_string(f.waiter_timeout.count());
    k->max_leases = max_leases;
    auto backend = std::make_shared<detail::redis_backend>(impl, key, m, std::move(f), std::move(k));
    if (max_leases < 1 && !backend->config_error)  // (a bad key or TTL says so first)
        backend->config_error = redis_errc::bad_leases;
    detail::recipe_params p;
    p.reentrant = false;  // each acquisition its own hold, with its own leases
    p.watch_own_node = false;
    mutex_options e;
    e.local_handoff = false;
    return std::make_shared<detail::lock_object>(std::move(backend), impl->strand, std::move(key), e, p);
}

}  // namespace

redis_semaphore::redis_semaphore(redis_client& c, std::string key, int max_leases, redis_semaphore_options opts)
    : state_(make_semaphore_object(c, std::move(key), max_leases, opts)), max_(max_leases)
{
}

redis_semaphore::redis_semaphore(redis_semaphore&&) noexcept = default;
redis_semaphore::~redis_semaphore() = default;

const std::string& redis_semaphore::key() const noexcept { return state_->path; }

redis_semaphore::executor_type redis_semaphore::get_executor() const noexcept { return state_->ex; }

lock_metrics redis_semaphore::metrics() const { return detail::lock_metrics_of(state_); }

void redis_semaphore::start_acquire(int n, std::chrono::steady_clock::duration timeout,
                                    detail::any_handler<void(error_code, std::optional<guard>)> handler)
{
    auto op = detail::make_pooled<detail::op_state<std::optional<guard>>>(std::move(handler), state_->ex);
    auto& sem = *static_cast<detail::redis_backend&>(*state_->backend).sem;
    {
        std::lock_guard lk(sem.m);
        sem.asks[op.get()] = n;
    }
    state_->acquire(detail::sem_owner(), detail::deadline_after(timeout), op);
    std::lock_guard lk(sem.m);
    sem.asks.erase(op.get());  // when the acquisition ended before the backend's start
}

asio::awaitable<std::optional<guard>> redis_semaphore::acquire(int n, std::chrono::steady_clock::duration timeout)
{
    auto [ec, g] = co_await async_acquire(n, timeout, asio::as_tuple(asio::use_awaitable));
    if (ec)
        throw boost::system::system_error(ec, state_->backend->failure_context("acquire", state_->path, ec));
    co_return std::move(g);
}

asio::awaitable<guard> redis_semaphore::acquire(int n)
{
    auto g = co_await acquire(n, std::chrono::steady_clock::duration::max());
    co_return std::move(*g);
}

asio::awaitable<std::optional<guard>> redis_semaphore::try_acquire(int n)
{
    return acquire(n, std::chrono::steady_clock::duration::zero());
}

}  // namespace zkcoro
