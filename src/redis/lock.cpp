// The Redis lock: a lock object (engine/) whose active task takes the key with one script, waits
// for the release notification (or the key's TTL) when it is taken, and whose holder renews the
// key's TTL until the release deletes it.
#include "async/coroutine.hpp"
#include "engine/acquisition.hpp"
#include "engine/lock_object.hpp"
#include "redis/lock_scripts.hpp"
#include "redis/replicas.hpp"  // redis_impl, and WAIT after a grant or renewal

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
#include <boost/system/system_error.hpp>
#include <boost/uuid/random_generator.hpp>
#include <boost/uuid/uuid_io.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <list>
#include <mutex>

namespace zkcoro {

namespace detail {

namespace {

using asio::awaitable;
using acquire_result = std::tuple<error_code, std::optional<guard>>;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t max_key_size = 1024;

const std::string& process_id()
{
    static const std::string id = boost::uuids::to_string(boost::uuids::random_generator()());
    return id;
}

// One waiting active task: woken by a release notification or a (re)subscription.
struct waiter {
    asio::steady_timer* timer = nullptr;
    bool notified = false;
};

class redis_backend final : public lock_backend, public std::enable_shared_from_this<redis_backend> {
public:
    redis_backend(std::shared_ptr<redis_impl> r, const std::string& key, redis_mutex_options o)
        : rc(std::move(r)), fence_key(key + ":fencing"), channel(key + ":released"), opts(o)
    {
        if (key.empty() || key.size() > max_key_size)
            config_error = redis_errc::bad_key;
        if (opts.safety_margin.count() == 0)
            opts.safety_margin = opts.ttl / 5;
        if (opts.ttl < std::chrono::milliseconds(100) || opts.ttl > std::chrono::hours(24) ||
            opts.safety_margin.count() < 0 || opts.safety_margin >= opts.ttl / 3)
            config_error = redis_errc::bad_ttl;
    }

    ~redis_backend() override
    {
        if (sub_id || close_hook)
            asio::post(rc->strand, [rc = rc, ch = channel, id = sub_id, hook = close_hook] {
                if (id)
                    rc->unsubscribe(ch, id);
                if (hook)
                    rc->remove_close_hook(hook);
            });
    }

    void start(const std::shared_ptr<lock_object>& s, owner_id owner, steady_clock::time_point deadline,
               std::shared_ptr<op_state<std::optional<guard>>> op, steady_clock::time_point started,
               bool promoted) override
    {
        if (config_error || deadline != steady_clock::time_point::max())
            return spawn_counted(s, take(s, shared_from_this(), owner, deadline, promoted, {}, {}), std::move(op),
                                 started);
        start_first(s, owner, std::move(op), started, promoted);
    }
    void start_first(const std::shared_ptr<lock_object>& s, owner_id owner,
                     std::shared_ptr<op_state<std::optional<guard>>> op, steady_clock::time_point started,
                     bool promoted);

    void give_back(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns,
                   std::shared_ptr<op_state<>> op) override
    {
        ns->released = true;
        asio::post(rc->strand, [s, ns, op, self = shared_from_this()] {
            ns->monitor_stop.emit(asio::cancellation_type::terminal);
            // Until the key would have expired anyway (a renewal extends it at most to now + TTL).
            const auto until = steady_clock::now() + self->opts.ttl;
            self->compare_and_delete(ns->node, ns->value, until, [s, ns, op, self](error_code ec) {
                if (!ec)
                    return void(op->complete({}));
                {
                    std::lock_guard lk(s->m);
                    ++s->metrics.release_failures;
                }
                self->rc->log(log_level::error,
                              fmt::format("redis lock {}: release failed: {}; the key expires within its TTL",
                                          ns->node, ec.message()));
                op->complete(ec);
            });
        });
    }

