// The Redis lock: a lock object (engine/) whose active task takes the key with one script, waits
// for the release notification (or the key's TTL) when it is taken, and whose holder renews the
// key's TTL until the release deletes it.
#include "redis/backend.hpp"
#include "redis/cluster.hpp"

#include <zkcoro/detail/access.hpp>
#include <zkcoro/guard.hpp>
#include <zkcoro/redis_mutex.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <iterator>
#include <limits>
#include <list>
#include <mutex>
#include <utility>

namespace zkcoro {

namespace detail {

namespace {

using asio::awaitable;
using acquire_result = redis_acquire_result;

}  // namespace

std::string new_value(owner_id owner)
{
    // "<process name>:<owner in hex>:<acquisition number>", written by hand: fmt::format cost
    // about 1 000 instructions of an uncontended lock cycle's 36 000.
    static std::atomic<std::uint64_t> acquisitions{0};
    const std::string& name = process_name();
    char tail[2 + 2 * std::numeric_limits<std::uint64_t>::digits10 + 24];
    char* p = tail;
    *p++ = ':';
    p = std::to_chars(p, std::end(tail), static_cast<std::uint64_t>(owner), 16).ptr;
    *p++ = ':';
    p = std::to_chars(p, std::end(tail), ++acquisitions).ptr;
    std::string v;
    v.reserve(name.size() + static_cast<std::size_t>(p - tail));
    v.append(name).append(tail, p);
    return v;
}

namespace {

// Whether an acquire script's reply grants the key: {1, fencing token}.
bool granted(const redis_reply& r)
{
    return r.type == redis_reply::kind::array && r.elements.size() >= 2 &&
           r.elements[0].type == redis_reply::kind::integer && r.elements[1].type == redis_reply::kind::integer &&
           r.elements[0].integer == 1;
}

}  // namespace

// An acquisition with no deadline begins without a coroutine: the first attempt's round trip is a
// callback, and a grant (the uncontended case) completes the caller from it. Any other reply
// hands on to take(), with that reply, under the same cancellation. A cancellation before the
// reply takes the key back (sent after the attempt on the connection, so run after it), as take()
// does.
struct redis_backend::first_attempt : std::enable_shared_from_this<first_attempt> {
    std::shared_ptr<lock_object> s;
    std::shared_ptr<redis_backend> b;
    std::shared_ptr<op_state<std::optional<guard>>> op;
    active_task task;
    steady_clock::time_point sent;
    std::string value;
    enum class stage { sending, coroutine, done } st = stage::sending;
    asio::cancellation_signal to_coroutine;  // the caller's cancellation, once take() runs

    static void start(active_task task, std::shared_ptr<redis_backend> b)
    {
        auto a = make_pooled<first_attempt>();
        a->s = task.object();
        a->op = task.op();
        a->task = std::move(task);
        a->b = std::move(b);
        // Completing the operation clears the slot; a cancellation already posted finds `done`.
        a->op->bind_cancellation_with([a](asio::cancellation_type t) {
            asio::dispatch(a->b->rc->strand, [a, t] { a->cancel(t); });
        });
        dispatch_on(a->b->rc->strand, [a] { a->send(); });
    }

    void send()
    {
        if (st != stage::sending)
            return;
        value = new_value(task.owner());
        sent = steady_clock::now();
        auto r = make_pooled<reply_op>(
            pooled([self = shared_from_this()](error_code ec, redis_reply&& reply) {
                self->on_reply(ec, std::move(reply));
            }),
            b->rc->strand);
        r->inline_ok = true;
        const std::string_view args[] = {s->path, b->fence_key, value, b->ttl_arg};
        eval_acked(*b->rc, acquire_script().text, acquire_script().sha, args, 2, std::move(r));
    }

    void on_reply(error_code ec, redis_reply&& r)
    {
        if (st != stage::sending)
            return;  // cancelled: the take-back is on its way
        // A grant that came too late to be sure of goes to take(), which tries again.
        if (!ec && granted(r) && steady_clock::now() < b->held_until(sent)) {
            st = stage::done;
            auto g = hold_key(task, b, std::move(value), r.elements[1].integer, sent);
            // From the reply's callback: the caller goes on in it (op_state::complete_here).
            return task.complete({}, std::optional<guard>(std::move(g)), true);
        }
        st = stage::coroutine;
        const auto started = task.started();
        const auto owner = task.owner();
        spawn_with(s->ex, take(std::move(task), b, value, attempt_reply{ec, std::move(r), sent}), to_coroutine,
                   [self = shared_from_this(), started, owner](error_code e, std::optional<guard> g) {
                       self->st = stage::done;
                       complete_counted(*self->s, *self->op, started, e, std::move(g), owner);
                   });
    }

