// All-or-nothing acquisition of several locks, sorted by path, with one deadline.
#include "async/coroutine.hpp"
#include "async/op_state.hpp"
#include "engine/acquisition.hpp"

#include <zkcoro/multi_lock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <iterator>

namespace zkcoro {

namespace {

using clock = std::chrono::steady_clock;
using multi_outcome = std::tuple<error_code, std::optional<multi_guard>>;

}  // namespace

multi_guard& multi_guard::operator=(multi_guard&& o) noexcept
{
    if (this != &o) {
        release_all();
        guards_ = std::move(o.guards_);
        owner_ = o.owner_;
    }
    return *this;
}

multi_guard::~multi_guard() { release_all(); }

void multi_guard::release_all() noexcept
{
    // Reverse order; each guard releases in the background as it is destroyed.
    while (!guards_.empty())
        guards_.pop_back();
}

bool multi_guard::lost() const noexcept
{
    return std::any_of(guards_.begin(), guards_.end(), [](const guard& g) { return g.lost(); });
}

asio::awaitable<void> multi_guard::release()
{
    error_code first;
    for (auto it = guards_.rbegin(); it != guards_.rend(); ++it) {
        auto [ec] = co_await it->async_release(asio::as_tuple(asio::use_awaitable));
        if (ec && !first)
            first = ec;
    }
    guards_.clear();
    if (first)
        throw boost::system::system_error(first);
}

multi_lock::multi_lock(std::vector<lock_ref> locks) : locks_(std::move(locks))
{
    std::stable_sort(locks_.begin(), locks_.end(), [](const lock_ref& a, const lock_ref& b) {
        if (a.path() != b.path())
            return a.path() < b.path();
        return !a.is_read_side() && b.is_read_side();
    });
    if (!locks_.empty())
        ex_ = locks_.front().get_executor();
}

asio::any_io_executor multi_lock::get_executor() const noexcept
{
    return ex_ ? ex_ : asio::any_io_executor(asio::system_executor());
}

std::vector<std::string> multi_lock::order() const
{
    std::vector<std::string> r;
    for (auto& l : locks_)
        r.push_back(l.path() + (l.is_read_side() ? " (read)" : ""));
    return r;
}

asio::awaitable<multi_guard> multi_lock::acquire()
{
    auto r = co_await acquire(clock::duration::max());
    co_return std::move(*r);
}

asio::awaitable<std::optional<multi_guard>> multi_lock::acquire(clock::duration timeout)
{
    auto me = co_await this_task::id();
    auto [ec, r] = co_await async_acquire(me, timeout, asio::as_tuple(asio::use_awaitable));
    if (ec) {
        std::string paths;
        for (const auto& p : order())
            paths += (paths.empty() ? "" : ", ") + p;
        throw boost::system::system_error(ec, "acquire all of " + paths + ": the locks already taken were released");
    }
    co_return std::move(r);
}

namespace {

// Releases `held`, last taken first.
asio::awaitable<void> roll_back(std::vector<guard>& held)
{
    while (!held.empty()) {
        co_await held.back().async_release(asio::as_tuple(asio::use_awaitable));
        held.pop_back();
    }
}

asio::awaitable<multi_outcome> acquire_all(std::vector<lock_ref> members, owner_id owner, clock::time_point deadline)
{
    co_await asio::this_coro::throw_if_cancelled(false);
    co_await asio::this_coro::reset_cancellation_state(asio::enable_partial_cancellation());
    std::vector<guard> held;
    for (;;) {
        for (auto& member : members) {
            auto [ec, g] = co_await member.async_acquire(owner, detail::remaining(deadline), asio::as_tuple(asio::use_awaitable));
            if (ec || !g) {
                co_await roll_back(held);
                co_return multi_outcome{ec, std::nullopt};
            }
            held.push_back(std::move(*g));
        }
        // A member taken first may have been lost while a later one was awaited (its session
        // expired, or could have: the lost policy): the set is not held. Give it all back and
        // take it again in the same order (never one member out of order: two multi-locks could
        // deadlock), within the same deadline.
        if (std::none_of(held.begin(), held.end(), [](const guard& g) { return g.lost(); }))
            break;
        co_await roll_back(held);
        const bool stop = co_await detail::cancelled();  // (met during the roll-back)
        if (stop)
            co_return multi_outcome{make_error_code(asio::error::operation_aborted), std::nullopt};
    }
    multi_outcome r;
    std::get<1>(r).emplace(std::move(held), owner);
    co_return r;
}

}  // namespace

void multi_lock::start_acquire(owner_id o, clock::duration t,
                               detail::any_handler<void(error_code, std::optional<multi_guard>)> handler)
{
    auto ex = get_executor();
    auto op = detail::make_pooled<detail::op_state<std::optional<multi_guard>>>(std::move(handler), ex);
    if (locks_.empty())
        return void(op->complete(client_errc::invalid_argument, std::nullopt));
    auto deadline = detail::deadline_after(t);
    detail::spawn_with(ex, acquire_all(locks_, o, deadline), op->cancellation_slot(),
                       [op](error_code ec, std::optional<multi_guard> g) { op->complete(ec, std::move(g)); });
}

namespace {

using participants_outcome = std::tuple<error_code, std::vector<participant>>;

asio::awaitable<participants_outcome> list_all(std::vector<lock_ref> members)
{
    std::vector<participant> all;
    for (auto& member : members) {
        auto [ec, parts] = co_await member.async_participants(asio::as_tuple(asio::use_awaitable));
        if (ec)
            co_return participants_outcome{ec, {}};
        std::move(parts.begin(), parts.end(), std::back_inserter(all));
    }
    co_return participants_outcome{error_code{}, std::move(all)};
}

}  // namespace

void multi_lock::start_participants(detail::any_handler<void(error_code, std::vector<participant>)> handler)
{
    auto op = detail::make_pooled<detail::op_state<std::vector<participant>>>(std::move(handler), get_executor());
    detail::spawn_with(get_executor(), list_all(locks_), {},
                       [op](error_code ec, std::vector<participant> parts) { op->complete(ec, std::move(parts)); });
}

}  // namespace zkcoro
