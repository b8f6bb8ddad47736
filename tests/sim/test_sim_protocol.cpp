// The real protocol code on the simulated ZooKeeper (issue 34, item 3): zkcoro::client,
// zkcoro::mutex and everything under them, unchanged, against zk_world through the simulated C
// client (capi_sim.hpp), on a seeded network and a simulated clock. First scenario: processes
// (each a client, so a session) with tasks contending for one mutex; checked after every step:
// at most one holder, fencing tokens that only rise; at the end every acquisition done and no
// node of ours left but the lock's container parent.
#include "capi_sim.hpp"

#include <zkcoro/zkcoro.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <boost/system/system_error.hpp>

#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

struct scenario {
    int processes = 3;
    int tasks = 2;   // per process
    int rounds = 4;  // acquisitions per task
    // The checker's own control: each process locks a path of its own, so holders overlap.
    bool path_per_process = false;
    // A read-write lock (zkcoro::shared_mutex) instead of a mutex: each process's first task
    // writes, the others read.
    bool read_write = false;
    double disconnects_per_s = 0;  // faults (zksim::sim_faults)
    double break_on_request = 0;
    int max_hold_us = 3000;
    std::chrono::milliseconds acquire_timeout{60'000};
};

struct totals {
    long acquired = 0;
    long failed = 0;
    std::map<std::string, long> failures;
    long timeouts = 0;
    long losses = 0;
    zksim::sim_counts faults;
    double simulated_s = 0;
    std::uint64_t digest = 1469598103934665603ULL;  // of every seed's end: same seeds, same digest
    void mix(std::uint64_t v) { digest = (digest ^ v) * 1099511628211ULL; }
};

struct observed {
    int inside = 0;   // holders of the mutex, or writers
    int readers = 0;  // readers of the read-write lock
    int overlaps = 0;
    int acquired = 0;
    int failed = 0;
    int timeouts = 0;
    int losses = 0;
    int tasks_done = 0;
    std::int64_t last_token = 0;
    int token_drops = 0;
    std::string duplicate;  // two nodes of one acquisition
    std::map<std::string, int> failures;  // by the error's message
    std::vector<std::string> errors;
};

// `shared`: a reader of a read-write lock (readers share; a writer or a mutex's holder excludes
// everyone).
asio::awaitable<void> task(zkcoro::mutex& m, observed& o, std::uint64_t seed, int rounds, int max_hold_us, bool shared,
                           std::chrono::milliseconds timeout)
{
    auto ex = co_await asio::this_coro::executor;
    std::mt19937_64 rng(seed);
    for (int i = 0; i < rounds; ++i) {
        std::optional<zkcoro::guard> g;
        try {
            g = co_await m.acquire(timeout);
        } catch (const boost::system::system_error& e) {
            ++o.failed;  // a connection lost, a session expired: the next round tries again
            o.failures[e.code().message()]++;
            continue;
        }
        if (!g) {
            ++o.timeouts;
            continue;
        }
        ++o.acquired;
        // A holder that has not been told it lost the lock still counts.
        o.overlaps += o.inside > 0 || (!shared && o.readers > 0);
        int& count = shared ? o.readers : o.inside;
        ++count;
        if (!shared) {
            if (g->fencing_token() <= o.last_token)
                ++o.token_drops;
            o.last_token = g->fencing_token();
        }
        auto counted = std::make_shared<bool>(true);
        g->async_wait_lost([&o, &count, counted](zkcoro::error_code ec) {
            if (ec == zkcoro::client_errc::lock_lost && *counted) {
                *counted = false;
                --count;
                ++o.losses;
            }
        });
        asio::steady_timer hold(ex, std::chrono::microseconds(std::uniform_int_distribution<int>(0, max_hold_us)(rng)));
        co_await hold.async_wait(asio::use_awaitable);
        if (*counted) {
            *counted = false;
            --count;
        }
        try {
            co_await g->release();
        } catch (const boost::system::system_error&) {
            // a lost lock's release: nothing to give back
        }
    }
    ++o.tasks_done;
}

std::string run_seed_here(std::uint64_t seed, const scenario& sc, totals& sum);

// Runs one seed on a thread of its own, so that the library's per-thread state (the protected
// names' generator, seeded at its first use from getrandom, which the simulation answers from
// the seed; the recycled blocks) starts afresh: the seed alone decides the run, whatever ran
// before it. Returns the description of what broke, empty when all held.
std::string run_seed(std::uint64_t seed, const scenario& sc, totals& sum)
{
    std::string why;
    std::thread t([&] { why = run_seed_here(seed, sc, sum); });
    t.join();
    return why;
}

std::string run_seed_here(std::uint64_t seed, const scenario& sc, totals& sum)
{
    zksim::sim_reset(seed);
    zksim::sim_faults(sc.disconnects_per_s, sc.break_on_request);
    const auto t0 = zksim::sim_now();
    asio::io_context ioc;
    observed o;
    std::vector<std::unique_ptr<zkcoro::client>> clients;
    std::vector<std::unique_ptr<zkcoro::mutex>> mutexes;
    std::vector<std::unique_ptr<zkcoro::shared_mutex>> rw_locks;
    zkcoro::client_config cfg;
    cfg.connect_string = "127.0.0.1:2181";
    cfg.session_timeout = 6s;
    // The trace: each client's log lines (debug level) with the simulated time, the last ones
    // printed with a broken seed (ZKCORO_SIM_TRACE=1: all of them, as they come).
    const bool trace_all = std::getenv("ZKCORO_SIM_TRACE") != nullptr;
    std::deque<std::string> trace;
    cfg.log_threshold = zkcoro::log_level::debug;
    int connected = 0;
    for (int p = 0; p < sc.processes; ++p) {
        cfg.log = [&trace, trace_all, p, t0](zkcoro::log_level l, std::string_view m) {
            auto line = fmt::format("{:10.6f} p{} {}: {}", std::chrono::duration<double>(zksim::sim_now() - t0).count(), p,
                                    zkcoro::to_string(l), m);
            if (trace_all)
                fmt::print("{}\n", line);
            trace.push_back(std::move(line));
            if (trace.size() > 60)
                trace.pop_front();
        };
        clients.push_back(std::make_unique<zkcoro::client>(ioc.get_executor(), cfg));
        clients.back()->async_connect([&](zkcoro::error_code ec) {
            if (ec)
                o.errors.push_back("connect: " + ec.message());
            ++connected;
        });
        const auto path = sc.path_per_process ? fmt::format("/sim/lock-{}", p) : std::string("/sim/lock");
        if (sc.read_write)
            rw_locks.push_back(std::make_unique<zkcoro::shared_mutex>(*clients.back(), path));
        else
            mutexes.push_back(std::make_unique<zkcoro::mutex>(*clients.back(), path));
    }
    if (!zksim::run_until(ioc, [&] { return connected == sc.processes; }, 30s))
        return fmt::format("seed {}: not all clients connected within 30 s of simulated time", seed);
    for (int p = 0; p < sc.processes; ++p)
        for (int t = 0; t < sc.tasks; ++t) {
            const auto i = static_cast<std::size_t>(p);
            const bool reader = sc.read_write && t > 0;
            auto& m = !sc.read_write ? *mutexes[i] : reader ? rw_locks[i]->reader() : rw_locks[i]->writer();
            asio::co_spawn(ioc,
                           task(m, o, seed * 1000 + static_cast<std::uint64_t>(p * 10 + t), sc.rounds, sc.max_hold_us,
                                reader, sc.acquire_timeout),
                           asio::detached);
        }
    const int all = sc.processes * sc.tasks;
    // ZKCORO_SIM_DUMP_AT=S: the simulated tree at S seconds into the run (debugging a seed).
    double dump_at = -1;
    if (const char* d = std::getenv("ZKCORO_SIM_DUMP_AT"))
        dump_at = std::strtod(d, nullptr);
    const bool finished = zksim::run_until(ioc, [&] {
        if (dump_at >= 0 && std::chrono::duration<double>(zksim::sim_now() - t0).count() >= dump_at) {
            fmt::print("--- the tree at {:.6f} s:\n{}\n", dump_at, zksim::sim_world().dump());
            dump_at = -1;
        }
        // One acquisition, one node: two nodes under the lock with one protected prefix ("_c_" and
        // the acquisition's UUID) are a create that was made again although the first one had been
        // applied, and the second then queues behind the first, its own, for as long as the session
        // lives (issue 34: the suspicion "queued behind its own earlier node").
        if (o.duplicate.empty()) {
            auto names = zksim::sim_world().children_of("/sim/lock");
            for (std::size_t i = 0; i + 1 < names.size() && o.duplicate.empty(); ++i)
                for (std::size_t j = i + 1; j < names.size(); ++j)
                    if (names[i].size() > 40 && names[i].compare(0, 40, names[j], 0, 40) == 0) {
                        o.duplicate = fmt::format(
                            "{} and {} at {:.6f} s", names[i], names[j],
                            std::chrono::duration<double>(zksim::sim_now() - t0).count());
                        break;
                    }
        }
        return o.tasks_done == all;
    }, 600s);
    // No orphans while the sessions live: every task has ended, so once the faults stop and the
    // clients have had 30 s (simulated) to finish what they clean up in the background (an
    // abandoned acquisition's node, a lost release's), no node of ours may be left under the lock.
    zksim::sim_faults(0);
    std::string orphans;
    if (finished && !sc.path_per_process) {
        zksim::run_until(ioc, [&] { return zksim::sim_world().children_of("/sim/lock").empty(); }, 30s);
        for (auto& n : zksim::sim_world().children_of("/sim/lock"))
            orphans += " " + n;
    }
    // The clients close with the mutexes still there: a task still waiting (a run that did not
    // finish) gets its acquisition failed and ends before anything it uses goes.
    int closed = 0;
    for (auto& c : clients)
        c->async_close([&](zkcoro::error_code) { ++closed; });
    if (!zksim::run_until(ioc, [&] { return closed == sc.processes && zksim::sim_handles() == 0 && o.tasks_done == all; },
                          60s))
        return fmt::format("seed {}: the clients did not close, or their tasks did not end, within 60 s of simulated time",
                           seed);
    mutexes.clear();
    rw_locks.clear();
    clients.clear();
    sum.acquired += o.acquired;
    sum.failed += o.failed;
    for (auto& [what, n] : o.failures)
        sum.failures[what] += n;
    sum.losses += o.losses;
    const auto f = zksim::sim_stats();
    sum.faults.disconnects += f.disconnects;
    sum.faults.expiries += f.expiries;
    sum.faults.applied_unanswered += f.applied_unanswered;
    sum.faults.not_applied += f.not_applied;
    sum.simulated_s += std::chrono::duration<double>(zksim::sim_now() - t0).count();
    sum.mix(static_cast<std::uint64_t>((zksim::sim_now() - t0).count()));
    sum.mix(static_cast<std::uint64_t>(zksim::sim_world().last_zxid()));
    sum.mix(static_cast<std::uint64_t>(o.last_token));
    std::string why;
    if (o.overlaps > 0)
        why += fmt::format(" {} overlaps;", o.overlaps);
    if (o.acquired == 0)
        why += " nothing acquired;";
    if (!orphans.empty())
        why += " nodes left under the lock with every task done and the sessions alive:" + orphans + ";";
    if (!o.duplicate.empty())
        why += " one acquisition's protected name on two nodes: " + o.duplicate + ";";
    if (o.token_drops > 0)
        why += fmt::format(" {} fencing tokens not above the last;", o.token_drops);
    if (!finished)
        why += fmt::format(" only {} of {} tasks done within 600 s of simulated time;", o.tasks_done, all);
    sum.timeouts += o.timeouts;
    if (o.timeouts > 0 && sc.acquire_timeout >= 60s &&
        ((sc.disconnects_per_s == 0 && sc.break_on_request == 0) || std::getenv("ZKCORO_SIM_STRICT")))
        why += fmt::format(" {} acquisitions timed out (60 s);", o.timeouts);
    if (o.failed > 0 && sc.disconnects_per_s == 0)
        why += fmt::format(" {} acquisitions failed;", o.failed);
    for (auto& e : o.errors)
        why += " " + e + ";";
    // No node of ours left: the lock's parent (a container) may stay until reaped.
    auto& w = zksim::sim_world();
    w.reap_containers();
    w.reap_containers();
    if (w.stat_of("/sim/lock") && w.stat_of("/sim/lock")->num_children != 0)
        why += fmt::format(" nodes left under /sim/lock: {};", w.dump());
    if (!why.empty()) {
        std::string last;
        for (auto& l : trace)
            last += "\n    " + l;
        return fmt::format("seed {}:{}\n  the clients' last log lines:{}", seed, why, last);
    }
    return {};
}

// Seeds 1-20; 1-5 under the sanitizers, where a seed with faults costs about 20 times as much
// (the seeds are the same runs in both builds: the same digests).
#ifdef ZKTEST_SANITIZED
constexpr std::uint64_t default_seeds = 5;
#else
constexpr std::uint64_t default_seeds = 20;
#endif

// The seeds of a case: `defaults`, or FROM or FROM:COUNT from the environment variable `env`.
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

// Runs `sc` on each seed (the first 5 broken ones shown, with how to replay them), prints the
// totals under `name`, and returns them with the count of broken seeds.
std::pair<totals, int> sweep(const char* name, const char* env, const std::vector<std::uint64_t>& seeds,
                             const scenario& sc)
{
    int bad = 0;
    totals sum;
    for (auto seed : seeds) {
        const auto why = run_seed(seed, sc, sum);
        if (!why.empty() && ++bad <= 5)
            MESSAGE(why << " (replay: " << env << "=" << seed << ")");
    }
    fmt::print("{}: seeds {}..{}: {} acquisitions, {} failed, {} timed out, {} guards lost; {} connections broken, {} "
               "sessions expired, {} requests applied unanswered, {} not applied; {:.1f} s of simulated time; {} seeds "
               "broke, digest {:016x}\n",
               name, seeds.front(), seeds.back(), sum.acquired, sum.failed, sum.timeouts, sum.losses,
               sum.faults.disconnects, sum.faults.expiries, sum.faults.applied_unanswered, sum.faults.not_applied,
               sum.simulated_s, bad, sum.digest);
    for (auto& [what, n] : sum.failures)
        fmt::print("  failed {} times: {}\n", n, what);
    return {sum, bad};
}

}  // namespace

