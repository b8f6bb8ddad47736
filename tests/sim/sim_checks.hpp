// The checkers and the run's frame that the recipes' scenarios share (test_sim_recipes.cpp,
// test_sim_leaders.cpp): the holders' tally (at most N not told they lost it, tokens rising),
// the counts, a hold of a drawn length, the cancellation cases' drawn cancellations, the end of a
// run (no orphans while the sessions live, nothing left after they close), and what a seed adds
// to the sweep's totals.
#ifndef ZKCORO_TESTS_SIM_SIM_CHECKS_HPP
#define ZKCORO_TESTS_SIM_SIM_CHECKS_HPP

#include "sim_harness.hpp"

#include <zkcoro/zkcoro.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace zksim {

inline constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// What a case is run with: the faults (as the mutex's cases: 0.5 disconnects a second per
// session, 1 request in 50 meets a broken connection), the lies of a negative control, and the
// acquisitions' deadline (0: the case's own).
struct faults {
    double disconnects_per_s = 0.5;
    double break_on_request = 0.02;
    unsigned lies = 0;
    std::chrono::milliseconds deadline{0};
};

// The holders of one lock, or of one election, that have not been told they lost it: at most
// `limit` at any grant; their fencing tokens rise (when `tokens`).
struct tally {
    int limit = 1;
    bool tokens = true;
    int inside = 0;
    int overlaps = 0;
    int token_drops = 0;
    int losses = 0;
    int granted_lost = 0;
    // All or nothing (a semaphore's n leases): a lease already lost when the acquisition returns
    // (lost while the later ones were awaited) breaks it.
    bool all_or_nothing = false;
    std::int64_t last_token = 0;
    std::string first;  // the first violation, with its time

    // A grant of `g` (a guard or a leadership): checked and counted; the flag returned stays set
    // until leave() or the lost signal.
    template <class Lease>
    std::shared_ptr<bool> enter(Lease& g, double now)
    {
        // Already told (a semaphore's first lease, lost while the second was awaited): not a holder.
        if (g.lost()) {
            if (++granted_lost == 1 && all_or_nothing && first.empty())
                first = fmt::format("{} already lost when its acquisition returned at {:.6f} s", g.node_path(), now);
            return std::make_shared<bool>(false);
        }
        if (inside >= limit && ++overlaps == 1)
            first = fmt::format("{} granted at {:.6f} s with {} holders not told they lost it", g.node_path(), now, inside);
        ++inside;
        if (tokens) {
            if (g.fencing_token() <= last_token && ++token_drops == 1 && first.empty())
                first = fmt::format("{}'s token {} not above {} at {:.6f} s", g.node_path(), g.fencing_token(), last_token, now);
            last_token = g.fencing_token();
        }
        auto in = std::make_shared<bool>(true);
        g.async_wait_lost([this, in](zkcoro::error_code ec) {
            if (ec == zkcoro::client_errc::lock_lost && *in) {
                *in = false;
                --inside;
                ++losses;
            }
        });
        return in;
    }
    void leave(const std::shared_ptr<bool>& in)
    {
        if (*in) {
            *in = false;
            --inside;
        }
    }
    std::string report(const std::string& what) const
    {
        const int partial = all_or_nothing ? granted_lost : 0;
        if (overlaps == 0 && token_drops == 0 && partial == 0)
            return {};
        return fmt::format(" {}: {} overlaps, {} tokens not above the last, {} already lost when granted (first: {});",
                           what, overlaps, token_drops, partial, first);
    }
};

// What every case counts.
struct counts {
    int granted = 0;
    int timeouts = 0;
    int failed = 0;
    int done = 0;                          // tasks ended
    std::map<std::string, int> failures;  // by the error's message
    void fail(const boost::system::system_error& e)
    {
        ++failed;
        ++failures[e.code().message()];
    }
};

