// zkcoro::run_as_leader: leader selection on Curator's LeaderSelector layout (a mutex whose
// holder is the leader).
#ifndef ZKCORO_LEADER_SELECTOR_HPP
#define ZKCORO_LEADER_SELECTOR_HPP

#include <zkcoro/client.hpp>
#include <zkcoro/guard.hpp>
#include <zkcoro/lock_options.hpp>
#include <zkcoro/mutex.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <exception>
#include <string>
#include <utility>

namespace zkcoro {

/// Options of run_as_leader (Curator's LeaderSelector).
struct leader_selector_options {
    /// The participant id, stored as the lock node's data (Curator's LeaderSelector id). Empty:
    /// "host=... pid=... program=...", the mutex's default.
    std::string id;
    /// After a term ends (the coroutine returned, or leadership was lost), queue again (Curator's
    /// autoRequeue). Off: run_as_leader returns after the first term.
    bool requeue = false;
    lost_policy policy = lost_policy::deadline;  ///< When leadership counts as lost, as for a guard (see lost_policy).
    std::chrono::milliseconds safety_margin{0};  ///< For lost_policy::deadline: how long before the possible expiry leadership counts as lost.
};

/// Takes part in a leader selection shared with Curator's LeaderSelector on `path` (an
/// InterProcessMutex there whose holder leads; node data = the participant id) and runs
/// `lead(guard&)` each time this participant becomes leader. `lead` returns an
/// asio::awaitable<void>; it runs as a child coroutine on the caller's executor.
///
/// When leadership is lost (the guard's lost signal), `lead` receives terminal cancellation; a
/// term ends when `lead` returns or is cancelled, and leadership is given up (the node deleted).
/// With requeue the participant then queues again, otherwise run_as_leader returns. An exception
/// out of `lead` other than the cancellation of a lost term ends run_as_leader with it, after
/// the release. Cancelling run_as_leader (per-operation cancellation of the awaiting coroutine)
/// cancels `lead` too and leaves the selection. run_as_leader is a coroutine of the caller's
/// thread of execution: it takes the cancellation types that thread's filter lets through, which
/// by Asio's default (co_spawn) is terminal cancellation only; a partial request is then ignored
/// and the call goes on (`operator||` and a terminal signal reach it).
///
/// Throws what mutex::acquire throws (invalid_path, closed...).
template <class Lead>
asio::awaitable<void> run_as_leader(client& c, std::string path, Lead lead, leader_selector_options opts)
{
    mutex_options mo;
    mo.data = opts.id;
    mo.policy = opts.policy;
    mo.safety_margin = opts.safety_margin;
    mo.local_handoff = false;
    mutex m(c, std::move(path), std::move(mo));
    auto ex = co_await asio::this_coro::executor;
    /// One round per term; each waits for the grant, then for the term's end.
    for (;;) {
        guard g = co_await m.acquire();
        auto [order, e, lost_ec] =
            co_await asio::experimental::make_parallel_group(asio::co_spawn(ex, lead(g), asio::deferred),
                                                             g.async_wait_lost(asio::deferred))
                .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
        (void)order;
        (void)lost_ec;
        const bool lost = g.lost();
        co_await g.async_release(asio::as_tuple(asio::use_awaitable));  ///< a failure is logged and counted
        auto cs = co_await asio::this_coro::cancellation_state;
        if (cs.cancelled() != asio::cancellation_type::none)
            throw boost::system::system_error(asio::error::operation_aborted);
        if (e && !lost)
            std::rethrow_exception(e);
        if (!opts.requeue)
            co_return;
    }
}

/// run_as_leader with the default options. An overload rather than a default argument: written
/// inside a co_await (`co_await run_as_leader(c, path, lead);`), g++ 12.2 destroyed a default
/// argument of this coroutine twice (GCC bug 100611, docs/building.md; found by the simulation,
/// tests/sim/test_sim_leaders.cpp); here the options are made in a plain function.
template <class Lead>
asio::awaitable<void> run_as_leader(client& c, std::string path, Lead lead)
{
    return run_as_leader(c, std::move(path), std::move(lead), leader_selector_options{});
}

}  // namespace zkcoro

#endif