TEST_CASE("zkcoro::mutex on the simulated ZooKeeper: one holder at a time, tokens rise, nothing left")
{
    scenario sc;
    const auto seeds = seeds_of("ZKCORO_SIM_SEEDS", first_seeds());
    const auto [sum, bad] = sweep("sim_protocol", "ZKCORO_SIM_SEEDS", seeds, sc);
    CHECK(bad == 0);
    CHECK(sum.acquired == static_cast<long>(seeds.size()) * sc.processes * sc.tasks * sc.rounds);
}

TEST_CASE("the checker's control: processes that lock paths of their own are caught overlapping")
{
    scenario sc;
    sc.path_per_process = true;
    totals sum;
    int caught = 0;
    for (std::uint64_t seed = 1; seed <= 3; ++seed)
        caught += run_seed(seed, sc, sum).find("overlaps") != std::string::npos;
    CHECK(caught == 3);
}

TEST_CASE("zkcoro::mutex on the simulated ZooKeeper with connections lost and sessions expired")
{
    scenario sc;
    sc.rounds = 20;
    sc.max_hold_us = 300'000;  // long enough for a fault to meet a holder
    sc.disconnects_per_s = 0.5;  // per session; some reconnects come after the 6 s session timeout
    sc.break_on_request = 0.02;  // and 1 request in 50 meets a broken connection on the wire
    if (const char* r = std::getenv("ZKCORO_SIM_FAULT_RATE"))  // DISCONNECTS_PER_S[:BREAK_ON_REQUEST]
        sc.disconnects_per_s = std::strtod(r, nullptr);
    if (const char* r = std::getenv("ZKCORO_SIM_FAULT_RATE"); r && std::strchr(r, ':'))
        sc.break_on_request = std::strtod(std::strchr(r, ':') + 1, nullptr);
    // Seeds 1-20 (default_seeds), and each seed that found a bug (its regression): 218 made a
    // second node behind its own when the listing beside a create was lost (lock_queue.cpp's
    // absorb); 34 when the look-up of a create whose reply was lost met a lost connection
    // (recover_create).
    auto defaults = first_seeds();
    defaults.push_back(34);
    defaults.push_back(218);
    const auto [sum, bad] =
        sweep("sim_protocol with faults", "ZKCORO_SIM_FAULT_SEEDS", seeds_of("ZKCORO_SIM_FAULT_SEEDS", defaults), sc);
    CHECK(bad == 0);
    CHECK(sum.acquired > 0);
}