inline asio::awaitable<void> hold_for(std::mt19937_64& rng, int max_us)
{
    asio::steady_timer t(co_await asio::this_coro::executor,
                         std::chrono::microseconds(std::uniform_int_distribution<int>(0, max_us)(rng)));
    co_await t.async_wait(use_tuple);
}

// After the tasks: the faults stop, the clients get 30 s (simulated) for their background clean-up
// (an abandoned acquisition's node, a lost release's), then nothing of ours may be left under
// `paths` while the sessions live; then the clients close, and nothing may be left at all.
inline std::string end_of_run(zksim::sim_processes& procs, const std::vector<std::string>& paths, const std::function<bool()>& done)
{
    auto left = [&] {
        std::string l;
        for (auto& p : paths)
            for (auto& n : zksim::sim_world().children_of(p))
                l += " " + p + "/" + n;
        return l;
    };
    zksim::sim_faults(0);
    zksim::run_until(procs.ioc, [&] { return left().empty(); }, 30s);
    std::string why;
    if (auto l = left(); !l.empty())
        why += " nodes left with every task done and the sessions alive:" + l + ";";
    if (!procs.close(done))
        why += " the clients did not close, or their tasks did not end, within 60 s;";
    if (auto l = left(); !l.empty())
        why += " nodes left after the clients closed:" + l + ";";
    return why;
}

// ZKCORO_SIM_STRICT=1 (looking for a seed): an acquisition that failed breaks the seed too.
inline std::string strict(const counts& c)
{
    std::string why;
    if (std::getenv("ZKCORO_SIM_STRICT"))
        for (auto& [what, n] : c.failures)
            why += fmt::format(" {} acquisitions failed: {};", n, what);
    return why;
}

inline std::string verdict(zksim::sim_processes& procs, const std::string& why)
{
    if (why.empty())
        return {};
    return fmt::format("seed {}:{}\n  the clients' last log lines:{}", procs.seed, why, procs.last_lines());
}

inline void add(zksim::sweep_totals& sum, const counts& c, const tally& t, zksim::sim_processes& procs)
{
    sum.counts["granted"] += c.granted;
    sum.counts["timed out"] += c.timeouts;
    sum.counts["failed"] += c.failed;
    for (auto& [what, n] : c.failures)
        sum.counts["failed: " + what] += n;
    sum.counts["lost"] += t.losses;
    sum.counts["granted already lost"] += t.granted_lost;
    sum.mix(static_cast<std::uint64_t>(procs.close_began().count()));
    sum.mix(static_cast<std::uint64_t>(zksim::sim_world().last_zxid()));
}


// The quiet-grant bound W (sim_harness.hpp, quiet_grant_bound) for a recipe, asked after every
// step: with every client connected (the server then holds no node of a session whose client is
// away), nothing held (no grant returned and not yet given back, lost ones too) and acquisitions
// under way, one of them must be granted within W. A seed that breaks it reports the step.
struct quiet_grant_check {
    int held = 0;     // grants returned and not yet given back
    int waiting = 0;  // acquisitions under way
    std::int64_t free_since = -1;  // ns since the start
    std::string stalled;           // the first time it broke
    void check(const zksim::sim_processes& procs)
    {
        bool quiet = true;
        for (auto& c : procs.clients)
            quiet = quiet && c->state() == zkcoro::session_state::connected;
        const auto now = procs.elapsed().count();
        if (!quiet || held > 0 || waiting == 0) {
            free_since = -1;
            return;
        }
        if (free_since < 0)
            free_since = now;
        else if (now - free_since > std::chrono::nanoseconds(zksim::quiet_grant_bound).count() && stalled.empty())
            stalled = fmt::format("nothing held with {} acquisitions under way and every client connected from {:.6f} s to "
                                  "{:.6f} s, nobody granted (bound W {} ms) at step {}",
                                  waiting, static_cast<double>(free_since) / 1e9, static_cast<double>(now) / 1e9,
                                  zksim::quiet_grant_bound.count(), zksim::sim_stats().steps);
    }
};

