// What the simulation's scenarios share (sim_harness.hpp).
#include "sim_harness.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace zksim {

using namespace std::chrono_literals;

std::vector<std::uint64_t> seeds_of(const char* env, std::vector<std::uint64_t> defaults)
{
    const char* s = std::getenv(env);
    if (!s)
        return defaults;
    const auto from = std::strtoull(s, nullptr, 10);
    const char* colon = std::strchr(s, ':');
    const auto count = colon ? std::strtoull(colon + 1, nullptr, 10) : 1;
    std::vector<std::uint64_t> seeds;
    for (auto seed = from; seed < from + count; ++seed)
        seeds.push_back(seed);
    return seeds;
}

std::vector<std::uint64_t> first_seeds()
{
    std::vector<std::uint64_t> seeds;
    for (std::uint64_t seed = 1; seed <= default_seeds; ++seed)
        seeds.push_back(seed);
    return seeds;
}

std::vector<std::uint64_t> first_seeds(std::uint64_t plain, std::uint64_t sanitized)
{
#ifdef ZKTEST_SANITIZED
    const auto n = sanitized;
    (void)plain;
#else
    const auto n = plain;
    (void)sanitized;
#endif
    std::vector<std::uint64_t> seeds;
    for (std::uint64_t seed = 1; seed <= n; ++seed)
        seeds.push_back(seed);
    return seeds;
}

sim_processes::sim_processes(std::uint64_t s, int n, double disconnects_per_s, double break_on_request) : seed(s)
{
    sim_reset(seed);
    sim_faults(disconnects_per_s, break_on_request);
    t0_ = sim_now();
    // The trace: each client's log lines (debug level) with the simulated time, the last ones
    // printed with a broken seed (ZKCORO_SIM_TRACE=1: all of them, as they come).
    trace_all_ = std::getenv("ZKCORO_SIM_TRACE") != nullptr;
    zkcoro::client_config cfg;
    cfg.connect_string = "127.0.0.1:2181";
    cfg.session_timeout = 6s;
    cfg.log_threshold = zkcoro::log_level::debug;
    for (int p = 0; p < n; ++p) {
        cfg.log = [this, p](zkcoro::log_level l, std::string_view m) {
            note(p, fmt::format("{}: {}", zkcoro::to_string(l), m));
        };
        clients.push_back(std::make_unique<zkcoro::client>(ioc.get_executor(), cfg));
    }
}

sim_processes::~sim_processes()
{
    clients.clear();
}

std::string sim_processes::connect()
{
    int connected = 0;
    std::string errors;
    for (auto& c : clients)
        c->async_connect([&](zkcoro::error_code ec) {
            if (ec)
                errors += " connect: " + ec.message() + ";";
            ++connected;
        });
    if (!run_until(ioc, [&] { return connected == static_cast<int>(clients.size()); }, 30s))
        return fmt::format("seed {}: not all clients connected within 30 s of simulated time", seed);
    return errors;
}

bool sim_processes::close(const std::function<bool()>& also)
{
    std::size_t closed = 0;
    close_began_ = elapsed();
    for (auto& c : clients)
        c->async_close([&](zkcoro::error_code) { ++closed; });
    // Once the simulation has closed every handle, the completions still missing come from the
    // library's closer thread.
    return run_until(
        ioc, [&] { return closed == clients.size() && sim_handles() == 0 && also(); }, 60s,
        [&] { return sim_handles() == 0 && closed < clients.size(); });
}

double sim_processes::now_s() const
{
    return std::chrono::duration<double>(sim_now() - t0_).count();
}

void sim_processes::note(int process, const std::string& what)
{
    auto line = fmt::format("{:10.6f} p{} {}", now_s(), process, what);
    if (trace_all_)
        fmt::print("{}\n", line);
    trace_.push_back(std::move(line));
    if (trace_.size() > 60)
        trace_.pop_front();
}

std::string sim_processes::last_lines() const
{
    std::string last;
    for (auto& l : trace_)
        last += "\n    " + l;
    return last;
}