TEST_CASE("zkcoro::shared_mutex on the simulated ZooKeeper with faults: readers share, a writer excludes")
{
    scenario sc;
    sc.read_write = true;
    sc.tasks = 3;  // a writer and two readers per process
    sc.rounds = 10;
    sc.max_hold_us = 300'000;
    sc.disconnects_per_s = 0.5;
    sc.break_on_request = 0.02;
    const auto [sum, bad] = sweep("sim_protocol read-write with faults", "ZKCORO_SIM_RW_SEEDS",
                                  seeds_of("ZKCORO_SIM_RW_SEEDS", first_seeds()), sc);
    int invalid_state = 0;
    for (auto& [what, n] : sum.failures)
        invalid_state += what.find("ZINVALIDSTATE") != std::string::npos ? n : 0;
    CHECK(bad == 0);
    CHECK(sum.acquired > 0);
    // An acquisition made as the expiry notice arrives meets the expired handle: it is a lost
    // session to the caller, not the C library's bare ZINVALIDSTATE (198 of 1800 before
    // registry.cpp said so).
    CHECK(invalid_state == 0);
}

TEST_CASE("zkcoro::mutex on the simulated ZooKeeper with faults and short deadlines: abandoned acquisitions leave no node")
{
    scenario sc;
    sc.rounds = 20;
    sc.max_hold_us = 300'000;
    sc.acquire_timeout = 400ms;  // many acquisitions give up, some in the middle of a recovery
    sc.disconnects_per_s = 0.5;
    sc.break_on_request = 0.02;
    const auto [sum, bad] = sweep("sim_protocol short deadlines with faults", "ZKCORO_SIM_DEADLINE_SEEDS",
                                  seeds_of("ZKCORO_SIM_DEADLINE_SEEDS", first_seeds()), sc);
    CHECK(bad == 0);
    CHECK(sum.timeouts > 0);  // the case is about them
}
