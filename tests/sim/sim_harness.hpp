// What the simulation's scenarios share (test_sim_protocol.cpp, test_sim_recipes.cpp): the seeds
// of a case, one seed's processes (a zkcoro::client each, so a session each, with their log lines
// kept as the trace), and the sweep over seeds with its totals line.
#ifndef ZKCORO_TESTS_SIM_SIM_HARNESS_HPP
#define ZKCORO_TESTS_SIM_SIM_HARNESS_HPP

#include "capi_sim.hpp"

#include <zkcoro/client.hpp>

#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace zksim {

// Seeds 1-20; 1-3 under the sanitizers, where a seed with faults costs about 20 times as much
// (the seeds are the same runs in both builds: the same digests). The sanitizer build runs them
// for memory errors on the paths the plain build's 20 seeds check for logic: with 5 seeds
// sim_protocol and sim_redis took 214 s of CPU of the sanitizer build's tests in a fresh root.
#ifdef ZKTEST_SANITIZED
constexpr std::uint64_t default_seeds = 3;
#else
constexpr std::uint64_t default_seeds = 20;
#endif

// The liveness bounds the checkers hold every acquisition to (test_sim_protocol.cpp), with the
// session timeout of sim_processes (T = 6 s) and the simulated network's trips (at most 0.4 ms
// one way: sim_latency's default).
//
// B: every acquisition ends (granted, timed out, cancelled or failed) by its deadline, or by the
// moment it was cancelled if that is earlier, plus B. The queue walk (src/zookeeper/lock_queue.cpp)
// waits for nothing past its deadline but requests: the wait for its turn and the wait for the
// connection have the deadline as a timer, a decision made past it gives up, and a give-up deletes
// the node in the background. Past the deadline there can be two requests in series: the one in
// flight at the deadline, and the listing that a reply in hand needs before the walk can judge (a
// create whose listing was lost, a predecessor found gone). A request ends with its reply (2
// trips), when the client learns that its connection broke (a trip after the break), or, issued
// while the client reconnects, at the reconnection (it is sent then) or at the expiry notice; the
// fault model (capi_sim.cpp, disconnect) draws the reconnection at most 1.5 T + 2 trips after the
// break and sends the notice a trip later. So a request takes at most 1.5 T + 5 trips, and
// B = 2 x (1.5 T + 5 trips) = 3 T + 10 trips, 18.004 s; 18.01 s here.
inline constexpr std::chrono::milliseconds liveness_bound{18'010};
// C: a cancelled acquisition ends within C of its cancellation. The client's requests and the
// walk's waits end at once on a cancellation; only the first round trip (the create and the
// listing sent together from the caller's call, zk_entry in src/zookeeper/backend.cpp) is waited
// for, so that the node it may have made is given up: one request, C = 1.5 T + 5 trips, 9.002 s;
// 9.01 s here.
inline constexpr std::chrono::milliseconds cancel_bound{9'010};
// W: with no fault for W, a free lock with waiters is granted within W. "No fault": every client
// connected (the server then holds no node of a session whose client is away); "free": no guard
// returned and not yet released. From then a waiter needs a few round trips (the reply it awaits,
// a listing, its predecessor's watch: about 10 trips, 4 ms), a lingering node (200 ms in the
// linger case) goes when someone queues behind it; W = 1 s.
inline constexpr std::chrono::milliseconds quiet_grant_bound{1'000};
// The semaphore's B and C (a fixed count; test_sim_recipes.cpp). acquire(n) is walks in series,
// each with the acquisition's deadline: the entry lock's, then one per lease, under the entry lock,
// whose release is awaited before the call returns. With R = 1.5 T + 5 trips (9.002 s: one
// request, as for B above), past the deadline: the walk under way ends within 2 R (B); a walk
// started past it makes its first round trip (the create and the listing, 1 R), and a listing when
// that listing's reply was lost (1 R); its waits and recoveries give up at once; at most n walks
// start past it (the n leases after the entry lock); the entry lock's release is a delete retried
// once connected again (2 R with one retry). B_S(n) = 2 R + n x 2 R + 2 R = (2n + 4) R: 54.012 s
// for one lease, 72.016 s for two; 0.01 s more here. Not counted: a lease lost past the deadline
// (taken again), a lock path to make again (a create per missing parent), a second retry of the
// release. C_S: a cancellation ends the walk under way within its first round trip (1 R, as C),
// and the entry lock's release follows (2 R): 3 R, 27.006 s; 27.01 s here.
constexpr std::chrono::milliseconds semaphore_liveness_bound(int n)
{
    return std::chrono::milliseconds{(2 * n + 4) * 9'002 + 10};
}
inline constexpr std::chrono::milliseconds semaphore_cancel_bound{3 * 9'002 + 10};
// The leader latch's wait (await_leadership with a timeout; test_sim_leaders.cpp) sends no
// request: it waits for the latch's state to change or for its deadline's timer, and a
// cancellation ends it at once (src/recipes/leader_latch.cpp, await_term). B_L = C_L = 0;
// 10 ms here (a margin, not a cost: nothing the wait does takes simulated time).
inline constexpr std::chrono::milliseconds latch_wait_bound{10};
// The leader selector (run_as_leader, no deadline), a terminal cancellation (a coroutine, it keeps
// co_spawn's default filter: a partial one is not taken, and the call goes on as if not asked;
// the || way cancels terminal): while it waits for its term it is
// the mutex acquisition's (C, one request); while it leads, the term is cancelled at once and the
// release follows, a delete retried once connected again (2 R); a cancellation that raced the
// grant reaches no term (it fired before the term began), which runs its course (at most 300 ms
// in test_sim_leaders.cpp) before that release. C_sel = 300 ms + 2 R = 18.304 s; 18.31 s here.
inline constexpr std::chrono::milliseconds selector_cancel_bound{300 + 2 * 9'002 + 6};
// The multi-lock of k members (test_sim_recipes.cpp), one deadline: its members are taken in
// order, each acquisition with the time left. Past the deadline, the member under way ends within
// B (2 R); each later member's acquisition starts with no time left, so makes its first round
// trip and the listing a lost reply needs (2 R, as for B_S); a failure gives back the members
// taken, in series, each a delete retried once connected again (2 R). At most k acquisitions and
// k - 1 releases: B_M(k) = (4k - 2) R, 90.02 s for 3 members. A cancellation ends the member under
// way within C (1 R), then the roll-back: C_M(k) = (2k - 1) R, 45.01 s for 3. Not counted: a
// member found lost once all are taken (the set is given back and taken again, as B_S leaves out
// a lease lost past the deadline).
constexpr std::chrono::milliseconds zk_multi_liveness_bound(int k)
{
    return std::chrono::milliseconds{(4 * k - 2) * 9'002 + 10};
}
constexpr std::chrono::milliseconds zk_multi_cancel_bound(int k)
{
    return std::chrono::milliseconds{(2 * k - 1) * 9'002 + 10};
}

// The seeds of a case: `defaults`, or FROM or FROM:COUNT from the environment variable `env`.
std::vector<std::uint64_t> seeds_of(const char* env, std::vector<std::uint64_t> defaults);
// 1..default_seeds.
std::vector<std::uint64_t> first_seeds();
// 1..plain, or 1..sanitized under the sanitizers (the costlier cases keep the test command's time).
std::vector<std::uint64_t> first_seeds(std::uint64_t plain, std::uint64_t sanitized);

// One seed's processes. The constructor starts a new world (sim_reset) with the faults given and
// makes `n` clients with a 6 s session timeout; connect() connects them.
class sim_processes {
public:
    sim_processes(std::uint64_t seed, int n, double disconnects_per_s = 0, double break_on_request = 0);
    sim_processes(const sim_processes&) = delete;
    ~sim_processes();

    // "" when every client connected within 30 s of simulated time, else why not.
    std::string connect();
    // Closes every client; runs until they are closed, the simulated handles gone and `also()`.
    bool close(const std::function<bool()>& also);
    // Simulated time since the start.
    std::chrono::nanoseconds elapsed() const { return sim_now() - t0_; }
    // Simulated time from the start to the last close() call: what a digest takes. (When the close
    // ends is not a seed's alone: the library's closer thread posts its completion.)
    std::chrono::nanoseconds close_began() const { return close_began_; }
    double now_s() const;
    // A line of the trace (with the simulated time); the last 60 are kept.
    void note(int process, const std::string& what);
    // The last lines of the trace, each on a line of its own, indented.
    std::string last_lines() const;

    boost::asio::io_context ioc;
    std::vector<std::unique_ptr<zkcoro::client>> clients;
    const std::uint64_t seed;

private:
    std::chrono::steady_clock::time_point t0_;
    std::chrono::nanoseconds close_began_{};
    std::deque<std::string> trace_;
    bool trace_all_ = false;
};

// The totals of a sweep: the counts each seed adds (by name, printed in order), the simulation's
// own counts, and a digest of every seed's end (same seeds, same digest).
struct sweep_totals {
    std::map<std::string, long> counts;
    std::map<std::string, double> maxima;  // the largest each seed reported, by name (printed after the counts)
    void most(const std::string& k, double v)
    {
        auto& m = maxima[k];
        m = std::max(m, v);
    }
    sim_counts faults;
    double simulated_s = 0;
    double wall_s = 0;
    int broke = 0;
    std::uint64_t seeds_run = 0;  // fewer than asked when ZKCORO_SIM_BUDGET ran out
    std::uint64_t digest = 1469598103934665603ULL;
    void mix(std::uint64_t v) { digest = (digest ^ v) * 1099511628211ULL; }
    long operator[](const std::string& k) const
    {
        auto it = counts.find(k);
        return it == counts.end() ? 0 : it->second;
    }
};

// Runs `one(seed, totals)` for each seed, one seed at a time (one core), each on a thread of its own (the library's per-thread
// state, the protected names' generator seeded from the simulation's getrandom, starts afresh:
// the seed alone decides the run). `one` returns what broke ("" when all held); the first 5
// broken seeds are shown with their replay (env=SEED). Adds the simulation's counts and the
// simulated time of each seed, and prints the totals: the counts (by name; one with a ':' in its
// name on a line of its own), the faults, the steps, the simulated and wall seconds and the steps
// a (wall) second.
// Soak mode: ZKCORO_SIM_BUDGET=S stops a sweep after S wall seconds (the seeds run are printed),
// ZKCORO_SIM_PROGRESS=S prints a progress line every S wall seconds (seeds, seeds a second, steps
// a second, the last seed, seeds broken).
// A negative control (`control`) expects its seeds to break: the first one's first line (what
// the checker reported) is printed instead, with no trace.
sweep_totals sweep(const char* name, const char* env, const std::vector<std::uint64_t>& seeds,
                   const std::function<std::string(std::uint64_t, sweep_totals&)>& one, bool control = false);

}  // namespace zksim

#endif
