// The Redis lock's backend (internal): how the engine's active task takes a key, waits for its
// release, and gives it back (redis/lock.cpp); the holder's renewal (redis/renewal.cpp).
#ifndef ZKCORO_SRC_REDIS_BACKEND_HPP
#define ZKCORO_SRC_REDIS_BACKEND_HPP

#include "async/coroutine.hpp"
#include "engine/acquisition.hpp"
#include "engine/lock_object.hpp"
#include "redis/lock_scripts.hpp"
#include "redis/replicas.hpp"  // redis_impl, and WAIT after a grant or renewal
#include "redis/semaphore_scripts.hpp"
#include "redis/slot.hpp"

#include <zkcoro/guard.hpp>
#include <zkcoro/redis_mutex.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fmt/format.h>

#include <array>
#include <functional>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace zkcoro::detail {

using redis_acquire_result = std::tuple<error_code, std::optional<guard>>;
constexpr std::size_t max_redis_key_size = 1024;

// One waiting active task: woken by a release notification or a (re)subscription (a fair
// lock's notification names the waiter by its value).
struct waiter {
    asio::steady_timer* timer = nullptr;
    bool notified = false;
    const std::string* value = nullptr;  // a fair lock's waiter: its value (its name in the queue)
};

// A fair lock's (redis_fair_mutex) keys besides the key itself, which share its hash tag
// (fair_prefix: P), and how long a waiter stays queued without coming back.
struct fair_keys {
    std::string queue;     // P:queue, a list of the waiters' values, in arrival order
    std::string timeouts;  // P:timeouts, a sorted set: value -> the server's time (ms) it leaves at
    std::string prefix;    // P:wake: (+ a process name: the channel of that process's waiters)
    std::chrono::milliseconds waiter_timeout{0};
};

struct sem_keys;  // a semaphore's keys and count, in the fair lock's layout (redis/semaphore.cpp)
class key_renewal;
struct rw_keys;  // a read-write lock's side (redis/shared_lock.cpp)

class redis_backend final : public lock_backend, public std::enable_shared_from_this<redis_backend> {
public:
    // `f`: a fair lock, with a fencing key and a channel under the fair keys' prefix.
    redis_backend(std::shared_ptr<redis_impl> r, const std::string& key, redis_mutex_options o,
                  std::optional<fair_keys> f = std::nullopt, std::shared_ptr<sem_keys> sm = nullptr)
        : rc(std::move(r)), fence_key(f ? fair_prefix(key) + ":fencing" : key + ":fencing"),
          channel(f ? f->prefix + process_name() : key + ":released"), opts(o),
          ttl_arg(std::to_string(opts.ttl.count())), fair(std::move(f)),
          sem(std::move(sm)), renew_timer_(rc->strand)
    {
        if (key.empty() || key.size() > max_redis_key_size)
            config_error = redis_errc::bad_key;
        if (fair && (fair->waiter_timeout < std::chrono::milliseconds(100) ||
                     fair->waiter_timeout > std::chrono::hours(24)))
            config_error = redis_errc::bad_ttl;
        if (opts.safety_margin.count() == 0)
            opts.safety_margin = opts.ttl / 5;
        if (opts.ttl < std::chrono::milliseconds(100) || opts.ttl > std::chrono::hours(24) ||
            opts.safety_margin.count() < 0 || opts.safety_margin >= opts.ttl / 3)
            config_error = redis_errc::bad_ttl;
    }

    ~redis_backend() override
    {
        end_renewal();
        if (sub_id || close_hook)
            asio::post(rc->strand, [rc = rc, ch = channel, id = sub_id, hook = close_hook] {
                if (id)
                    rc->unsubscribe(ch, id);
                if (hook)
                    rc->remove_close_hook(hook);
            });
    }

