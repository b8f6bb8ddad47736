// The fair Redis lock (redis_fair_mutex): every acquisition queues on the server in arrival order
// (redis/lock_scripts.cpp: fair_acquire_script), only the head is granted, a release or a leave
// tells the next waiter alone (a message naming it on its process's channel), and a waiter that
// stops coming back (crashed, cut off) leaves the queue when its timeout passes. The holder is a
// redis_mutex's: the same key, renewal (redis/renewal.cpp), lost signal and fencing token.
#include "redis/backend.hpp"
#include "redis/slot.hpp"

#include <zkcoro/detail/access.hpp>
#include <zkcoro/redis_fair_mutex.hpp>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <utility>

namespace zkcoro {

namespace detail {

namespace {

// A fair acquire script's reply: {1, fencing token} (granted) or {0, pttl, holder, position,
// ms left of the head's timeout} (queued).
bool fair_reply_ok(const redis_reply& r)
{
    using k = redis_reply::kind;
    if (r.type != k::array || r.elements.size() < 2 || r.elements[0].type != k::integer ||
        r.elements[1].type != k::integer)
        return false;
    return r.elements[0].integer == 1 ||
           (r.elements.size() >= 5 && r.elements[2].type == k::string && r.elements[3].type == k::integer &&
            r.elements[4].type == k::integer);
}

}  // namespace

asio::awaitable<redis_acquire_result> redis_backend::take_fair(active_task task, std::shared_ptr<redis_backend> b)
{
    co_await asio::this_coro::throw_if_cancelled(false);
    co_await asio::this_coro::reset_cancellation_state(asio::enable_partial_cancellation());
    const auto& s = task.object();
    const auto deadline = task.deadline();
    // Every attempt sent may have queued us, or granted us with its reply lost: leaving runs the
    // release script, which deletes the key only while it holds our value, takes us out of the
    // queue and tells the next waiter (sent after the attempts on the connection, so run after them).
    bool sent_any = false;
    std::string value = new_value(task.owner()) + ":q";
    auto fail = [&](error_code ec) {
        if (sent_any && !b->rc->closing())
            b->take_back(s->path, value);
        task.failed();
        return redis_acquire_result{ec, std::nullopt};
    };
    if (b->config_error)
        co_return fail(b->config_error);
    auto ex = co_await asio::this_coro::executor;
    const auto& fk = *b->fair;
    const auto ttl = std::to_string(b->opts.ttl.count());
    const auto wt = std::to_string(fk.waiter_timeout.count());
    const auto refresh = fk.waiter_timeout / 3;  // a live waiter's timeout never runs out
    waiter me;
    me.value = &value;
    b->ensure_close_hook();
    b->waiters.push_back(&me);
    struct unlist {
        redis_backend& b;
        waiter& w;
        ~unlist() { b.waiters.remove(&w); }
    } unlist_me{*b, me};
    std::chrono::milliseconds poll{0};
    std::chrono::milliseconds retry{0};
    error_code transient;  // as in take(): what the acquisition fails with at its deadline
    // Each round: one attempt (which also renews our place in the queue), then a wait for a
    // message naming us, our refresh time, the key's TTL (at the head), the head's timeout
    // (second in line), a resubscription or the deadline. The deadline bounds the rounds.
    for (;;) {
        me.notified = false;
        co_await b->wait_connected(deadline);
        const bool stopped = co_await cancelled();  // (not in the condition: see docs/building.md, Compilers)
        if (stopped)
            co_return fail(asio::error::operation_aborted);
        const auto sent = steady_clock::now();
        sent_any = true;
        // (The arguments are built apart: g++ 12 miscompiles a braced list inside co_await.)
        const std::array<std::string_view, 8> args{s->path, b->fence_key, fk.queue, fk.timeouts,
                                                   value,   ttl,          wt,       fk.prefix};
        error_code ec;
        redis_reply r;
        std::tie(ec, r) = co_await b->run(fair_acquire_script().text, fair_acquire_script().sha, 4, args,
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
                           fmt::format("redis fair lock {}: {}; trying again within the acquisition's deadline",
                                       s->path, ec.message()));
            transient = ec;
            wait = next_retry(retry);
        } else {
            if (!fair_reply_ok(r))
                co_return fail(redis_errc::unexpected_reply);
            if (r.elements[0].integer == 1) {
                if (steady_clock::now() < b->held_until(sent))
                    co_return redis_acquire_result{error_code{}, hold_key(task, b, value, r.elements[1].integer, sent)};
                // Too late to be sure of (see take()): the next attempt, at once, is granted again
                // (the key holds our value) or finds it someone else's.
                b->rc->log(log_level::warn, fmt::format("redis fair lock {}: granted, but the reply came later than "
                                                        "the TTL less the safety margin; trying again",
                                                        s->path));
                if (steady_clock::now() >= deadline)
                    co_return fail(transient);
                continue;
            }
            transient = {};
            retry = {};
            const auto pttl = r.elements[1].integer;
            const auto& holder = r.elements[2].str;
            const auto position = r.elements[3].integer;
            const auto head_left = r.elements[4].integer;
            wait = std::chrono::duration_cast<std::chrono::milliseconds>(refresh);
            if (position == 0) {
                // The head: the key's expiry frees it (a crashed holder tells nobody). -1: no TTL.
                if (pttl >= 0)
                    wait = std::min(wait, std::chrono::milliseconds(pttl + 1));
                // Behind a holder that is not a fair lock's (redis-py's Lock, a redis_mutex), no
                // message comes: try again on a bounded backoff.
                if (!holder.empty() && !fair_holder(holder))
                    wait = std::min(wait, next_poll(poll));
            } else if (position == 1 && head_left >= 0) {
                wait = std::min(wait, std::chrono::milliseconds(head_left + 1));  // the head may be gone by then
            }
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
        // The deadline: leave (fail takes us out of the queue), with a timeout (or the cause).
        if (steady_clock::now() >= deadline)
            co_return fail(transient);
    }
}

}  // namespace detail

namespace {

std::shared_ptr<detail::lock_object> make_fair_lock_object(redis_client& c, std::string key,
                                                           const redis_fair_mutex_options& opts)
{
    auto impl = detail::access::redis_of(c);
    // On a cluster the key takes its name as its hash tag when it has none, as a redis_mutex's
    // does ({K}): K, {K}:fencing, {K}:queue, {K}:timeouts and the {K}:wake: channels then share
    // one slot (else the acquire script, which names K and {K}:..., fails with CROSSSLOT).
    key = detail::recipe_key(impl->url, std::move(key));
    redis_mutex_options m;
    m.ttl = opts.ttl;
    m.safety_margin = opts.safety_margin;
    m.local_handoff = false;
    detail::fair_keys f;
    const auto prefix = detail::fair_prefix(key);
    f.queue = prefix + ":queue";
    f.timeouts = prefix + ":timeouts";
    f.prefix = prefix + ":wake:";
    f.waiter_timeout = opts.waiter_timeout.count() == 0 ? opts.ttl : opts.waiter_timeout;
    auto backend = std::make_shared<detail::redis_backend>(impl, key, m, std::move(f));
    detail::recipe_params p;
    p.reentrant = true;
    p.watch_own_node = false;
    mutex_options e;
    e.local_handoff = false;
    return std::make_shared<detail::lock_object>(std::move(backend), impl->strand, std::move(key), e, p);
}

}  // namespace

redis_fair_mutex::redis_fair_mutex(redis_client& c, std::string key, redis_fair_mutex_options opts)
    : basic_mutex(make_fair_lock_object(c, std::move(key), opts))
{
}

redis_fair_mutex::redis_fair_mutex(redis_fair_mutex&&) noexcept = default;
redis_fair_mutex::~redis_fair_mutex() = default;

const std::string& redis_fair_mutex::key() const noexcept { return state()->path; }

}  // namespace zkcoro