    // Compare-and-delete of `key` while it holds `value`, and the release's PUBLISH. Tried again
    // on connection_lost (a drop, or NOSCRIPT after a SCRIPT FLUSH) while `until` has not passed,
    // at most 8 times: it is idempotent, and sent later it still runs after the command it
    // follows. `done` (may be empty) gets the last outcome. On the strand.
    void compare_and_delete(std::string key, std::string value, steady_clock::time_point until,
                            std::function<void(error_code)> done, int tries = 8)
    {
        auto op = std::make_shared<reply_op>(
            [self = shared_from_this(), key, value, until, done = std::move(done), tries](error_code ec,
                                                                                          redis_reply) mutable {
                if (ec == redis_errc::connection_lost && tries > 1 && steady_clock::now() < until &&
                    !self->rc->closing())
                    return self->compare_and_delete(std::move(key), std::move(value), until, std::move(done),
                                                    tries - 1);
                if (done)
                    done(ec);
            },
            rc->strand);
        rc->eval(release_script().text, release_script().sha, {key, value, channel}, 1, std::move(op));
    }

    void log_failure(std::string_view operation, std::string_view resource, const error_code& ec) override
    {
        // The client was closed: one line per acquisition at debug level (closing a client with
        // many waiters is no news); else the server's own text too, when it answered with an error.
        auto level = ec == redis_errc::closed ? log_level::debug : log_level::warn;
        std::string text = server_text(ec);
        rc->log(level, fmt::format("{} {} on redis://{}:{}: {}{}{}", operation, resource, rc->url.host, rc->url.port,
                                   ec.message(), text.empty() ? "" : ": the server said: ", text));
    }

    // The text of the last error reply to an acquisition when `ec` is an error reply's code ("" if
    // none).
    std::string server_text(const error_code& ec) const
    {
        if (ec != redis_errc::error_reply && ec != redis_errc::read_only && ec != redis_errc::out_of_memory &&
            ec != redis_errc::wrong_type && ec != redis_errc::bad_fencing_counter)
            return {};
        std::lock_guard lk(text_m);
        return last_server_text;
    }

    // On the strand: the waiters give up at once when the client is closed.
    void ensure_close_hook()
    {
        if (close_hook)
            return;
        std::weak_ptr<redis_backend> w = shared_from_this();
        close_hook = rc->add_close_hook([w] {
            if (auto self = w.lock())
                self->wake_all();
        });
    }

    // On the strand.
    void ensure_subscribed()
    {
        if (sub_id)
            return;
        std::weak_ptr<redis_backend> w = shared_from_this();
        sub_id = rc->subscribe(channel, [w](channel_event ev) {
            auto self = w.lock();
            if (!self)
                return;
            if (ev == channel_event::subscribed)
                self->subscribed = true;
            self->wake_all();
        });
    }

    // Deletes `key` if an attempt of ours whose outcome we did not learn set it to `value` (sent
    // after that attempt on the same connection, or after a drop on a later one, so run after
    // it: the connection keeps the order, see redis_link::send). On the strand.
    void take_back(const std::string& key, const std::string& value)
    {
        compare_and_delete(key, value, steady_clock::now() + opts.ttl, {});
    }

    void wake_all()
    {
        for (auto* w : waiters) {
            w->notified = true;
            if (w->timer)
                w->timer->cancel();
        }
    }

    // Runs a script, bounded by `until` (asio::error::timed_out then; the script may still run).
    awaitable<std::tuple<error_code, redis_reply>> run(const std::string& script, const std::string& sha, int nkeys,
                                                       std::vector<std::string> args, steady_clock::time_point until)
    {
        auto start = [this, &script, &sha, nkeys, &args](auto handler) {
            auto op = std::make_shared<reply_op>(std::move(handler), rc->strand);
            op->bind_cancellation();
            eval_acked(*rc, script, sha, std::move(args), nkeys, std::move(op));  // + WAIT when asked
        };
        if (until == steady_clock::time_point::max()) {
            auto [ec, r] = co_await asio::async_initiate<decltype(use_tuple), void(error_code, redis_reply)>(start, use_tuple);
            co_return std::tuple{ec, std::move(r)};
        }
        asio::steady_timer bound(co_await asio::this_coro::executor, until);
        auto [order, ec, r, tec] =
            co_await asio::experimental::make_parallel_group(
                asio::async_initiate<decltype(asio::deferred), void(error_code, redis_reply)>(start, asio::deferred),
                bound.async_wait(asio::deferred))
                .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
        (void)tec;
        if (order[0] == 1)
            co_return std::tuple{error_code(asio::error::timed_out), redis_reply{}};
        co_return std::tuple{ec, std::move(r)};
    }