    void start(active_task task) override
    {
        if (rw)  // either side of a read-write lock (redis/shared_lock.cpp)
            return spawn_task(task, [self = shared_from_this()](active_task t) { return take_shared(std::move(t), self); });
        if (sem)
            return start_sem(std::move(task));
        if (fair)  // every acquisition queues on the server in its own right (no local handoff)
            return spawn_task(task, [self = shared_from_this()](active_task t) { return take_fair(std::move(t), self); });
        // Not connected (yet): take() waits for the connection before its first attempt.
        if (config_error || task.deadline() != steady_clock::time_point::max() ||
            rc->state.load() != redis_state::connected)
            return spawn_task(task, [self = shared_from_this()](active_task t) { return take(std::move(t), self, {}, {}); });
        start_first(std::move(task));
    }
    void start_first(active_task task);

    void give_back(const std::shared_ptr<lock_object>& s, const std::shared_ptr<node_state>& ns,
                   std::shared_ptr<op_state<>> op) override
    {
        // On the strand: at once when the caller may enter it (the release's own thread), the
        // compare-and-delete then written in the same turn.
        dispatch_on(rc->strand, [s, ns, op = std::move(op), self = shared_from_this()]() mutable {
            ns->monitor_stop.emit(asio::cancellation_type::terminal);
            // Until the key would have expired anyway (a renewal extends it at most to now + TTL).
            const auto until = steady_clock::now() + self->opts.ttl;
            auto& b = *self;
            b.compare_and_delete(ns, ns->node, ns->value, until, [s = std::move(s), ns, op = std::move(op),
                                                                  self = std::move(self)](error_code ec,
                                                                                          std::string_view text) {
                if (!ec)
                    return void(op->complete_here({}));  // from the reply's callback
                s->count_release_failure();
                self->rc->log(log_level::error,
                              fmt::format("redis lock {}: release failed: {}{}{}; the key expires within its TTL",
                                          ns->node, ec.message(), text.empty() ? "" : ": the server said: ", text));
                op->complete(ec);
            });
        });
    }

    // Compare-and-delete of `key` while it holds `value`, and the release's PUBLISH. Tried again
    // on connection_lost (a drop, or NOSCRIPT after a SCRIPT FLUSH) while `until` has not passed,
    // at most 8 times: it is idempotent, and sent later it still runs after the command it
    // follows. `done(error_code, server's text)` gets the last outcome (the text of an error reply,
    // else empty). `key` and `value` live as long as `keep`.
    // A refused PUBLISH after the delete is logged as a warning, not an error of the release.
    // On the strand.
    template <class Done>
    void compare_and_delete(std::shared_ptr<const void> keep, std::string_view key, std::string_view value,
                            steady_clock::time_point until, Done done, int tries = 8)
    {
        auto op = make_pooled<reply_op>(
            pooled([self = shared_from_this(), keep = std::move(keep), key, value, until, done = std::move(done),
                    tries](error_code ec, redis_reply&& r) mutable {
                if (ec == redis_errc::connection_lost && tries > 1 && steady_clock::now() < until &&
                    !self->rc->closing())
                    return self->compare_and_delete(std::move(keep), key, value, until, std::move(done), tries - 1);
                if (!ec && r.type == redis_reply::kind::string)
                    self->rc->log(log_level::warn,
                                  fmt::format("redis lock {}: released (deleted), but the server refused the release "
                                              "notification (PUBLISH {}): {}; waiters of other processes learn of "
                                              "it only when they try again (at the latest when its TTL would have "
                                              "run out)",
                                              key, self->channel, r.str));
                done(ec, ec && r.type == redis_reply::kind::error ? std::string_view(r.str) : std::string_view());
            }),
            rc->strand);
        op->inline_ok = true;
        if (rw)
            return rw_release(key, value, std::move(op));
        if (sem) {  // gives the leases back (or leaves the queue), tells the waiters that now fit
            const auto args = sem_args(value, "0");
            return rc->eval(semaphore_release_script().text, semaphore_release_script().sha, args, 5, std::move(op));
        }
        if (fair) {  // also leaves the queue, and tells the next waiter
            const std::string_view args[] = {key, fair->queue, fair->timeouts, value, fair->prefix};
            return rc->eval(fair_release_script().text, fair_release_script().sha, args, 3, std::move(op));
        }
        const std::string_view args[] = {key, value, channel};
        rc->eval(release_script().text, release_script().sha, args, 1, std::move(op));
    }