// A stated bound on how long a wait may outlast its deadline (B) or its cancellation (C), asked
// after every step: each wait is registered when it starts, with its deadline and bounds and,
// when it has a drawn cancellation, the cancellation's bound_cancel (fired_ns is read as it
// fires); a wait still under way past min(deadline + B, cancellation + C) breaks the seed, which
// reports the wait, the step and the bound. `worst_*` keep the longest seen past each moment.
struct bound_cancel;
struct due_check {
    struct wait {
        std::string what;
        std::int64_t deadline_ns;  // sim_now's ns; max() when the wait has none
        std::int64_t b_ns, c_ns;
        std::shared_ptr<const bound_cancel> cancel;
        bool terminal_only;  // C holds for terminal cancellations only (the op may ignore a partial one)
    };
    std::map<int, wait> pending;
    int next = 0;
    std::string late;             // the first wait past its bound
    std::int64_t worst_past_deadline_ns = 0, worst_past_cancel_ns = 0;
    int begin(std::string what, std::chrono::steady_clock::time_point deadline, std::chrono::milliseconds b,
              std::chrono::milliseconds c, bool terminal_only = false)
    {
        pending[next] = {std::move(what), deadline == std::chrono::steady_clock::time_point::max()
                                              ? std::numeric_limits<std::int64_t>::max()
                                              : deadline.time_since_epoch().count(),
                         std::chrono::nanoseconds(b).count(), std::chrono::nanoseconds(c).count(), nullptr,
                         terminal_only};
        return next++;
    }
    // The wait's drawn cancellation, once armed (cancelled_op's `due`).
    void armed(int id, std::shared_ptr<const bound_cancel> bc)
    {
        if (auto it = pending.find(id); it != pending.end())
            it->second.cancel = std::move(bc);
    }
    inline void end(int id);
    inline void check(const zksim::sim_processes& procs);

private:
    // Whether `w`'s cancellation has fired and C holds for it.
    static inline bool cancel_holds(const wait& w);
};

// A recipe's cancellation case (test_sim_recipes.cpp): 2 of 3 acquisitions get a signal bound to
// the co_await of their async_acquire, emitted (terminal or partial, drawn) within 1.5 ms (the
// first round trips in flight) or within 800 ms (queued), unless the acquisition ended first.
struct bound_cancel {
    asio::cancellation_signal sig;
    bool fired = false;
    std::int64_t fired_ns = -1;  // when it fired (sim_now, ns since its epoch)
    bool terminal = false;       // the signal's type (the || way cancels terminal)
    bool ended = false;
    // The || way (cancelled_op with cancel_counts::use_or): the timer on the other side of the
    // ||; firing cancels it, so that the || cancels the acquisition.
    asio::steady_timer* race = nullptr;
};

inline bool due_check::cancel_holds(const wait& w)
{
    return w.cancel && w.cancel->fired && (w.cancel->terminal || !w.terminal_only);
}

inline void due_check::end(int id)
{
    auto it = pending.find(id);
    if (it == pending.end())
        return;
    const auto now = zksim::sim_now().time_since_epoch().count();
    const auto& w = it->second;
    if (w.deadline_ns != std::numeric_limits<std::int64_t>::max())
        worst_past_deadline_ns = std::max(worst_past_deadline_ns, now - w.deadline_ns);
    if (cancel_holds(w))
        worst_past_cancel_ns = std::max(worst_past_cancel_ns, now - w.cancel->fired_ns);
    pending.erase(it);
}

inline void due_check::check(const zksim::sim_processes& procs)
{
    if (!late.empty())
        return;
    const auto now = zksim::sim_now().time_since_epoch().count();
    for (auto& [id, w] : pending) {
        const auto by_deadline = w.deadline_ns == std::numeric_limits<std::int64_t>::max() ? w.deadline_ns
                                                                                          : w.deadline_ns + w.b_ns;
        const bool by_cancel = cancel_holds(w) && w.cancel->fired_ns + w.c_ns < by_deadline;
        if (now <= (by_cancel ? w.cancel->fired_ns + w.c_ns : by_deadline))
            continue;
        late = fmt::format("{} still under way at {:.6f} s, past {} + {} ms (step {})", w.what, procs.now_s(),
                           by_cancel ? "its cancellation" : "its deadline", (by_cancel ? w.c_ns : w.b_ns) / 1'000'000,
                           zksim::sim_stats().steps);
        return;
    }
}

