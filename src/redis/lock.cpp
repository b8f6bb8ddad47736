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
        spawn_counted(s, take(s, shared_from_this(), owner, deadline, promoted), std::move(op), started);
    }

    void give_back(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns,
                   std::shared_ptr<op_state<>> op) override
    {
        ns->released = true;
        asio::post(rc->strand, [s, ns, op, self = shared_from_this()] {
            ns->monitor_stop.emit(asio::cancellation_type::terminal);
            auto done = std::make_shared<reply_op>(
                [s, ns, op, self](error_code ec, redis_reply) {
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
                },
                self->rc->strand);
            self->rc->eval(release_script().text, release_script().sha, {ns->node, ns->value, self->channel}, 1,
                           std::move(done));
        });
    }

    // Who holds the key: GET it (Redis keeps no queue: waiters are not listed).
    void participants(const std::shared_ptr<lock_object>& s,
                      std::shared_ptr<op_state<std::vector<participant>>> op) override
    {
        auto got = std::make_shared<reply_op>(
            [op, key = s->path](error_code ec, redis_reply r) {
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
            rc->strand);
        asio::dispatch(rc->strand, [rc = rc, got, key = s->path] {
            std::vector<std::string> args{"GET", key};
            rc->exec(std::move(args), got);
        });
    }

    std::string failure_context(std::string_view operation, std::string_view resource, const error_code& ec) override
    {
        auto text = server_text(ec);
        return fmt::format("{} {} (redis lock){}{}", operation, resource, text.empty() ? "" : ": the server said: ",
                           text);
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
    // after that attempt on the same connection, so run after it). On the strand.
    void take_back(const std::string& key, const std::string& value)
    {
        auto ignore = std::make_shared<reply_op>([](error_code, redis_reply) {}, rc->strand);
        rc->eval(release_script().text, release_script().sha, {key, value, channel}, 1, std::move(ignore));
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

    static awaitable<acquire_result> take(std::shared_ptr<lock_object> s, std::shared_ptr<redis_backend> b,
                                          owner_id owner, steady_clock::time_point deadline, bool promoted);
    static awaitable<void> watchdog(std::shared_ptr<lock_object> s, std::shared_ptr<redis_backend> b,
                                    std::shared_ptr<node_state> ns, steady_clock::time_point confirmed);

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

// We hold the key: the lease, and the watchdog that renews it.
guard hold_key(const std::shared_ptr<lock_object>& s, const std::shared_ptr<redis_backend>& b, owner_id owner,
               std::string value, std::int64_t fence, steady_clock::time_point sent)
{
    auto ns = std::make_shared<node_state>();
    ns->node = s->path;
    ns->value = std::move(value);
    ns->fence_base = fence;
    auto h = std::make_shared<object_lease>(s, ns, owner);
    record_grant(s, ns, h, false);
    asio::co_spawn(s->ex, redis_backend::watchdog(s, b, ns, sent),
                   asio::bind_cancellation_slot(ns->monitor_stop.slot(), asio::detached));
    return access::make_guard(std::move(h), owner);
}

awaitable<acquire_result> redis_backend::take(std::shared_ptr<lock_object> s, std::shared_ptr<redis_backend> b,
                                              owner_id owner, steady_clock::time_point deadline, bool promoted)
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
    // Unique per holder: the process, the task, and this acquisition among all of the process.
    static std::atomic<std::uint64_t> acquisitions{0};
    const std::string value = fmt::format("{}:{:x}:{}", process_id(), owner, ++acquisitions);
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
        const auto sent = steady_clock::now();
        // (The arguments are built apart: g++ 12 miscompiles a braced list inside co_await.)
        std::vector<std::string> args{s->path, b->fence_key, value, ttl};
        // The reply is awaited until the deadline, and at least a second: a zero wait (try_acquire)
        // is one round trip, then an answer.
        auto [ec, r] = co_await b->run(acquire_script().text, acquire_script().sha, 2, std::move(args),
                                       std::max(deadline, sent + std::chrono::seconds(1)));
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
            if (r.elements[0].integer == 1)
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

awaitable<void> redis_backend::watchdog(std::shared_ptr<lock_object> s, std::shared_ptr<redis_backend> b,
                                        std::shared_ptr<node_state> ns, steady_clock::time_point confirmed)
{
    co_await asio::this_coro::throw_if_cancelled(false);
    auto ex = co_await asio::this_coro::executor;
    const auto ttl = b->opts.ttl;
    const auto period = ttl / 3;
    const auto ttl_arg = std::to_string(ttl.count());
    auto lose = [&](std::string_view why) {
        if (mark_lost(s, ns))
            b->rc->log(log_level::warn, fmt::format("redis lock {} lost: {}", ns->node, why));
    };
    // One renewal per round (every third of the TTL, sooner after a failure); it ends at the
    // release (cancellation) or the loss.
    while (!ns->lost && !ns->released) {
        const auto lost_at = confirmed + ttl - b->opts.safety_margin;
        asio::steady_timer t(ex, std::min(confirmed + period, lost_at));
        co_await t.async_wait(use_tuple);
        if (co_await cancelled() || ns->released)
            co_return;
        if (steady_clock::now() >= lost_at) {
            lose("no renewal confirmed within the TTL less the safety margin");
            co_return;
        }
        const auto sent = steady_clock::now();
        std::vector<std::string> args{ns->node, ns->value, ttl_arg};
        auto [ec, r] = co_await b->run(renew_script().text, renew_script().sha, 1, std::move(args), lost_at);
        if (co_await cancelled() || ns->released)
            co_return;
        if (ec == asio::error::timed_out) {
            lose("no renewal confirmed within the TTL less the safety margin");
            co_return;
        }
        if (ec) {
            // Not confirmed (connection lost, server busy): try again soon, until lost_at.
            asio::steady_timer pause(ex, std::min(lost_at, steady_clock::now() + std::chrono::milliseconds(50)));
            co_await pause.async_wait(use_tuple);
            if (co_await cancelled())
                co_return;
            // Next round renews at once: confirmed + period has passed.
            continue;
        }
        if (r.type != redis_reply::kind::integer || r.integer != 1) {
            lose("the key is gone or holds another token");
            co_return;
        }
        confirmed = sent;
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

std::shared_ptr<detail::lock_object> make_lock_object(redis_client& c, std::string key, const redis_mutex_options& opts)
{
    auto impl = detail::access::redis_of(c);
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