    // Who holds the key: GET it (Redis keeps no queue: waiters are not listed), and for a fair
    // lock its queue after it (LRANGE, pipelined behind the GET).
    void participants(const std::shared_ptr<lock_object>& s,
                      std::shared_ptr<op_state<std::vector<participant>>> op) override
    {
        if (rw)
            return rw_participants(s, std::move(op));
        if (sem)
            return sem_participants(s, std::move(op));
        if (fair)
            return fair_participants(s, std::move(op));
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
        asio::dispatch(rc->strand, [rc = rc, got, s] {
            const std::string_view args[] = {"GET", s->path};
            rc->exec(args, got);
        });
    }

    void fair_participants(const std::shared_ptr<lock_object>& s,
                           std::shared_ptr<op_state<std::vector<participant>>> op)
    {
        auto out = std::make_shared<std::vector<participant>>();
        auto got = std::make_shared<reply_op>(
            [out, key = s->path](error_code ec, redis_reply r) {
                if (ec || r.type != redis_reply::kind::string)
                    return;
                participant p;
                p.name = p.path = key;
                p.data = std::move(r.str);
                p.holds = true;
                out->push_back(std::move(p));
            },
            rc->strand);
        auto listed = std::make_shared<reply_op>(
            [op, out, queue = fair->queue](error_code ec, redis_reply r) {
                for (auto& e : r.elements) {
                    participant p;
                    p.name = p.data = std::move(e.str);
                    p.path = queue;
                    out->push_back(std::move(p));
                }
                op->complete(ec, std::move(*out));
            },
            rc->strand);
        asio::dispatch(rc->strand, [rc = rc, got, listed, key = s->path, queue = fair->queue] {
            const std::string_view get[] = {"GET", key};
            rc->exec(get, got);
            const std::string_view range[] = {"LRANGE", queue, "0", "-1"};
            rc->exec(range, listed);
        });
    }

    std::string failure_context(std::string_view operation, std::string_view resource, const error_code& ec) override
    {
        auto text = server_text(ec);
        return fmt::format("{} {} (redis lock){}{}{}", operation, resource, text.empty() ? "" : ": the server said: ",
                           text, advice(text));
    }

    // What an error reply's text suggests, beyond its code's message ("" if nothing).
    static std::string_view advice(std::string_view text) noexcept
    {
        // A sentinel answers PING (the handshake) but knows no EVAL; so does a server without scripting.
        if (text.starts_with("ERR unknown command 'EVAL"))
            return " (a Sentinel's port? Sentinel runs no scripts: for the master it names, use "
                   "redis+sentinel://HOST:PORT/MASTER)";
        return {};
    }

    void log_failure(std::string_view operation, std::string_view resource, const error_code& ec) override
    {
        // The client was closed: one line per acquisition at debug level (closing a client with
        // many waiters is no news); else the server's own text too, when it answered with an error.
        auto level = ec == redis_errc::closed ? log_level::debug : log_level::warn;
        std::string text = server_text(ec);
        rc->log(level, fmt::format("{} {} on {}: {}{}{}{}", operation, resource, lock_site(rc->url, resource),
                                   ec.message(), text.empty() ? "" : ": the server said: ", text, advice(text)));
    }

    void log(log_level level, std::string_view message) override { rc->log(level, message); }

    // A Redis lock never lingers (its recipe watches no queue): a released key goes back at once.
    bool still_held(const node_state&) const noexcept override { return false; }
    void watch_queue(const std::shared_ptr<lock_object>&, const std::shared_ptr<node_state>&) override {}
    // A key has one holder: no read-write lock's downgrade here.
    void start_immediate(active_task task, std::string) override
    {
        task.complete(make_error_code(client_errc::not_supported), std::nullopt);
    }

    // The text of the last error reply to an acquisition when `ec` is that reply's code ("" if
    // none: an error of ours, not the server's refusal).
    std::string server_text(const error_code& ec) const;
    // An acquisition's error reply: its code and text, for server_text.
    void keep_server_text(const error_code& ec, std::string text);