// The longest a seed's waits outlasted their deadlines and their cancellations, for the totals.
inline void add_due(zksim::sweep_totals& sum, const due_check& d, const std::string& what)
{
    if (d.worst_past_deadline_ns > 0)
        sum.most(what + ": longest past a deadline (s)", static_cast<double>(d.worst_past_deadline_ns) / 1e9);
    if (d.worst_past_cancel_ns > 0)
        sum.most(what + ": longest from a cancellation to the end (s)", static_cast<double>(d.worst_past_cancel_ns) / 1e9);
}

struct cancel_counts {
    int cancelled = 0;    // ended with operation_aborted after a cancellation
    int raced = 0;        // granted although cancelled (the grant came first)
    int misreported = 0;  // cancelled, reported as a time-out or another error
    std::string wrong;    // the first acquisition that broke a promise of cancellation
    // Half the drawn cancellations by `acquire || timer.async_wait` instead of a bound signal (a
    // coin drawn for each; the cases without it draw nothing more: their runs are as they were).
    bool use_or = false;
    int by_or = 0;  // cancellations armed the || way
};

// 0: no cancellation for this acquisition; 1: an early one; 2: a late one.
inline int draw_cancel(std::mt19937_64& rng)
{
    return std::uniform_int_distribution<int>(0, 2)(rng);
}