    // The first attempt's reply, when first_attempt made it (with the time it was sent).
    struct attempt_reply {
        error_code ec;
        redis_reply r;
        steady_clock::time_point sent;
    };
    // `value`: the acquisition's token (made here when empty).
    static awaitable<acquire_result> take(std::shared_ptr<lock_object> s, std::shared_ptr<redis_backend> b,
                                          owner_id owner, steady_clock::time_point deadline, bool promoted,
                                          std::string value, std::optional<attempt_reply> first);
    struct first_attempt;

    std::shared_ptr<redis_impl> rc;
    std::string fence_key;
    std::string channel;
    redis_mutex_options opts;
    error_code config_error;
    std::uint64_t sub_id = 0;
    std::uint64_t close_hook = 0;
    bool subscribed = false;
    mutable std::mutex text_m;
    std::string last_server_text;  // guarded by text_m
    std::list<waiter*> waiters;
};

// Unique per holder: the process, the task, and this acquisition among all of the process.
std::string new_value(owner_id owner)
{
    static std::atomic<std::uint64_t> acquisitions{0};
    return fmt::format("{}:{:x}:{}", process_id(), owner, ++acquisitions);
}

// Renews the key we hold every third of its TTL (sooner after a failure) until the release
// (ns->monitor_stop) or the loss: one timer and one pending reply, no coroutine. On the strand.
// The timer has two roles: the next renewal's time while none is in flight, and the bound on the
// one in flight (TTL less the safety margin after the last confirmed one) while it is.
class renewal : public std::enable_shared_from_this<renewal> {
public:
    renewal(std::shared_ptr<lock_object> s, std::shared_ptr<redis_backend> b, std::shared_ptr<node_state> ns,
            steady_clock::time_point confirmed)
        : s_(std::move(s)), b_(std::move(b)), ns_(std::move(ns)), timer_(s_->ex), confirmed_(confirmed),
          ttl_arg_(std::to_string(b_->opts.ttl.count()))
    {
    }

    void start()
    {
        ns_->monitor_stop.slot().assign([w = weak_from_this()](asio::cancellation_type) {
            if (auto self = w.lock()) {
                self->stopped_ = true;
                self->timer_.cancel();
            }
        });
        arm(std::min(confirmed_ + b_->opts.ttl / 3, lost_at()));
    }

private:
    steady_clock::time_point lost_at() const { return confirmed_ + b_->opts.ttl - b_->opts.safety_margin; }
    bool over() const { return stopped_ || ns_->lost || ns_->released; }

    void arm(steady_clock::time_point at)
    {
        timer_.expires_at(at);
        timer_.async_wait([self = shared_from_this(), g = ++gen_](error_code ec) {
            if (!ec && g == self->gen_)
                self->fire();
        });
    }

    void lose(std::string_view why)
    {
        if (mark_lost(s_, ns_))
            b_->rc->log(log_level::warn, fmt::format("redis lock {} lost: {}", ns_->node, why));
    }

    void fire()
    {
        if (over())
            return;
        if (in_flight_ || steady_clock::now() >= lost_at())
            return lose("no renewal confirmed within the TTL less the safety margin");
        const auto sent = steady_clock::now();
        in_flight_ = true;
        auto op = std::make_shared<reply_op>(
            [self = shared_from_this(), sent](error_code ec, redis_reply r) { self->on_reply(ec, r, sent); },
            b_->rc->strand);
        eval_acked(*b_->rc, renew_script().text, renew_script().sha, {ns_->node, ns_->value, ttl_arg_}, 1,
                   std::move(op));
        arm(lost_at());  // the bound on this renewal
    }