    // On the strand: when the client is closed, the waiters give up at once, and the holders'
    // renewal ends with its timer (nothing of ours stays pending after the close: issue 40).
    void ensure_close_hook()
    {
        if (close_hook)
            return;
        std::weak_ptr<redis_backend> w = shared_from_this();
        close_hook = rc->add_close_hook([w] {
            if (auto self = w.lock()) {
                self->wake_all();
                self->client_closed();
            }
        });
    }

    // On the strand.
    void ensure_subscribed()
    {
        if (sub_id)
            return;
        std::weak_ptr<redis_backend> w = shared_from_this();
        sub_id = rc->subscribe(channel, [w](channel_event ev, std::string_view message) {
            auto self = w.lock();
            if (!self)
                return;
            if (ev == channel_event::subscribed)
                self->subscribed = true;
            // A fair lock's message names the one waiter it is for (messages may have been
            // missed before a (re)subscription: every waiter looks again then).
            if (self->fair && ev == channel_event::message)
                return self->wake(message);
            self->wake_all();
        });
    }

    // Deletes `key` if an attempt of ours whose outcome we did not learn set it to `value` (sent
    // after that attempt on the same connection, or after a drop on a later one, so run after
    // it: the connection keeps the order, see redis_link::send). On the strand.
    void take_back(const std::string& key, const std::string& value)
    {
        auto kept = std::make_shared<const std::pair<std::string, std::string>>(key, value);
        compare_and_delete(kept, kept->first, kept->second, steady_clock::now() + opts.ttl,
                           [](error_code, std::string_view) {});
    }

