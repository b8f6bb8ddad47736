// The checkers and the run's frame that the recipes' scenarios share (test_sim_recipes.cpp,
// test_sim_leaders.cpp): the holders' tally (at most N not told they lost it, tokens rising),
// the counts, a hold of a drawn length, the end of a run (no orphans while the sessions live,
// nothing left after they close), and what a seed adds to the sweep's totals.
#ifndef ZKCORO_TESTS_SIM_SIM_CHECKS_HPP
#define ZKCORO_TESTS_SIM_SIM_CHECKS_HPP

#include "sim_harness.hpp"

#include <zkcoro/zkcoro.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
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
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
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
    sum.mix(static_cast<std::uint64_t>(procs.elapsed().count()));
    sum.mix(static_cast<std::uint64_t>(zksim::sim_world().last_zxid()));
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