    void on_reply(error_code ec, const redis_reply& r, steady_clock::time_point sent)
    {
        if (!in_flight_ || over())
            return;  // lost (the bound fired first), or released
        in_flight_ = false;
        if (ec)  // not confirmed (connection lost, server busy): try again soon, until lost_at
            return arm(std::min(lost_at(), steady_clock::now() + std::chrono::milliseconds(50)));
        if (r.type != redis_reply::kind::integer || r.integer != 1)
            return lose("the key is gone or holds another token");
        confirmed_ = sent;
        arm(std::min(confirmed_ + b_->opts.ttl / 3, lost_at()));
    }

    std::shared_ptr<lock_object> s_;
    std::shared_ptr<redis_backend> b_;
    std::shared_ptr<node_state> ns_;
    asio::steady_timer timer_;
    steady_clock::time_point confirmed_;
    std::string ttl_arg_;
    std::uint64_t gen_ = 0;
    bool in_flight_ = false;
    bool stopped_ = false;
};

// We hold the key: the lease, and the renewal. On the strand.
guard hold_key(const std::shared_ptr<lock_object>& s, const std::shared_ptr<redis_backend>& b, owner_id owner,
               std::string value, std::int64_t fence, steady_clock::time_point sent)
{
    auto ns = std::make_shared<node_state>();
    ns->node = s->path;
    ns->value = std::move(value);
    ns->fence_base = fence;
    auto h = std::make_shared<object_lease>(s, ns, owner);
    record_grant(s, ns, h, false);
    std::make_shared<renewal>(s, b, ns, sent)->start();
    return access::make_guard(std::move(h), owner);
}

// Whether an acquire script's reply grants the key: {1, fencing token}.
bool granted(const redis_reply& r)
{
    return r.type == redis_reply::kind::array && r.elements.size() >= 2 &&
           r.elements[0].type == redis_reply::kind::integer && r.elements[1].type == redis_reply::kind::integer &&
           r.elements[0].integer == 1;
}

// An acquisition with no deadline begins without a coroutine: the first attempt's round trip is a
// callback, and a grant (the uncontended case) completes the caller from it. Any other reply
// hands on to take(), with that reply, under the same cancellation. A cancellation before the
// reply takes the key back (sent after the attempt on the connection, so run after it), as take()
// does.
struct redis_backend::first_attempt : std::enable_shared_from_this<first_attempt> {
    std::shared_ptr<lock_object> s;
    std::shared_ptr<redis_backend> b;
    owner_id owner = 0;
    std::shared_ptr<op_state<std::optional<guard>>> op;
    steady_clock::time_point started, sent;
    bool promoted = false;
    std::string value;
    enum class stage { sending, coroutine, done } st = stage::sending;
    asio::cancellation_signal to_coroutine;  // the caller's cancellation, once take() runs

    static void start(const std::shared_ptr<lock_object>& s, std::shared_ptr<redis_backend> b, owner_id owner,
                      std::shared_ptr<op_state<std::optional<guard>>> op, steady_clock::time_point started,
                      bool promoted)
    {
        auto a = std::make_shared<first_attempt>();
        a->s = s;
        a->b = std::move(b);
        a->owner = owner;
        a->op = std::move(op);
        a->started = started;
        a->promoted = promoted;
        // Completing the operation clears the slot; a cancellation already posted finds `done`.
        a->op->bind_cancellation_with([a](asio::cancellation_type t) {
            asio::dispatch(a->b->rc->strand, [a, t] { a->cancel(t); });
        });
        asio::dispatch(a->b->rc->strand, [a] { a->send(); });
    }

    void send()
    {
        if (st != stage::sending)
            return;
        value = new_value(owner);
        sent = steady_clock::now();
        auto r = std::make_shared<reply_op>(
            [self = shared_from_this()](error_code ec, redis_reply reply) { self->on_reply(ec, std::move(reply)); },
            b->rc->strand);
        eval_acked(*b->rc, acquire_script().text, acquire_script().sha,
                   {s->path, b->fence_key, value, std::to_string(b->opts.ttl.count())}, 2, std::move(r));
    }