    void cancel(asio::cancellation_type t)
    {
        if (st == stage::coroutine)
            return to_coroutine.emit(t);
        if (st != stage::sending ||
            (t & (asio::cancellation_type::terminal | asio::cancellation_type::partial)) == asio::cancellation_type::none)
            return;
        st = stage::done;
        if (!value.empty())
            b->take_back(s->path, value);  // the attempt was sent (or queued): undo it if it ran
        task.failed();
        task.complete(make_error_code(asio::error::operation_aborted), std::nullopt);
    }
};

void redis_backend::start_first(active_task task) { first_attempt::start(std::move(task), shared_from_this()); }

std::string redis_backend::server_text(const error_code& ec) const
{
    std::lock_guard lk(text_m);
    return ec && ec == last_server_code ? last_server_text : std::string();
}

void redis_backend::keep_server_text(const error_code& ec, std::string text)
{
    std::lock_guard lk(text_m);
    last_server_code = ec;
    last_server_text = std::move(text);
}

awaitable<acquire_result> redis_backend::take(active_task task, std::shared_ptr<redis_backend> b, std::string value,
                                              std::optional<attempt_reply> first)
{
    co_await asio::this_coro::throw_if_cancelled(false);
    co_await asio::this_coro::reset_cancellation_state(asio::enable_partial_cancellation());
    const auto& s = task.object();
    const owner_id owner = task.owner();
    const auto deadline = task.deadline();
    auto fail = [&](error_code ec) {
        task.failed();
        return acquire_result{ec, std::nullopt};
    };
    if (b->config_error)
        co_return fail(b->config_error);
    auto ex = co_await asio::this_coro::executor;
    if (value.empty())
        value = new_value(owner);
    const std::string& ttl = b->ttl_arg;
    waiter me;
    b->ensure_close_hook();
    b->waiters.push_back(&me);
    std::chrono::milliseconds poll{0};
    std::chrono::milliseconds retry{0};
    // The last transient failure (see transient_acquire_error) since the key was last seen held
    // by someone else: what the acquisition fails with at its deadline.
    error_code transient;
    bool late_seen = false;  // a grant came too late to be handed on (see below)
    struct unlist {
        redis_backend& b;
        waiter& w;
        ~unlist() { b.waiters.remove(&w); }
    } unlist_me{*b, me};
    // Each round is one attempt and one wait for an event (a release, a resubscription, the key's
    // TTL, a reconnection) or the deadline; the deadline bounds the rounds.
    for (;;) {
        me.notified = false;
        auto sent = steady_clock::now();
        error_code ec;
        redis_reply r;
        if (first) {
            // first_attempt made this round's attempt.
            ec = first->ec;
            r = std::move(first->r);
            sent = first->sent;
            first.reset();
        } else {
            co_await b->wait_connected(deadline);
            const bool stopped = co_await cancelled();  // (not in the condition: see docs/building.md, Compilers)
            if (stopped)
                co_return fail(asio::error::operation_aborted);
            sent = steady_clock::now();
            // (The arguments are built apart: g++ 12 miscompiles a braced list inside co_await.)
            const std::array<std::string_view, 4> args{s->path, b->fence_key, value, ttl};
            // The reply is awaited until the deadline, and at least a second: a zero wait
            // (try_acquire) is one round trip, then an answer.
            std::tie(ec, r) = co_await b->run(acquire_script().text, acquire_script().sha, 2, args,
                                              std::max(deadline, sent + std::chrono::seconds(1)));
        }
        const bool stopped = co_await cancelled();
        if (stopped) {
            // The script may still run: take the key back if it did (sent after it, so run after it).
            b->take_back(s->path, value);
            co_return fail(asio::error::operation_aborted);
        }
        std::chrono::milliseconds wait{0};
        if (ec == redis_errc::connection_lost || ec == asio::error::timed_out) {
            // Unknown whether it ran: the next attempt (queued until the connection is back)
            // finds out, since our own value counts as ours. Past the deadline, take the key
            // back in case it ran.
            if (ec == redis_errc::connection_lost)
                transient = ec;
            if (steady_clock::now() >= deadline) {
                b->take_back(s->path, value);
                co_return fail(transient);
            }
        } else if (ec) {
            if (r.type == redis_reply::kind::error)
                b->keep_server_text(ec, std::move(r.str));
            // A failover under way, a replica re-attaching, a server loading: try again with
            // backoff while the deadline has time left (a try_acquire tries once), finding the
            // master again (a READONLY reply drops the connection, the sentinels are asked
            // again); at the deadline, fail with this cause. A closed client tries no more.
            if (!transient_acquire_error(ec) || steady_clock::now() >= deadline ||
                b->rc->state.load() == redis_state::closed || b->rc->closing())
                co_return fail(ec);
            // The first such failure of a cause is a warning (a redis:// URL pointed at a replica
            // waits until the deadline: the log says why), the next ones debug lines. WAIT's own
            // shortfall is logged by eval_acked.
            if (ec != redis_errc::not_replicated)
                b->rc->log(ec == transient ? log_level::debug : log_level::warn,
                           fmt::format("redis lock {}: {}{}{}; trying again within the acquisition's deadline",
                                       s->path, ec.message(), r.type == redis_reply::kind::error ? ": the server said: " : "",
                                       r.type == redis_reply::kind::error ? b->server_text(ec) : std::string()));
            transient = ec;
            wait = next_retry(retry);
        } else {
            if (r.type != redis_reply::kind::array || r.elements.size() < 2 ||
                r.elements[0].type != redis_reply::kind::integer || r.elements[1].type != redis_reply::kind::integer)
                co_return fail(redis_errc::unexpected_reply);
            if (granted(r)) {
                const auto now = steady_clock::now();
                if (now < b->held_until(sent))
                    co_return acquire_result{error_code{}, hold_key(task, b, std::move(value), r.elements[1].integer, sent)};
                // The reply came after the hold's own loss bound: the key may have expired before
                // it came and someone else may hold it now, with a higher token. Not handed on as
                // held: the next attempt, at once, finds the key ours (granted again, its TTL from
                // then on) or someone else's. At the deadline the key is taken back.
                // A warning the first time in an acquisition, debug lines after it.
                b->rc->log(std::exchange(late_seen, true) ? log_level::debug : log_level::warn,
                           fmt::format("redis lock {}: granted, but the reply came {} ms after the request, later than "
                                       "the TTL ({} ms) less the safety margin ({} ms): the key may have expired "
                                       "meanwhile; trying again",
                                       s->path, std::chrono::duration_cast<std::chrono::milliseconds>(now - sent).count(),
                                       b->opts.ttl.count(), b->opts.safety_margin.count()));
                if (now >= deadline) {
                    b->take_back(s->path, value);
                    co_return fail(transient);
                }
                continue;
            }
            transient = {};  // held by someone else: a deadline now is a plain timeout
            retry = {};
            auto pttl = r.elements[1].integer;
            // -1: the key never expires (a holder without TTL); -2: it just went.
            wait = pttl == -1 ? b->opts.ttl : std::chrono::milliseconds(std::max<std::int64_t>(pttl, 0) + 1);
            // A holder that publishes nothing on release (redis-py's Lock): try again on a
            // bounded backoff, not only at the key's expiry. Ours publish: wait for that.
            if (r.elements.size() < 3 || !publishing_holder(r.elements[2].str))
                wait = std::min(wait, next_poll(poll));
        }
        if (steady_clock::now() >= deadline)
            co_return fail(transient);
        if (!b->subscribed) {
            // Subscribe, then try again at once: a release between our attempt and the
            // subscription would otherwise go unheard.
            b->ensure_subscribed();
            wait = std::min(wait, std::chrono::milliseconds(b->opts.ttl));
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
        if (transient && steady_clock::now() >= deadline)
            co_return fail(transient);  // backed off until the deadline: no attempt after it
    }
}

}  // namespace detail

namespace {

detail::recipe_params redis_recipe()
{
    detail::recipe_params p;
    p.reentrant = true;
    p.watch_own_node = false;
    return p;
}

mutex_options engine_options(const redis_mutex_options& o)
{
    mutex_options m;
    m.local_handoff = o.local_handoff;
    return m;
}

std::shared_ptr<detail::lock_object> make_lock_object(redis_client& c, std::string key, const redis_mutex_options& opts)
{
    auto impl = detail::access::redis_of(c);
    // On a cluster every key of the lock must share one slot: a key without a hash tag gets its
    // own name as its tag ({key}, {key}:fencing, {key}:released). Elsewhere the key is as given.
    key = detail::recipe_key(impl->url, std::move(key));
    auto backend = std::make_shared<detail::redis_backend>(impl, key, opts);
    return std::make_shared<detail::lock_object>(std::move(backend), impl->strand, std::move(key),
                                                 engine_options(opts), redis_recipe());
}

}  // namespace

redis_mutex::redis_mutex(redis_client& c, std::string key, redis_mutex_options opts)
    : basic_mutex(make_lock_object(c, std::move(key), opts))
{
}

redis_mutex::redis_mutex(redis_mutex&&) noexcept = default;
redis_mutex::~redis_mutex() = default;

const std::string& redis_mutex::key() const noexcept { return state()->path; }

}  // namespace zkcoro
