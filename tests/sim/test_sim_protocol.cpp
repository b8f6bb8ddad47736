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
#include <memory>
#include <random>
#include <string>
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
};

struct totals {
    long acquired = 0;
    double simulated_s = 0;
    std::uint64_t digest = 1469598103934665603ULL;  // of every seed's end: same seeds, same digest
    void mix(std::uint64_t v) { digest = (digest ^ v) * 1099511628211ULL; }
};

struct observed {
    int inside = 0;
    int overlaps = 0;
    int acquired = 0;
    int failed = 0;
    int tasks_done = 0;
    std::int64_t last_token = 0;
    int token_drops = 0;
    std::vector<std::string> errors;
};

asio::awaitable<void> task(zkcoro::mutex& m, observed& o, std::uint64_t seed, int rounds)
{
    auto ex = co_await asio::this_coro::executor;
    std::mt19937_64 rng(seed);
    for (int i = 0; i < rounds; ++i) {
        auto g = co_await m.acquire(60s);
        if (!g) {
            ++o.failed;
            continue;
        }
        ++o.acquired;
        o.overlaps += ++o.inside > 1;
        if (g->fencing_token() <= o.last_token)
            ++o.token_drops;
        o.last_token = g->fencing_token();
        asio::steady_timer hold(ex, std::chrono::microseconds(std::uniform_int_distribution<int>(0, 3000)(rng)));
        co_await hold.async_wait(asio::use_awaitable);
        --o.inside;
        co_await g->release();
    }
    ++o.tasks_done;
}

// Runs one seed; returns the description of what broke, empty when all held.
std::string run_seed(std::uint64_t seed, const scenario& sc, totals& sum)
{
    zksim::sim_reset(seed);
    const auto t0 = zksim::sim_now();
    asio::io_context ioc;
    observed o;
    std::vector<std::unique_ptr<zkcoro::client>> clients;
    std::vector<std::unique_ptr<zkcoro::mutex>> mutexes;
    zkcoro::client_config cfg;
    cfg.connect_string = "127.0.0.1:2181";
    cfg.session_timeout = 6s;
    int connected = 0;
    for (int p = 0; p < sc.processes; ++p) {
        clients.push_back(std::make_unique<zkcoro::client>(ioc.get_executor(), cfg));
        clients.back()->async_connect([&](zkcoro::error_code ec) {
            if (ec)
                o.errors.push_back("connect: " + ec.message());
            ++connected;
        });
        mutexes.push_back(std::make_unique<zkcoro::mutex>(
            *clients.back(), sc.path_per_process ? fmt::format("/sim/lock-{}", p) : std::string("/sim/lock")));
    }
    if (!zksim::run_until(ioc, [&] { return connected == sc.processes; }, 30s))
        return fmt::format("seed {}: not all clients connected within 30 s of simulated time", seed);
    for (int p = 0; p < sc.processes; ++p)
        for (int t = 0; t < sc.tasks; ++t)
            asio::co_spawn(ioc, task(*mutexes[static_cast<std::size_t>(p)], o, seed * 1000 + static_cast<std::uint64_t>(p * 10 + t), sc.rounds),
                           asio::detached);
    const int all = sc.processes * sc.tasks;
    const bool finished = zksim::run_until(ioc, [&] { return o.tasks_done == all; }, 600s);
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
    clients.clear();
    sum.acquired += o.acquired;
    sum.simulated_s += std::chrono::duration<double>(zksim::sim_now() - t0).count();
    sum.mix(static_cast<std::uint64_t>((zksim::sim_now() - t0).count()));
    sum.mix(static_cast<std::uint64_t>(zksim::sim_world().last_zxid()));
    sum.mix(static_cast<std::uint64_t>(o.last_token));
    std::string why;
    if (o.overlaps > 0)
        why += fmt::format(" {} overlaps;", o.overlaps);
    if (o.acquired == 0)
        why += " nothing acquired;";
    if (o.token_drops > 0)
        why += fmt::format(" {} fencing tokens not above the last;", o.token_drops);
    if (!finished)
        why += fmt::format(" only {} of {} tasks done within 600 s of simulated time;", o.tasks_done, all);
    if (o.failed > 0)
        why += fmt::format(" {} acquisitions failed;", o.failed);
    for (auto& e : o.errors)
        why += " " + e + ";";
    // No node of ours left: the lock's parent (a container) may stay until reaped.
    auto& w = zksim::sim_world();
    w.reap_containers();
    w.reap_containers();
    if (w.stat_of("/sim/lock") && w.stat_of("/sim/lock")->num_children != 0)
        why += fmt::format(" nodes left under /sim/lock: {};", w.dump());
    if (!why.empty())
        return fmt::format("seed {}:{}", seed, why);
    return {};
}

}  // namespace

TEST_CASE("zkcoro::mutex on the simulated ZooKeeper: one holder at a time, tokens rise, nothing left")
{
    scenario sc;
    std::uint64_t from = 1, count = 20;
    if (const char* s = std::getenv("ZKCORO_SIM_SEEDS")) {  // FROM or FROM:COUNT
        from = std::strtoull(s, nullptr, 10);
        const char* colon = std::strchr(s, ':');
        count = colon ? std::strtoull(colon + 1, nullptr, 10) : 1;
    }
    int bad = 0;
    totals sum;
    for (std::uint64_t seed = from; seed < from + count; ++seed) {
        const auto why = run_seed(seed, sc, sum);
        if (!why.empty() && ++bad <= 5)
            MESSAGE(why << " (replay: ZKCORO_SIM_SEEDS=" << seed << ")");
    }
    fmt::print("sim_protocol: seeds {}..{}: {} acquisitions in {:.1f} s of simulated time, {} seeds broke, digest {:016x}\n",
               from, from + count - 1, sum.acquired, sum.simulated_s, bad, sum.digest);
    CHECK(bad == 0);
    CHECK(sum.acquired == static_cast<long>(count) * sc.processes * sc.tasks * sc.rounds);
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