    void on_reply(error_code ec, redis_reply r)
    {
        if (st != stage::sending)
            return;  // cancelled: the take-back is on its way
        if (!ec && granted(r)) {
            st = stage::done;
            auto g = hold_key(s, b, owner, value, r.elements[1].integer, sent);
            return complete_counted(*s, *op, started, {}, std::optional<guard>(std::move(g)));
        }
        st = stage::coroutine;
        auto self = shared_from_this();
        asio::co_spawn(s->ex,
                       take(s, b, owner, steady_clock::time_point::max(), promoted, value,
                            attempt_reply{ec, std::move(r), sent}),
                       asio::bind_cancellation_slot(to_coroutine.slot(), [self](std::exception_ptr e, acquire_result res) {
                           self->st = stage::done;
                           if (e)
                               return complete_counted(*self->s, *self->op, self->started,
                                                       make_error_code(client_errc::internal_error),
                                                       std::optional<guard>());
                           complete_counted(*self->s, *self->op, self->started, std::get<0>(res),
                                            std::move(std::get<1>(res)));
                       }));
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
        hand_on(s);
        complete_counted(*s, *op, started, make_error_code(asio::error::operation_aborted), std::optional<guard>());
    }
};

void redis_backend::start_first(const std::shared_ptr<lock_object>& s, owner_id owner,
                                std::shared_ptr<op_state<std::optional<guard>>> op, steady_clock::time_point started,
                                bool promoted)
{
    first_attempt::start(s, shared_from_this(), owner, std::move(op), started, promoted);
}

awaitable<acquire_result> redis_backend::take(std::shared_ptr<lock_object> s, std::shared_ptr<redis_backend> b,
                                              owner_id owner, steady_clock::time_point deadline, bool promoted,
                                              std::string value, std::optional<attempt_reply> first)
{
    co_await asio::this_coro::throw_if_cancelled(false);
    co_await asio::this_coro::reset_cancellation_state(asio::enable_partial_cancellation());
    auto fail = [&](error_code ec) {
        hand_on(s);
        return acquire_result{ec, std::nullopt};
    };
    if (b->config_error)
        co_return fail(b->config_error);
    if (promoted && steady_clock::now() >= deadline)
        co_return fail({});
    auto ex = co_await asio::this_coro::executor;
    if (value.empty())
        value = new_value(owner);
    const auto ttl = std::to_string(b->opts.ttl.count());
    waiter me;
    b->ensure_close_hook();
    b->waiters.push_back(&me);
    std::chrono::milliseconds poll{0};
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
            // (The arguments are built apart: g++ 12 miscompiles a braced list inside co_await.)
            std::vector<std::string> args{s->path, b->fence_key, value, ttl};
            // The reply is awaited until the deadline, and at least a second: a zero wait
            // (try_acquire) is one round trip, then an answer.
            std::tie(ec, r) = co_await b->run(acquire_script().text, acquire_script().sha, 2, std::move(args),
                                              std::max(deadline, sent + std::chrono::seconds(1)));
        }
        if (co_await cancelled()) {
            // The script may still run: take the key back if it did (sent after it, so run after it).
            b->take_back(s->path, value);
            co_return fail(asio::error::operation_aborted);
        }
        std::chrono::milliseconds wait{0};
        if (ec == redis_errc::connection_lost || ec == asio::error::timed_out) {
            // Unknown whether it ran: the next attempt (queued until the connection is back)
            // finds out, since our own value counts as ours. Past the deadline, take the key
            // back in case it ran.
            if (steady_clock::now() >= deadline) {
                b->take_back(s->path, value);
                co_return fail(ec == asio::error::timed_out ? error_code{} : ec);
            }
        } else if (ec) {
            if (r.type == redis_reply::kind::error) {
                std::lock_guard lk(b->text_m);
                b->last_server_text = r.str;
            }
            co_return fail(ec);
        } else {
            if (r.type != redis_reply::kind::array || r.elements.size() < 2 ||
                r.elements[0].type != redis_reply::kind::integer || r.elements[1].type != redis_reply::kind::integer)
                co_return fail(redis_errc::unexpected_reply);
            if (granted(r))
                co_return acquire_result{error_code{}, hold_key(s, b, owner, value, r.elements[1].integer, sent)};
            auto pttl = r.elements[1].integer;
            // -1: the key never expires (a holder without TTL); -2: it just went.
            wait = pttl == -1 ? b->opts.ttl : std::chrono::milliseconds(std::max<std::int64_t>(pttl, 0) + 1);
            // A holder that publishes nothing on release (redis-py's Lock): try again on a
            // bounded backoff, not only at the key's expiry. Ours publish: wait for that.
            if (r.elements.size() < 3 || !publishing_holder(r.elements[2].str))
                wait = std::min(wait, next_poll(poll));
        }
        if (steady_clock::now() >= deadline)
            co_return fail({});
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
        if (co_await cancelled())
            co_return fail(asio::error::operation_aborted);
        if (b->rc->closing())
            co_return fail(redis_errc::closed);
    }
}

}  // namespace

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

}  // namespace

