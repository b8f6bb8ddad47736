// What the simulation's scenarios share (test_sim_protocol.cpp, test_sim_recipes.cpp): the seeds
// of a case, one seed's processes (a zkcoro::client each, so a session each, with their log lines
// kept as the trace), and the sweep over seeds with its totals line.
#ifndef ZKCORO_TESTS_SIM_SIM_HARNESS_HPP
#define ZKCORO_TESTS_SIM_SIM_HARNESS_HPP

#include "capi_sim.hpp"

#include <zkcoro/client.hpp>

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace zksim {

// Seeds 1-20; 1-5 under the sanitizers, where a seed with faults costs about 20 times as much
// (the seeds are the same runs in both builds: the same digests).
#ifdef ZKTEST_SANITIZED
constexpr std::uint64_t default_seeds = 5;
#else
constexpr std::uint64_t default_seeds = 20;
#endif

// The seeds of a case: `defaults`, or FROM or FROM:COUNT from the environment variable `env`.
std::vector<std::uint64_t> seeds_of(const char* env, std::vector<std::uint64_t> defaults);
// 1..default_seeds.
std::vector<std::uint64_t> first_seeds();

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
    std::deque<std::string> trace_;
    bool trace_all_ = false;
};

// The totals of a sweep: the counts each seed adds (by name, printed in order), the simulation's
// own counts, and a digest of every seed's end (same seeds, same digest).
struct sweep_totals {
    std::map<std::string, long> counts;
    sim_counts faults;
    double simulated_s = 0;
    double wall_s = 0;
    int broke = 0;
    std::uint64_t digest = 1469598103934665603ULL;
    void mix(std::uint64_t v) { digest = (digest ^ v) * 1099511628211ULL; }
    long operator[](const std::string& k) const
    {
        auto it = counts.find(k);
        return it == counts.end() ? 0 : it->second;
    }
};

// Runs `one(seed, totals)` for each seed, each on a thread of its own (the library's per-thread
// state, the protected names' generator seeded from the simulation's getrandom, starts afresh:
// the seed alone decides the run). `one` returns what broke ("" when all held); the first 5
// broken seeds are shown with their replay (env=SEED). Adds the simulation's counts and the
// simulated time of each seed, and prints the totals: the counts (by name; one with a ':' in its
// name on a line of its own), the faults, the steps, the simulated and wall seconds and the steps
// a (wall) second.
// A negative control (`control`) expects its seeds to break: the first one's first line (what
// the checker reported) is printed instead, with no trace.
sweep_totals sweep(const char* name, const char* env, const std::vector<std::uint64_t>& seeds,
                   const std::function<std::string(std::uint64_t, sweep_totals&)>& one, bool control = false);

}  // namespace zksim

#endif
