// What every Redis case of sim_redis keeps of one seed's run (test_sim_redis.cpp and the fair
// lock's, the read-write lock's and the semaphore's files beside it): the clock from the run's
// start, the last lines of its trace (printed with a broken seed; every line as it comes with
// ZKCORO_SIM_TRACE=1), the acquisitions under way with their deadlines, and the two liveness
// checks asked after every step: every acquisition ends by its deadline + the case's R
// (check_late), and, where a case asks it, a free lock with acquisitions under way grants one
// within W (check_quiet).
#ifndef ZKCORO_TESTS_SIM_REDIS_RUN_LOG_HPP
#define ZKCORO_TESTS_SIM_REDIS_RUN_LOG_HPP

#include "capi_sim.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <map>
#include <string>
#include <string_view>

namespace zksim {

// The steps run so far (sim_stats), for a report.
inline long step_now() { return sim_stats().steps; }

struct redis_run_log {
    struct attempt {
        int process;
        std::int64_t began, deadline;  // ns since t0
    };
    std::map<int, attempt> pending;  // acquisitions under way, by a number of their own
    int next_attempt = 0;
    std::int64_t longest_past = 0;  // ns past a deadline, the longest
    std::string late;               // the first acquisition past its deadline + R
    int held = 0;                   // guards returned and not given back (lost ones too)
    std::int64_t free_since = -1;   // nothing held and acquisitions under way since (ns)
    std::string stalled;            // the first free lock not granted within W
    std::deque<std::string> trace;
    std::chrono::steady_clock::time_point t0;

    double now_s() const { return std::chrono::duration<double>(sim_now() - t0).count(); }
    std::int64_t now_ns() const { return (sim_now() - t0).count(); }
    void note(int p, const std::string& what)
    {
        static const bool all = std::getenv("ZKCORO_SIM_TRACE") != nullptr;
        auto line = fmt::format("{:10.6f} p{} {}", now_s(), p, what);
        if (all)
            fmt::print("{}\n", line);
        trace.push_back(std::move(line));
        if (trace.size() > 60)
            trace.pop_front();
    }
    std::string last_lines() const
    {
        std::string s;
        for (auto& l : trace)
            s += "\n    " + l;
        return s;
    }
    // The first of `pending` still under way past its deadline + `bound` (named `name` in the
    // report; `what`: "an acquisition", "a multi-lock").
    void check_late(std::string_view what, std::string_view name, std::chrono::milliseconds bound)
    {
        if (!late.empty())
            return;
        for (auto& [id, a] : pending)
            if (now_ns() > a.deadline + std::chrono::nanoseconds(bound).count()) {
                late = fmt::format("{} of p{} begun at {:.6f} s still under way at {:.6f} s, past its deadline "
                                   "{:.6f} s + {} ({} ms), at step {}",
                                   what, a.process, static_cast<double>(a.began) / 1e9, now_s(),
                                   static_cast<double>(a.deadline) / 1e9, name, bound.count(), sim_stats().steps);
                return;
            }
    }
    // W: nothing held (`held`) while acquisitions are under way (`pending`) for longer than `w`
    // breaks the seed (the report says what was free: `what`).
    void check_quiet(std::string_view what, std::chrono::milliseconds w)
    {
        if (held > 0 || pending.empty())
            free_since = -1;
        else if (free_since < 0)
            free_since = now_ns();
        else if (now_ns() - free_since > std::chrono::nanoseconds(w).count() && stalled.empty())
            stalled = fmt::format("{} with {} acquisitions under way from {:.6f} s to {:.6f} s, nobody granted "
                                  "(W {} ms) at step {}",
                                  what, pending.size(), static_cast<double>(free_since) / 1e9, now_s(), w.count(),
                                  sim_stats().steps);
    }
};

}  // namespace zksim

#endif
