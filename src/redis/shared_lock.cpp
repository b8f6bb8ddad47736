// The Redis read-write lock (redis_shared_mutex): two lock objects on one key, one per side, each
// with a redis_backend whose acquisition runs the side's script (redis/shared_scripts.cpp) and
// waits for a release (every release publishes on P:released), a holder's TTL, the earliest
// reader's lease end or waiting writer's mark, whichever comes first. The holds are the mutex's:
// renewal (redis/renewal.cpp, with the read-write renew script), lost signal, fencing token.
#include "redis/backend.hpp"
#include "redis/shared_lock.hpp"

#include <zkcoro/detail/access.hpp>
#include <zkcoro/error.hpp>
#include <zkcoro/redis_shared_mutex.hpp>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <utility>

namespace zkcoro {

namespace detail {

namespace {

// An acquire script's reply: {1, fencing token} (granted) or {0, pttl, holder, ms left} (waits).
bool rw_reply_ok(const redis_reply& r)
{
    using k = redis_reply::kind;
    if (r.type != k::array || r.elements.size() < 2 || r.elements[0].type != k::integer ||
        r.elements[1].type != k::integer)
        return false;
    return r.elements[0].integer == 1 ||
           (r.elements.size() >= 4 && r.elements[2].type == k::string && r.elements[3].type == k::integer);
}

// A writer of ours ("<process>:<task hex>:<n>:<lock object n>w"): it publishes its release.
bool rw_writer(std::string_view v)
{
    if (!v.ends_with('w'))
        return false;
    const auto colon = v.rfind(':');
    return colon != std::string_view::npos && colon + 2 < v.size() &&
           v.substr(colon + 1, v.size() - colon - 2).find_first_not_of("0123456789") == std::string_view::npos &&
           publishing_holder(v.substr(0, colon));
}

}  // namespace

void redis_backend::rw_release(std::string_view key, std::string_view value, std::shared_ptr<reply_op> op)
{
    const std::string_view args[] = {key, rw->readers, rw->writers, value, channel};
    rc->eval(rw_release_script().text, rw_release_script().sha, args, 3, std::move(op));
}

// The writer (GET of the key), the readers, then the waiting writers (ZRANGE of each), pipelined.
void redis_backend::rw_participants(const std::shared_ptr<lock_object>& s,
                                    std::shared_ptr<op_state<std::vector<participant>>> op)
{
    auto out = std::make_shared<std::vector<participant>>();
    auto add = [out](std::string name, const std::string& path, lock_mode mode, bool holds) {
        participant p;
        p.name = p.data = std::move(name);
        p.path = path;
        p.mode = mode;
        p.holds = holds;
        out->push_back(std::move(p));
    };
    auto got = std::make_shared<reply_op>(
        [add, key = s->path](error_code ec, redis_reply r) {
            if (!ec && r.type == redis_reply::kind::string)
                add(std::move(r.str), key, lock_mode::write, true);
        },
        rc->strand);
    auto readers = std::make_shared<reply_op>(
        [add, path = rw->readers](error_code, redis_reply r) {
            for (auto& e : r.elements)
                add(std::move(e.str), path, lock_mode::read, true);
        },
        rc->strand);
    auto writers = std::make_shared<reply_op>(
        [add, op, out, path = rw->writers](error_code ec, redis_reply r) {
            for (auto& e : r.elements)
                add(std::move(e.str), path, lock_mode::write, false);
            op->complete(ec, std::move(*out));
        },
        rc->strand);
    asio::dispatch(rc->strand, [rc = rc, got, readers, writers, key = s->path, k = rw] {
        const std::string_view get[] = {"GET", key};
        rc->exec(get, got);
        const std::string_view r[] = {"ZRANGE", k->readers, "0", "-1"};
        rc->exec(r, readers);
        const std::string_view w[] = {"ZRANGE", k->writers, "0", "-1"};
        rc->exec(w, writers);
    });
}

asio::awaitable<redis_acquire_result> redis_backend::take_shared(active_task task, std::shared_ptr<redis_backend> b)
{
    co_await asio::this_coro::throw_if_cancelled(false);
    co_await asio::this_coro::reset_cancellation_state(asio::enable_partial_cancellation());
    const auto& s = task.object();
    const auto deadline = task.deadline();
    const auto& k = *b->rw;
    // Every attempt sent may have granted us with its reply lost, or left a writer's mark:
    // leaving runs the release script (after the attempts on the connection, so run after them),
    // which takes both away and tells the waiters.
    bool sent_any = false;
    std::string value = new_value(task.owner()) + k.tag + (k.write ? "w" : "r");
    auto fail = [&](error_code ec) {
        if (sent_any && !b->rc->closing())
            b->take_back(s->path, value);
        task.failed();
        return redis_acquire_result{error_code(ec), std::nullopt};
    };
    if (b->config_error)
        co_return fail(b->config_error);
    auto ex = co_await asio::this_coro::executor;
    const auto ttl = std::to_string(b->opts.ttl.count());
    // The read script's third and fourth arguments: our owner's prefix and our lock object's
    // writers' suffix (a write key of ours, taken through this lock, lets us read: a downgrade);
    // the write script's third: how long our waiting mark holds readers back.
    const auto third = k.write ? std::to_string(k.writer_timeout.count())
                               : fmt::format("{}:{:x}:", process_name(), task.owner());
    const auto fourth = k.tag + "w";
    const auto& script = k.write ? rw_write_script() : rw_read_script();
    // A writer comes back before its mark runs out; a reader at the latest after a TTL.
    const auto refresh = k.write ? std::chrono::milliseconds(k.writer_timeout / 3) : b->opts.ttl;
    waiter me;
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
    // Each round: one attempt, then a wait for a release, the holder's TTL, the earliest reader's
    // lease end (a writer) or waiting writer's mark (a reader), our refresh time, a
    // resubscription or the deadline. The deadline bounds the rounds.
    for (;;) {
        me.notified = false;
        co_await b->wait_connected(deadline);
        const bool stopped = co_await cancelled();  // (not in the condition: see docs/building.md, Compilers)
        if (stopped)
            co_return fail(asio::error::operation_aborted);
        const auto sent = steady_clock::now();
        sent_any = true;
        // (The arguments are built apart: g++ 12 miscompiles a braced list inside co_await.)
        const std::array<std::string_view, 8> args{s->path, b->fence_key, k.readers, k.writers,
                                                   value,   ttl,          third,     fourth};
        error_code ec;
        redis_reply r;
        std::tie(ec, r) =
            co_await b->run(script.text, script.sha, 4, args, std::max(deadline, sent + std::chrono::seconds(1)));
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
                           fmt::format("redis read-write lock {}: {}; trying again within the acquisition's deadline",
                                       s->path, ec.message()));
            transient = ec;
            wait = next_retry(retry);
        } else {
            if (!rw_reply_ok(r))
                co_return fail(redis_errc::unexpected_reply);
            if (r.elements[0].integer == 1) {
                if (steady_clock::now() < b->held_until(sent))
                    co_return redis_acquire_result{error_code{}, hold_key(task, b, value, r.elements[1].integer, sent)};
                // Too late to be sure of (see take()): the next attempt, at once, is granted again
                // (our value still holds) or not.
                b->rc->log(log_level::warn, fmt::format("redis read-write lock {}: granted, but the reply came later "
                                                        "than the TTL less the safety margin; trying again",
                                                        s->path));
                if (steady_clock::now() >= deadline)
                    co_return fail(transient);
                continue;
            }
            transient = {};
            retry = {};
            const auto pttl = r.elements[1].integer;
            const auto& holder = r.elements[2].str;
            const auto left = r.elements[3].integer;
            wait = refresh;
            if (!holder.empty()) {
                // A writer holds: its release publishes, its expiry frees it (-1: no TTL). One
                // that is not ours (redis-py's Lock on the key) publishes nothing: a bounded backoff.
                if (pttl >= 0)
                    wait = std::min(wait, std::chrono::milliseconds(pttl + 1));
                if (!rw_writer(holder))
                    wait = std::min(wait, next_poll(poll));
            }
            // A reader's lease (a writer waits) or a waiting writer's mark (a reader waits) may
            // run out with nobody telling: a crashed holder or writer.
            if (left >= 0)
                wait = std::min(wait, std::chrono::milliseconds(left + 1));
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

}  // namespace detail

namespace {

std::shared_ptr<detail::lock_object> make_side(redis_client& c, const std::string& key,
                                               const redis_shared_mutex_options& opts, bool write,
                                               const std::string& tag, detail::recipe_params p)
{
    auto impl = detail::access::redis_of(c);
    redis_mutex_options m;
    m.ttl = opts.ttl;
    m.safety_margin = opts.safety_margin;
    m.local_handoff = false;
    auto backend = std::make_shared<detail::redis_backend>(impl, key, m);
    const auto prefix = detail::fair_prefix(key);
    auto k = std::make_shared<detail::rw_keys>();
    k->readers = prefix + ":readers";
    k->writers = prefix + ":writers";
    k->tag = tag;
    k->write = write;
    k->writer_timeout = opts.writer_timeout.count() == 0 ? opts.ttl : opts.writer_timeout;
    if (k->writer_timeout < std::chrono::milliseconds(100) || k->writer_timeout > std::chrono::hours(24))
        backend->config_error = redis_errc::bad_ttl;
    if (key.empty() || key.size() > detail::max_redis_key_size)
        backend->config_error = redis_errc::bad_key;
    backend->fence_key = prefix + ":fencing";
    backend->channel = prefix + ":released";
    backend->rw = std::move(k);
    p.reentrant = true;
    p.watch_own_node = false;
    p.local_handoff_allowed = false;
    mutex_options e;
    e.local_handoff = false;
    return std::make_shared<detail::lock_object>(std::move(backend), impl->strand, key, e, std::move(p));
}

}  // namespace

redis_shared_mutex::side::side(std::shared_ptr<detail::lock_object> state) noexcept : basic_mutex(std::move(state)) {}
redis_shared_mutex::side::side(side&&) noexcept = default;
redis_shared_mutex::side::~side() = default;

redis_shared_mutex::redis_shared_mutex(redis_client& c, std::string key, redis_shared_mutex_options opts)
{
    // Upgrade would wait for ever behind our own read lease: refused before anything is sent.
    // (Downgrade needs no hook: the read script grants the owner of the write key.)
    struct sides {
        std::weak_ptr<detail::lock_object> read;
    };
    auto links = std::make_shared<sides>();
    detail::recipe_params wp;
    wp.precheck = [links](owner_id owner) -> error_code {
        auto r = links->read.lock();
        if (r && r->held_count(owner) > 0)
            return client_errc::upgrade_not_supported;
        return {};
    };
    // The lock object's tag in its values: a downgrade is by the task holding the write lock
    // through this object (another object's read on the key waits, as another task's would).
    static std::atomic<std::uint64_t> objects{0};
    const auto tag = ":" + std::to_string(++objects);
    // The recipes' one naming rule: on a cluster the write key is {key}, as a redis_mutex's key on
    // the same name, so that the two exclude each other there as they do on one server.
    key = detail::recipe_key(detail::access::redis_of(c)->url, std::move(key));
    auto write_state = make_side(c, key, opts, true, tag, std::move(wp));
    auto read_state = make_side(c, key, opts, false, tag, {});
    links->read = read_state;
    writer_.reset(new side(std::move(write_state)));
    reader_.reset(new side(std::move(read_state)));
}

redis_shared_mutex::redis_shared_mutex(redis_shared_mutex&&) noexcept = default;
redis_shared_mutex::~redis_shared_mutex() = default;

const std::string& redis_shared_mutex::key() const noexcept { return writer_->state()->path; }

}  // namespace zkcoro