redis_mutex::redis_mutex(redis_client& c, std::string key, redis_mutex_options opts)
{
    auto impl = detail::access::redis_of(c);
    auto backend = std::make_shared<detail::redis_backend>(impl, key, opts);
    state_ = std::make_shared<detail::lock_object>(std::move(backend), impl->strand,
                                                   std::move(key), engine_options(opts), redis_recipe());
}

redis_mutex::redis_mutex(redis_mutex&&) noexcept = default;
redis_mutex::~redis_mutex() = default;

const std::string& redis_mutex::key() const noexcept { return state_->path; }
redis_client::executor_type redis_mutex::get_executor() const noexcept { return state_->ex; }

std::uint64_t redis_mutex::local_handoffs() const
{
    std::lock_guard lk(state_->m);
    return state_->metrics.local_handoffs;
}

lock_metrics redis_mutex::metrics() const
{
    std::lock_guard lk(state_->m);
    return state_->metrics;
}

std::size_t redis_mutex::hold_count(owner_id owner) const { return state_->held_count(owner); }

asio::awaitable<guard> redis_mutex::acquire()
{
    auto g = co_await acquire(std::chrono::steady_clock::duration::max());
    co_return std::move(*g);
}

asio::awaitable<std::optional<guard>> redis_mutex::acquire(std::chrono::steady_clock::duration timeout)
{
    auto me = co_await this_task::id();
    try {
        co_return co_await async_acquire(me, timeout, asio::use_awaitable);
    } catch (const boost::system::system_error& e) {
        auto text = static_cast<detail::redis_backend&>(*state_->backend).server_text(e.code());
        throw boost::system::system_error(e.code(), fmt::format("acquire {} (redis lock){}{}", state_->path,
                                                                text.empty() ? "" : ": the server said: ", text));
    }
}

asio::awaitable<std::optional<guard>> redis_mutex::try_acquire()
{
    return acquire(std::chrono::steady_clock::duration::zero());
}

void redis_mutex::start_acquire(owner_id o, std::chrono::steady_clock::duration t,
                                detail::any_handler<void(error_code, std::optional<guard>)> handler)
{
    state_->acquire(o, detail::deadline_after(t),
                    std::make_shared<detail::op_state<std::optional<guard>>>(std::move(handler), get_executor()));
}

void redis_mutex::start_participants(detail::any_handler<void(error_code, std::vector<participant>)> handler)
{
    auto op = std::make_shared<detail::op_state<std::vector<participant>>>(std::move(handler), get_executor());
    auto& backend = static_cast<detail::redis_backend&>(*state_->backend);
    auto got = std::make_shared<detail::reply_op>(
        [op, key = state_->path](error_code ec, redis_reply r) {
            std::vector<participant> out;
            if (!ec && r.type == redis_reply::kind::string) {
                participant p;
                p.name = p.path = key;
                p.data = std::move(r.str);
                p.holds = true;
                out.push_back(std::move(p));
            }
            op->complete(ec, std::move(out));
        },
        backend.rc->strand);
    asio::dispatch(backend.rc->strand, [rc = backend.rc, got, key = state_->path] {
        std::vector<std::string> args{"GET", key};
        rc->exec(std::move(args), got);
    });
}

}  // namespace zkcoro