// Arms `trigger` for a drawn cancellation of kind `pick` (1 or 2) of the acquisition bound to
// the returned signal; the caller sets `ended` and cancels `trigger` once the acquisition ends.
inline std::shared_ptr<bound_cancel> arm_cancel(std::mt19937_64& rng, int pick, asio::steady_timer& trigger)
{
    auto bc = std::make_shared<bound_cancel>();
    const auto type = std::uniform_int_distribution<int>(0, 1)(rng) == 0 ? asio::cancellation_type::terminal
                                                                        : asio::cancellation_type::partial;
    trigger.expires_after(std::chrono::microseconds(std::uniform_int_distribution<int>(1, pick == 1 ? 1500 : 800'000)(rng)));
    trigger.async_wait([bc, type](zkcoro::error_code e) {
        if (e || bc->ended)
            return;
        bc->fired = true;
        bc->fired_ns = zksim::sim_now().time_since_epoch().count();
        bc->terminal = bc->race || type == asio::cancellation_type::terminal;
        if (bc->race)
            bc->race->cancel();
        else
            bc->sig.emit(type);
    });
    return bc;
}

// Judges an acquisition that may have been cancelled (`ec`, and whether it `granted`): counts
// it in `cc` and notes the first broken promise (operation_aborted without a cancellation, or
// with a grant). Returns true when it ended as cancelled (nothing granted, nothing to count).
inline bool judge_cancel(cancel_counts& cc, const bound_cancel& bc, zkcoro::error_code ec, bool granted, double now_s)
{
    if (ec && granted && cc.wrong.empty())
        cc.wrong = fmt::format("an acquisition returned both {} and a grant at {:.6f} s", ec.message(), now_s);
    if (ec == asio::error::operation_aborted) {
        if (!bc.fired && cc.wrong.empty())
            cc.wrong = fmt::format("an acquisition ended with operation_aborted at {:.6f} s, never cancelled", now_s);
        ++cc.cancelled;
        return true;
    }
    if (bc.fired && !granted)
        ++cc.misreported;
    else if (bc.fired)
        ++cc.raced;
    return false;
}

// Runs `op(token)` (an async_acquire given its completion token) with a drawn cancellation of kind
// `pick` bound to it, and judges the outcome (judge_cancel). Returns whether it ended as cancelled,
// its error and its result. With cc.use_or, a coin decides for each: the signal bound to the
// co_await, or `op(use_tuple) || race.async_wait(use_tuple)`, cancelled by cancelling the timer
// (the || then cancels the acquisition, terminal, and waits for it; a grant that raced the timer
// is dropped with the || 's losing side: its guards are destroyed, which gives them back).
// `fired_ns`, when given, gets the moment the cancellation fired (sim_now's ns), or -1;
// `due`, when given, bounds the wait `due_id` by the cancellation as well once it is armed.
// (Pointers, not a std::function: g++ 12.2 may destroy a coroutine's default argument twice.)
template <class R, class Op>
asio::awaitable<std::tuple<bool, zkcoro::error_code, R>> cancelled_op(std::mt19937_64& rng, int pick, cancel_counts& cc,
                                                                      zksim::sim_processes& procs, Op op,
                                                                      std::int64_t* fired_ns = nullptr, due_check* due = nullptr,
                                                                      int due_id = -1)
{
    auto ex = co_await asio::this_coro::executor;
    bool by_or = false;
    if (cc.use_or)
        by_or = std::uniform_int_distribution<int>(0, 1)(rng) == 0;
    asio::steady_timer trigger(ex);
    asio::steady_timer race(ex, std::chrono::steady_clock::time_point::max());
    auto bc = arm_cancel(rng, pick, trigger);
    if (due)
        due->armed(due_id, bc);
    zkcoro::error_code ec;
    R r{};
    if (by_or) {
        using namespace asio::experimental::awaitable_operators;
        bc->race = &race;
        ++cc.by_or;
        auto v = co_await (op(use_tuple) || race.async_wait(use_tuple));
        if (v.index() == 0)
            std::tie(ec, r) = std::move(std::get<0>(v));
        else
            ec = asio::error::operation_aborted;  // the timer won: the || cancelled the acquisition
    } else {
        auto [e, x] = co_await op(asio::bind_cancellation_slot(bc->sig.slot(), use_tuple));
        ec = e;
        r = std::move(x);
    }
    bc->ended = true;
    trigger.cancel();
    if (fired_ns)
        *fired_ns = bc->fired ? bc->fired_ns : -1;
    const bool cancelled = judge_cancel(cc, *bc, ec, r.has_value(), procs.now_s());
    co_return std::tuple<bool, zkcoro::error_code, R>(cancelled, ec, std::move(r));
}

// What a cancellation case adds to the totals; under ZKCORO_SIM_STRICT a misreported
// cancellation breaks the seed.
inline std::string cancel_verdict(const cancel_counts& cc, zksim::sweep_totals& sum)
{
    sum.counts["cancelled"] += cc.cancelled;
    sum.counts["granted although cancelled"] += cc.raced;
    sum.counts["cancellations reported as timed out or failed"] += cc.misreported;
    if (cc.use_or)
        sum.counts["cancellations armed by ||"] += cc.by_or;
    std::string why;
    if (!cc.wrong.empty())
        why += " " + cc.wrong + ";";
    if (cc.misreported > 0 && std::getenv("ZKCORO_SIM_STRICT"))
        why += fmt::format(" {} cancellations reported as timed out or failed;", cc.misreported);
    return why;
}

// A negative control: `run(seed, f, totals)` with `f`'s lies, on the default seeds (or env's);
// a seed counts as caught (broke) when what it reports contains `caught`, the checker's words.
template <class Run>
sweep_totals control(const char* name, const char* env, Run run, const faults& f, const std::string& caught)
{
    return sweep(name, env, seeds_of(env, first_seeds()), [&](std::uint64_t seed, sweep_totals& s) {
        auto why = run(seed, f, s);
        return why.find(caught) != std::string::npos ? why : std::string();
    }, true);
}

}  // namespace zksim

#endif
