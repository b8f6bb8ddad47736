// zkcoro::leader_latch: Curator's LeaderLatch, the lock engine with "latch-" nodes holding the
// participant id. A background coroutine keeps the latch in the election: queue, lead until the
// term is lost, queue again; until close().
#include "async/coroutine.hpp"
#include "engine/acquisition.hpp"
#include "engine/rules.hpp"
#include "zookeeper/lock.hpp"

#include <zkcoro/detail/access.hpp>
#include <zkcoro/leader_latch.hpp>
#include <zkcoro/mutex.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <fmt/format.h>

namespace zkcoro {
namespace detail {

namespace {
// Consecutive failed attempts to queue (e.g. ZNOAUTH on the path) before the latch gives up.
constexpr int max_failures = 30;

recipe_params latch_recipe()
{
    recipe_params r;
    r.base_name = std::string(latch_marker);
    r.sort = [](std::vector<std::string>& names) { sort_by_sequence(names, latch_marker); };
    r.local_handoff_allowed = false;
    return r;
}

mutex_options latch_lock_options(const leader_latch_options& o)
{
    mutex_options m;
    m.data = o.id;
    m.policy = o.policy;
    m.safety_margin = o.safety_margin;
    m.local_handoff = false;
    return m;
}
}  // namespace

struct latch_state : std::enable_shared_from_this<latch_state> {
    latch_state(const client& c, std::string p, leader_latch_options o)
        : zk(access::share(c)), strand(asio::make_strand(zk.get_executor())), path(std::move(p)), id(o.id),
          lock(make_zk_lock(c, path, latch_lock_options(o), latch_recipe())),
          changed(strand, std::chrono::steady_clock::time_point::max())
    {
        // An empty id stores an empty node, as Curator's default id does (not "<host>:<pid>").
        if (id.empty())
            lock->data.clear();
    }

    client zk;
    asio::strand<asio::any_io_executor> strand;
    std::string path;
    std::string id;
    std::shared_ptr<lock_object> lock;
    asio::steady_timer changed;      // strand only; cancelled at every change of the state below
    asio::cancellation_signal stop;  // strand only; emitted by close
    bool started = false;            // strand only
    bool closing = false;            // strand only
    bool finished = false;           // strand only: the election loop has ended
    error_code ended_by;             // strand only: why it ended, when its client closed for good
    std::vector<std::shared_ptr<op_state<>>> close_waiters;  // strand only

    mutable std::mutex m;
    std::shared_ptr<lease> term;  // guarded by m: the current term (null when not leading)
    std::atomic<std::uint64_t> terms{0};