sweep_totals sweep(const char* name, const char* env, const std::vector<std::uint64_t>& seeds,
                   const std::function<std::string(std::uint64_t, sweep_totals&)>& one, bool control)
{
    sweep_totals sum;
    using wall = std::chrono::system_clock;  // wall time: steady_clock is the simulated one
    const auto w0 = wall::now();
    const char* budget_env = std::getenv("ZKCORO_SIM_BUDGET");
    const double budget_s = budget_env ? std::strtod(budget_env, nullptr) : 0;
    const char* progress_env = std::getenv("ZKCORO_SIM_PROGRESS");
    const double progress_s = progress_env ? std::strtod(progress_env, nullptr) : 0;
    auto since = [&](wall::time_point t) { return std::chrono::duration<double>(wall::now() - t).count(); };
    double next_progress = progress_s;
    for (auto seed : seeds) {
        if (budget_s > 0 && since(w0) >= budget_s)
            break;
        std::string why;
        std::thread t([&] { why = one(seed, sum); });
        t.join();
        ++sum.seeds_run;
        const auto f = sim_stats();
        sum.faults.disconnects += f.disconnects;
        sum.faults.expiries += f.expiries;
        sum.faults.applied_unanswered += f.applied_unanswered;
        sum.faults.not_applied += f.not_applied;
        sum.faults.lies += f.lies;
        sum.faults.steps += f.steps;
        sum.simulated_s += static_cast<double>(sim_now().time_since_epoch().count() - sim_epoch_ns) / 1e9;
        if (!why.empty()) {
            if (++sum.broke == 1 && control)
                fmt::print("{}: caught: {} (replay: {}={})\n", name, why.substr(0, why.find('\n')), env, seed);
            else if (sum.broke <= 5 && !control)
                MESSAGE(why << " (replay: " << std::string(env) << "=" << seed << ")");
            else if (!control)  // a soak's later ones: the seed and the first line
                fmt::print("{}: broke: {} (replay: {}={})\n", name, why.substr(0, why.find('\n')), env, seed);
        }
        if (progress_s > 0 && since(w0) >= next_progress) {
            next_progress += progress_s;
            const double s = since(w0);
            fmt::print("{}: progress: {} seeds in {:.0f} s (last {}), {:.2f} seeds/s, {:.0f} steps/s, {} broke\n", name,
                       sum.seeds_run, s, seed, static_cast<double>(sum.seeds_run) / s,
                       static_cast<double>(sum.faults.steps) / s, sum.broke);
            std::fflush(stdout);
        }
    }
    sum.wall_s = since(w0);
    std::string counts, lines;
    for (auto& [what, n] : sum.counts)
        if (what.find(':') == std::string::npos)
            counts += fmt::format("{} {}, ", n, what);
        else
            lines += fmt::format("  {}: {}\n", what, n);
    for (auto& [what, v] : sum.maxima)
        counts += fmt::format("{} {:.3f}, ", what, v);
    if (!counts.empty())
        counts.replace(counts.size() - 2, 2, "; ");
    const auto last = sum.seeds_run > 0 ? seeds[sum.seeds_run - 1] : seeds.front();
    fmt::print("{}: seeds {}..{}{}: {}{} connections broken, {} sessions expired, {} requests applied unanswered, {} "
               "not applied{}; {} steps, {:.1f} s simulated, {:.2f} s wall, {:.0f} steps/s, {:.2f} seeds/s; {} seeds "
               "broke, digest {:016x}\n{}",
               name, seeds.front(), last,
               sum.seeds_run < seeds.size() ? fmt::format(" ({} of {}: the budget ran out)", sum.seeds_run, seeds.size())
                                            : std::string(),
               counts, sum.faults.disconnects, sum.faults.expiries, sum.faults.applied_unanswered, sum.faults.not_applied,
               sum.faults.lies ? fmt::format(", {} lies told", sum.faults.lies) : std::string(), sum.faults.steps,
               sum.simulated_s, sum.wall_s, sum.wall_s > 0 ? static_cast<double>(sum.faults.steps) / sum.wall_s : 0.0,
               sum.wall_s > 0 ? static_cast<double>(sum.seeds_run) / sum.wall_s : 0.0, sum.broke, sum.digest, lines);
    std::fflush(stdout);
    return sum;
}

}  // namespace zksim