    void wake(std::string_view value)
    {
        for (auto* w : waiters)
            if (w->value && *w->value == value) {
                w->notified = true;
                if (w->timer)
                    w->timer->cancel();
            }
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
    // `args` are read when the command is sent, at the start.
    asio::awaitable<std::tuple<error_code, redis_reply>> run(const std::string& script, const std::string& sha, int nkeys,
                                                       command_args args, steady_clock::time_point until)
    {
        auto start = [this, &script, &sha, nkeys, args](auto handler) {
            auto op = make_pooled<reply_op>(std::move(handler), rc->strand);
            op->inline_ok = true;  // the coroutine runs on the strand
            op->bind_cancellation();
            eval_acked(*rc, script, sha, args, nkeys, std::move(op));  // + WAIT when asked
        };
        if (until == steady_clock::time_point::max()) {
            auto [ec, r] = co_await asio::async_initiate<decltype(use_tuple), void(error_code, redis_reply)>(
                start, use_tuple);
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

    // Until the client's command connection is up (or closed), at most until `until`: an attempt
    // sent while it (re)connects waits in its queue, and its grant's lease would count from the
    // queueing, long before the script ran (a guard lost as it is granted, after a failover). An
    // idle client is made to connect. On the strand.
    asio::awaitable<void> wait_connected(steady_clock::time_point until)
    {
        for (int round = 0; round < 64; ++round) {
            auto st = rc->state.load();
            if (st == redis_state::idle) {
                rc->connect(make_pooled<op_state<>>([](error_code) {}, rc->strand));
                st = rc->state.load();
            }
            if (st != redis_state::connecting && st != redis_state::reconnecting)
                co_return;
            auto start = [this, st](auto handler) {
                rc->wait_state(st, make_pooled<op_state<redis_state>>(std::move(handler), rc->strand));
            };
            if (until == steady_clock::time_point::max()) {
                co_await asio::async_initiate<decltype(use_tuple), void(error_code, redis_state)>(
                    start, use_tuple);
                const bool stopped = co_await cancelled();  // (not in the condition: see docs/building.md, Compilers)
                if (stopped)
                    co_return;
                continue;
            }
            asio::steady_timer bound(co_await asio::this_coro::executor, until);
            auto [order, ec, changed, tec] =
                co_await asio::experimental::make_parallel_group(
                    asio::async_initiate<decltype(asio::deferred), void(error_code, redis_state)>(start,
                                                                                                   asio::deferred),
                    bound.async_wait(asio::deferred))
                    .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
            (void)ec, (void)changed, (void)tec;
            if (order[0] == 1)
                co_return;  // the deadline: the attempt then says what happened
            const bool stopped = co_await cancelled();
            if (stopped)
                co_return;
        }
    }

    // Until when a write of the key confirmed by a reply to a request sent at `sent` is ours for
    // sure: the TTL ran from a moment after `sent`, less the safety margin (clock drift, the
    // reply's way back). The renewal's bound, and a grant's: one that comes later is not handed on.
    steady_clock::time_point held_until(steady_clock::time_point sent) const
    {
        return sent + opts.ttl - opts.safety_margin;
    }

    // The first attempt's reply, when first_attempt made it (with the time it was sent).
    struct attempt_reply {
        error_code ec;
        redis_reply r;
        steady_clock::time_point sent;
    };
    // `value`: the acquisition's token (made here when empty).
    static asio::awaitable<redis_acquire_result> take(active_task task, std::shared_ptr<redis_backend> b,
                                                      std::string value, std::optional<attempt_reply> first);
    struct first_attempt;
    // A fair lock's acquisition (redis/fair_lock.cpp).
    static asio::awaitable<redis_acquire_result> take_fair(active_task task, std::shared_ptr<redis_backend> b);
    // A read-write lock's (redis/shared_lock.cpp): acquisition, release script, participants.
    static asio::awaitable<redis_acquire_result> take_shared(active_task task, std::shared_ptr<redis_backend> b);
    void rw_release(std::string_view key, std::string_view value, std::shared_ptr<reply_op> op);
    void rw_participants(const std::shared_ptr<lock_object>& s, std::shared_ptr<op_state<std::vector<participant>>> op);
    // A semaphore's (redis/semaphore.cpp): its acquisition, its listing, and its scripts' keys and
    // arguments (`value` and the leases asked `n` must outlive the call that sends them).
    void start_sem(active_task task);
    void sem_participants(const std::shared_ptr<lock_object>& s,
                          std::shared_ptr<op_state<std::vector<participant>>> op);
    std::array<std::string_view, 11> sem_args(std::string_view value, std::string_view n) const;

    std::shared_ptr<redis_impl> rc;
    std::string fence_key;
    std::string channel;
    redis_mutex_options opts;
    std::string ttl_arg;  // opts.ttl in milliseconds, as the scripts take it
    std::optional<fair_keys> fair;
    std::shared_ptr<const rw_keys> rw;  // set by the read-write lock, before any acquisition
    std::shared_ptr<sem_keys> sem;
    error_code config_error;
    std::uint64_t sub_id = 0;
    std::uint64_t close_hook = 0;
    bool subscribed = false;
    mutable std::mutex text_m;
    error_code last_server_code;   // guarded by text_m
    std::string last_server_text;  // guarded by text_m
    std::list<waiter*> waiters;

    // The holders' renewals (redis/renewal.cpp), on the strand (a read-write lock's readers or a
    // semaphore's holders: several at once), and their one timer: arm_renewal(at) fires it at `at`
    // or before. It stays armed after a hold ends (a short hold costs no timer operation).
    std::vector<std::shared_ptr<key_renewal>> renewing;
    void arm_renewal(steady_clock::time_point at);
    void end_renewal() noexcept;  // the backend goes: a reply still due finds the renewal stopped
    // The client was closed: a key still held can no longer be renewed (its holder's guard is
    // lost), and the renewal timer is cancelled.
    void client_closed();

private:
    asio::steady_timer renew_timer_;
    steady_clock::time_point renew_at_;
    std::uint64_t renew_gen_ = 0;
    bool renew_armed_ = false;
};

// Unique per holder: the process, the task, and this acquisition among all of the process.
std::string new_value(owner_id owner);

// `task` holds the key: reports it (the lease), and starts the renewal (redis/renewal.cpp). On the
// strand.
guard hold_key(active_task& task, const std::shared_ptr<redis_backend>& b, std::string value, std::int64_t fence,
               steady_clock::time_point sent);

}  // namespace zkcoro::detail

#endif