    std::shared_ptr<lease> current() const
    {
        std::lock_guard lk(m);
        return term && !term->lost() ? term : nullptr;
    }
    void set_term(std::shared_ptr<lease> t)
    {
        {
            std::lock_guard lk(m);
            term = std::move(t);
        }
        changed.cancel();
    }
    void finish()
    {
        finished = true;
        changed.cancel();
        for (auto& w : std::exchange(close_waiters, {}))
            w->complete({});
    }
};

namespace {

// The election loop: queue, lead until the term ends, queue again. Each round waits for the
// grant, then for the term's end; failures wait a second each and end the loop after
// max_failures in a row.
asio::awaitable<void> run_election(std::shared_ptr<latch_state> s)
{
    auto m = access::make_mutex(s->lock);
    const auto owner = reinterpret_cast<owner_id>(s.get());
    asio::steady_timer backoff(s->strand);
    int failures = 0;
    while (!s->closing && failures < max_failures) {
        auto [ec, g] = co_await m.async_acquire(owner, std::chrono::steady_clock::duration::max(),
                                                asio::bind_cancellation_slot(s->stop.slot(), use_tuple));
        if (s->closing) {
            if (g)
                co_await g->async_release(use_tuple);
            break;
        }
        if (ec) {
            if (ec == client_errc::closed || ec == client_errc::auth_failed) {
                s->ended_by = ec;  // no later session to queue in: the waiters learn why at once
                break;
            }
            if (ec == client_errc::invalid_path || ec == client_errc::invalid_argument)
                break;
            ++failures;
            access::log(s->zk, log_level::warn,
                        fmt::format("leader latch {}: could not queue ({}); retrying in 1 s", s->path, ec.message()));
            backoff.expires_after(std::chrono::seconds(1));
            co_await backoff.async_wait(asio::bind_cancellation_slot(s->stop.slot(), use_tuple));
            continue;
        }
        failures = 0;
        ++s->terms;
        s->set_term(access::lease_of(*g));
        access::log(s->zk, log_level::info, fmt::format("leader latch {}: leading as {}", s->path, g->node_path()));
        co_await g->async_wait_lost(asio::bind_cancellation_slot(s->stop.slot(), use_tuple));
        s->set_term(nullptr);
        if (!s->closing)
            access::log(s->zk, log_level::warn, fmt::format("leader latch {}: leadership lost; queueing again", s->path));
        co_await g->async_release(use_tuple);
    }
    if (failures >= max_failures)
        access::log(s->zk, log_level::error,
                    fmt::format("leader latch {}: left the election after {} failed attempts", s->path, failures));
    s->finish();
}

using await_result = std::tuple<error_code, std::optional<leadership>>;

// Waits on the strand for a term, the deadline, or the end of the election. Each round waits for
// a change of the latch's state or the deadline, so it cannot spin.
asio::awaitable<await_result> await_term(std::shared_ptr<latch_state> s, std::chrono::steady_clock::time_point deadline)
{
    co_await asio::this_coro::throw_if_cancelled(false);
    // The state co_spawn gives lets terminal cancellation through only: a partial one (documented
    // as taken) would be ignored, and the wait reported as timed out at its deadline.
    co_await asio::this_coro::reset_cancellation_state(asio::enable_partial_cancellation());
    for (;;) {
        if (s->lock->path_error)
            co_return await_result{s->lock->path_error, std::nullopt};
        if (auto t = s->current())
            co_return await_result{error_code{}, access::make_leadership(std::move(t))};
        if (s->closing || s->finished)
            co_return await_result{s->ended_by ? s->ended_by : make_error_code(client_errc::closed), std::nullopt};
        if (std::chrono::steady_clock::now() >= deadline)
            co_return await_result{error_code{}, std::nullopt};
        asio::steady_timer dl(s->strand, deadline);
        co_await asio::experimental::make_parallel_group(s->changed.async_wait(asio::deferred), dl.async_wait(asio::deferred))
            .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
        const bool stop = co_await cancelled();
        if (stop)
            co_return await_result{make_error_code(asio::error::operation_aborted), std::nullopt};
    }
}

void start_election(const std::shared_ptr<latch_state>& s)
{
    asio::post(s->strand, [s] {
        if (s->started || s->closing)
            return;
        s->started = true;
        asio::co_spawn(s->strand, run_election(s), asio::detached);
    });
}

}  // namespace

leadership access::make_leadership(std::shared_ptr<lease> l) { return leadership(std::move(l)); }

}  // namespace detail

std::int64_t leadership::fencing_token() const noexcept { return lease_ ? lease_->fencing_token() : 0; }
const std::string& leadership::node_path() const noexcept
{
    static const std::string empty;
    return lease_ ? lease_->resource() : empty;
}
std::int64_t leadership::session_id() const noexcept { return lease_ ? lease_->session_id() : 0; }
leadership::executor_type leadership::get_executor() const noexcept
{
    return lease_ ? lease_->executor() : executor_type(asio::system_executor());
}
bool leadership::lost() const noexcept { return lease_ && lease_->lost(); }
asio::cancellation_slot leadership::lost_slot() noexcept { return lease_ ? lease_->lost_slot() : asio::cancellation_slot(); }

leader_latch::leader_latch(client& c, std::string path, leader_latch_options opts)
    : state_(std::make_shared<detail::latch_state>(c, std::move(path), std::move(opts)))
{
}

leader_latch::~leader_latch() { close(); }

const std::string& leader_latch::path() const noexcept { return state_->path; }
const std::string& leader_latch::id() const noexcept { return state_->id; }
client::executor_type leader_latch::get_executor() const noexcept { return state_->zk.get_executor(); }

void leader_latch::start() { detail::start_election(state_); }

bool leader_latch::is_leader() const noexcept { return state_->current() != nullptr; }

std::uint64_t leader_latch::terms() const noexcept { return state_->terms.load(); }

asio::awaitable<std::optional<leadership>> leader_latch::await_leadership(std::chrono::steady_clock::duration timeout)
{
    co_return co_await async_await_leadership(timeout, asio::use_awaitable);
}

void leader_latch::start_await(std::chrono::steady_clock::duration t,
                               detail::any_handler<void(error_code, std::optional<leadership>)> handler)
{
    start();
    auto op = detail::make_pooled<detail::op_state<std::optional<leadership>>>(std::move(handler), get_executor());
    auto slot = op->cancellation_slot();
    detail::spawn_with(state_->strand, detail::await_term(state_, detail::deadline_after(t)), slot,
                       [op](error_code ec, std::optional<leadership> l) { op->complete(ec, std::move(l)); });
}

void leader_latch::start_participants(detail::any_handler<void(error_code, std::vector<participant>)> handler)
{
    state_->lock->participants(
        detail::make_pooled<detail::op_state<std::vector<participant>>>(std::move(handler), get_executor()));
}

void leader_latch::start_close(detail::any_handler<void(error_code)> handler)
{
    auto op = detail::make_pooled<detail::op_state<>>(std::move(handler), get_executor());
    asio::post(state_->strand, [s = state_, op] {
        s->closing = true;
        s->stop.emit(asio::cancellation_type::terminal);
        s->changed.cancel();
        if (!s->started || s->finished)
            return void(op->complete({}));
        s->close_waiters.push_back(op);
    });
}

void leader_latch::close()
{
    start_close([](error_code) {});
}

}  // namespace zkcoro
