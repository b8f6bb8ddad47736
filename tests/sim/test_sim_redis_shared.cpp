// The Redis read-write lock (zkcoro::redis_shared_mutex: src/redis/shared_lock.cpp and its four
// scripts, unchanged) on the simulated Redis (redis_sim; the scripts' models in
// redis_world_shared.cpp), in the sim_redis program beside the mutex's and the fair lock's cases.
// 4 processes (one redis_client and one redis_shared_mutex on `sim:rw` each), 3 tasks each,
// 6 rounds each: a read (2 in 3) or a write, held 0-900 ms (TTL 600 ms: some holds are renewed),
// under the fault kinds of test_sim_redis.cpp. Checked after every step and at every grant:
// - readers xor a writer: among the guards not told they lost their hold, those of different
//   tasks are all readers, or there is one (a task's own reentrant guards and a downgrade's read
//   guard beside its write guard are its own); checked at the grant, so a guard that was told it
//   lost was told before the conflicting grant came back;
// - tokens: a write grant's token is above every token granted before it (read or write), a read
//   grant's above every write grant's before it (two readers' replies may come in either order);
//   on the server every grant's token is above every earlier one (redis_world::token_drop);
// - liveness: every acquisition ends by its deadline + R (R below);
// - no acquisition fails before its deadline; without faults every one is granted, none lost;
// - once the clients have closed and a TTL has passed, no key of the lock's is left but
//   `{sim:rw}:fencing` (the write key, the readers' and the writers' sorted sets all gone);
// - W = 200 ms without faults: nothing held and acquisitions under way, one is granted within W.
// The negative controls: a read script that ignores the writer's key and the waiting writers
// (redis_world::broken_rw_read) is caught by the first checker; a release script that leaves the
// writer's key (broken_rw_release) by W.
#include "redis_run_log.hpp"
#include "redis_sim.hpp"
#include "sim_checks.hpp"
#include "sim_harness.hpp"

#include "redis/lock_scripts.hpp"

#include <zkcoro/redis.hpp>
#include <zkcoro/redis_shared_mutex.hpp>
#include <zkcoro/this_task.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr std::uint16_t rw_port = 6391;
const std::string rw_key = "sim:rw";

// R for the read-write lock: an acquisition ends by its deadline + R. take_shared
// (src/redis/shared_lock.cpp) waits past its deadline for nothing but the attempt in flight: its
// waits (the connection, a release, a TTL, a mark) are capped at the deadline, and every round
// asks the deadline before it goes on; the attempt's reply is awaited until max(deadline,
// sent + 1 s), and an attempt sent while the link is still making its connection (wait_connected
// returns at the deadline) is given up by the link's connect timeout, 5 s. A grant that came too
// late is not tried again past the deadline; the give-back (take_back) runs in the background,
// not awaited. So R = 5 s + 1 s + a trip, as the mutex's: 6.01 s.
constexpr std::chrono::milliseconds rw_liveness_bound{6'010};

struct rw_scenario {
    int processes = 4;
    int tasks = 3;
    int rounds = 6;
    std::chrono::milliseconds ttl{600};
    int max_hold_ms = 900;
    int min_deadline_ms = 1000, max_deadline_ms = 5000;
    zksim::redis_faults faults;
    int replicas = 0, replica_acks = 0;
    bool cancel = false;      // 2 in 3 first acquisitions of a round cancelled (sim_checks.hpp's arm_cancel)
    bool reentrant = false;   // a holder takes its side again (same token), and a reader asks to upgrade
    bool downgrade = false;   // a writer takes the read side, lets the write side go and reads on
    std::chrono::milliseconds quiet_grant{0};  // W (0: not checked)
    bool broken_read = false;                  // the negative controls
    bool broken_release = false;
};

struct holder {
    int process, task;
    bool write;
    std::int64_t token;
};

struct rw_observed : zksim::redis_run_log {
    std::map<int, holder> inside;  // guards not told lost, by a number of their own
    int next_guard = 0;
    int conflicts = 0;
    std::string first_conflict;
    std::int64_t max_token = 0, max_write_token = 0;
    int token_drops = 0;
    std::string first_drop;
    int reads = 0, writes = 0, losses = 0, timeouts = 0, failed = 0, tasks_done = 0;
    int reentered = 0, downgrades = 0, upgrades_refused = 0;
    std::string broken_promise;  // reentrancy, downgrade, upgrade, early failure
    std::map<std::string, int> failures;
    zksim::cancel_counts cancels;
    bool closing = false;
    // Readers xor a writer among the holders of different tasks.
    std::string conflict() const
    {
        for (auto& [i, a] : inside)
            for (auto& [j, b] : inside)
                if (i < j && (a.process != b.process || a.task != b.task) && (a.write || b.write))
                    return fmt::format("p{} task {} ({}, token {}) and p{} task {} ({}, token {}) both hold, neither "
                                       "told it lost its hold",
                                       a.process, a.task, a.write ? "write" : "read", a.token, b.process, b.task,
                                       b.write ? "write" : "read", b.token);
        return {};
    }
    void check_conflict(const char* when)
    {
        if (conflicts > 0)
            return;
        if (auto c = conflict(); !c.empty()) {
            ++conflicts;
            first_conflict = fmt::format("{} at {:.6f} s ({}, step {})", c, now_s(), when, zksim::sim_stats().steps);
        }
    }
};

using rw_side = zkcoro::redis_shared_mutex::side;

// A grant: checked (tokens, readers xor a writer) and counted as a holder until its lost signal or
// leave(); returns its number in `inside` (-1: already lost when it came back).
int enter(rw_observed& o, zkcoro::guard& g, int process, int task, bool write)
{
    write ? ++o.writes : ++o.reads;
    ++o.held;
    o.note(process, fmt::format("task {} granted {}, token {}", task, write ? "write" : "read", g.fencing_token()));
    const auto t = g.fencing_token();
    if ((write ? t <= o.max_token : t <= o.max_write_token) && ++o.token_drops == 1)
        o.first_drop = fmt::format("p{} task {}'s {} grant at {:.6f} s (step {}): token {} not above {}", process, task,
                                   write ? "write" : "read", o.now_s(), zksim::sim_stats().steps, t,
                                   write ? o.max_token : o.max_write_token);
    o.max_token = std::max(o.max_token, t);
    if (write)
        o.max_write_token = std::max(o.max_write_token, t);
    if (g.lost())
        return -1;
    const int id = o.next_guard++;
    o.inside[id] = {process, task, write, t};
    o.check_conflict("at a grant");
    g.async_wait_lost([&o, id, process](zkcoro::error_code ec) {
        if (ec == zkcoro::client_errc::lock_lost && o.inside.erase(id) > 0) {
            ++o.losses;
            o.note(process, "told it lost its hold");
        }
    });
    return id;
}

void leave(rw_observed& o, int id)
{
    if (id >= 0)
        o.inside.erase(id);
    --o.held;
}

asio::awaitable<void> give_back(zkcoro::guard& g)
{
    try {
        co_await g.release();
    } catch (const boost::system::system_error&) {
        // a lost hold's release, or one whose connection dropped: the lease runs out
    }
}

asio::awaitable<void> pause(std::mt19937_64& rng, int max_ms)
{
    asio::steady_timer t(co_await asio::this_coro::executor,
                         std::chrono::milliseconds(std::uniform_int_distribution<int>(0, max_ms)(rng)));
    co_await t.async_wait(zksim::use_tuple);
}

// The holder takes its side again: the same token; its release leaves the hold (not lost by it).
// A reader also asks for the write side: refused at once (upgrade_not_supported).
asio::awaitable<void> reenter(rw_observed& o, zkcoro::redis_shared_mutex& m, zkcoro::guard& g, int process, bool write)
{
    if (g.lost())
        co_return;
    auto& side = write ? m.writer() : m.reader();
    std::optional<zkcoro::guard> again;
    try {
        again = co_await side.acquire(std::chrono::milliseconds(1000));
    } catch (const boost::system::system_error& e) {
        if (o.broken_promise.empty())
            o.broken_promise = fmt::format("p{}: a reentrant acquisition failed at {:.6f} s: {}", process, o.now_s(),
                                           e.code().message());
        co_return;
    }
    if (!again || again->fencing_token() != g.fencing_token()) {
        if (o.broken_promise.empty())
            o.broken_promise = fmt::format("p{}: a reentrant acquisition of the holder of token {} got {} at {:.6f} s",
                                           process, g.fencing_token(),
                                           again ? std::to_string(again->fencing_token()) : std::string("nothing"),
                                           o.now_s());
        co_return;
    }
    ++o.reentered;
    co_await give_back(*again);
    if (!write) {
        const auto before = zksim::sim_now();
        zkcoro::error_code ec;
        try {
            auto w = co_await m.writer().acquire(std::chrono::milliseconds(1000));
        } catch (const boost::system::system_error& e) {
            ec = e.code();
        }
        if (ec == zkcoro::client_errc::upgrade_not_supported && zksim::sim_now() == before)
            ++o.upgrades_refused;
        else if (o.broken_promise.empty())
            o.broken_promise = fmt::format("p{}: an upgrade at {:.6f} s ended with '{}' after {} ns, not refused at "
                                           "once",
                                           process, o.now_s(), ec.message(), (zksim::sim_now() - before).count());
    }
}

asio::awaitable<void> rw_task(zkcoro::redis_shared_mutex& m, rw_observed& o, int process, int task, std::uint64_t seed,
                              const rw_scenario& sc)
{
    std::mt19937_64 rng(seed);
    const auto me = co_await zkcoro::this_task::id<asio::any_io_executor>();
    for (int i = 0; i < sc.rounds; ++i) {
        bool write = std::uniform_int_distribution<int>(0, 2)(rng) == 0;
        auto& side = write ? m.writer() : m.reader();
        const auto timeout = std::chrono::milliseconds(
            std::uniform_int_distribution<int>(sc.min_deadline_ms, sc.max_deadline_ms)(rng));
        const int id = o.next_attempt++;
        const auto began = o.now_ns();
        const auto deadline = began + std::chrono::nanoseconds(timeout).count();
        o.pending[id] = {process, began, deadline};
        std::optional<zkcoro::guard> g;
        zkcoro::error_code ec;
        bool fired = false;
        const int pick = sc.cancel ? zksim::draw_cancel(rng) : 0;
        if (pick == 0) {
            try {
                g = co_await side.acquire(timeout);
            } catch (const boost::system::system_error& e) {
                ec = e.code();
            }
        } else {
            asio::steady_timer trigger(co_await asio::this_coro::executor);
            auto bc = zksim::arm_cancel(rng, pick, trigger);
            auto [e, r] = co_await side.async_acquire(me, timeout,
                                                      asio::bind_cancellation_slot(bc->sig.slot(), zksim::use_tuple));
            bc->ended = true;
            trigger.cancel();
            fired = bc->fired;
            const bool cancelled = zksim::judge_cancel(o.cancels, *bc, e, r.has_value(), o.now_s());
            if (cancelled) {
                o.pending.erase(id);
                continue;
            }
            ec = e;
            g = std::move(r);
        }
        o.pending.erase(id);
        o.longest_past = std::max(o.longest_past, o.now_ns() - deadline);
        if (ec) {
            // Transient failures are waited through until the deadline (take_shared).
            if (!fired && o.now_ns() < deadline && !o.closing && o.broken_promise.empty())
                o.broken_promise = fmt::format("an acquisition of p{} begun at {:.6f} s failed at {:.6f} s, before its "
                                               "deadline {:.6f} s: {} (step {})",
                                               process, static_cast<double>(began) / 1e9, o.now_s(),
                                               static_cast<double>(deadline) / 1e9, ec.message(),
                                               zksim::sim_stats().steps);
            ++o.failed;
            ++o.failures[ec.message()];
            o.note(process, "acquisition failed: " + ec.message());
            continue;
        }
        if (!g) {
            ++o.timeouts;
            continue;
        }
        int in = enter(o, *g, process, task, write);
        if (sc.reentrant)
            co_await reenter(o, m, *g, process, write);
        if (write && sc.downgrade && std::uniform_int_distribution<int>(0, 1)(rng) == 0 && !g->lost()) {
            // Downgrade: the read side while holding the write side, granted at once (writers may
            // wait); then the write side let go, the read kept.
            co_await pause(rng, sc.max_hold_ms / 2);
            const int rid = o.next_attempt++;
            const auto rbegan = o.now_ns();
            o.pending[rid] = {process, rbegan, rbegan + std::chrono::nanoseconds(1s).count()};
            std::optional<zkcoro::guard> r;
            try {
                r = co_await m.reader().acquire(std::chrono::milliseconds(1000));
            } catch (const boost::system::system_error& e) {
                o.note(process, "downgrade failed: " + e.code().message());
            }
            o.pending.erase(rid);
            if (r) {
                ++o.downgrades;
                const int rin = enter(o, *r, process, task, false);
                leave(o, in);
                co_await give_back(*g);
                g = std::move(r);
                in = rin;
                write = false;
            } else if (!g->lost() && !sc.faults.drops_per_s && !sc.faults.pauses_per_s && o.broken_promise.empty()) {
                o.broken_promise = fmt::format("p{}: a downgrade by the writer holding (token {}) was not granted "
                                               "within 1 s without faults, at {:.6f} s",
                                               process, g->fencing_token(), o.now_s());
            }
        }
        co_await pause(rng, sc.max_hold_ms);
        leave(o, in);
        co_await give_back(*g);
    }
    ++o.tasks_done;
}

std::string run_rw_seed(std::uint64_t seed, const rw_scenario& sc, zksim::sweep_totals& sum)
{
    zksim::sim_reset(seed);
    rw_observed o;
    o.t0 = zksim::sim_now();
    auto faults = sc.faults;
    faults.replicas = sc.replicas;
    zksim::redis_sim server(rw_port, faults);
    server.world.broken_rw_read = sc.broken_read;
    server.world.broken_rw_release = sc.broken_release;
    asio::io_context ioc;
    std::vector<std::unique_ptr<zkcoro::redis_client>> clients;
    std::vector<std::unique_ptr<zkcoro::redis_shared_mutex>> locks;
    for (int p = 0; p < sc.processes; ++p) {
        zkcoro::redis_options opts;
        opts.first_connect_wait = 30s;
        opts.replica_acks = sc.replica_acks;
        opts.log = [&o, p](zkcoro::log_level l, std::string_view m) {
            o.note(p, fmt::format("{}: {}", zkcoro::to_string(l), m));
        };
        clients.push_back(std::make_unique<zkcoro::redis_client>(ioc.get_executor(), server.url(), opts));
        zkcoro::redis_shared_mutex_options ro;
        ro.ttl = sc.ttl;  // the writer timeout: the TTL (a waiting writer comes back every 200 ms)
        locks.push_back(std::make_unique<zkcoro::redis_shared_mutex>(*clients.back(), rw_key, ro));
    }
    const int all = sc.processes * sc.tasks;
    for (int p = 0; p < sc.processes; ++p)
        for (int t = 0; t < sc.tasks; ++t)
            asio::co_spawn(ioc,
                           rw_task(*locks[static_cast<std::size_t>(p)], o, p, t,
                                   seed * 1000 + static_cast<std::uint64_t>(p * 10 + t), sc),
                           asio::detached);
    const bool finished = zksim::run_until(ioc, [&] {
        o.check_conflict("after a step");
        o.check_late("an acquisition", "R", rw_liveness_bound);
        if (sc.quiet_grant.count() > 0)
            o.check_quiet("nothing held", sc.quiet_grant);
        return o.tasks_done == all || o.conflicts > 0 || !o.late.empty() || !o.stalled.empty();
    }, 600s) && o.tasks_done == all;
    // The end: the faults stop, the clients close; after a TTL (and the writer timeout, the
    // same) nothing of the lock's may be left but its fencing counter.
    server.quiet();
    o.closing = true;
    const auto close_began = o.now_ns();
    for (auto& c : clients)
        c->close();
    const bool closed = zksim::run_until(ioc, [&] {
        for (auto& c : clients)
            if (c->state() != zkcoro::redis_state::closed)
                return false;
        return server.open_connections() == 0 && o.tasks_done == all;
    }, 30s);
    zksim::run_until(ioc, [] { return false; }, sc.ttl + 10ms);
    server.sync_clock();
    std::string left;
    for (auto& [k, v] : server.world.live_keys())
        if (k != "{" + rw_key + "}:fencing")
            left += fmt::format(" {}={}", k, v);
    locks.clear();
    clients.clear();
    for (int i = 0; i < 1000 && ioc.poll() > 0; ++i) {
    }

    sum.counts["read grants"] += o.reads;
    sum.counts["write grants"] += o.writes;
    sum.counts["timed out"] += o.timeouts;
    sum.counts["failed"] += o.failed;
    sum.counts["guards told lost"] += o.losses;
    for (auto& [what, n] : o.failures)
        sum.counts["failed: " + what] += n;
    if (sc.reentrant) {
        sum.counts["reentered (same token)"] += o.reentered;
        sum.counts["upgrades refused at once"] += o.upgrades_refused;
    }
    if (sc.downgrade)
        sum.counts["downgrades"] += o.downgrades;
    if (sc.cancel) {
        sum.counts["cancelled"] += o.cancels.cancelled;
        sum.counts["granted although cancelled"] += o.cancels.raced;
        sum.counts["cancellations reported as timed out or failed"] += o.cancels.misreported;
    }
    sum.counts["redis connections dropped"] += server.counts.drops;
    sum.counts["redis pauses"] += server.counts.pauses;
    sum.counts["redis replies delayed"] += server.counts.delayed;
    sum.counts["redis commands"] += server.world.commands;
    if (sc.replicas > 0) {
        sum.counts["redis failovers"] += server.counts.failovers;
        sum.counts["redis writes lost in failovers"] += server.counts.lost_writes;
    }
    sum.most("s past a deadline at most", static_cast<double>(o.longest_past) / 1e9);
    sum.mix(static_cast<std::uint64_t>(close_began));
    sum.mix(static_cast<std::uint64_t>(server.world.commands));
    sum.mix(static_cast<std::uint64_t>(o.max_token));
    sum.mix(static_cast<std::uint64_t>(o.reads * 1000 + o.writes));

    std::string why;
    if (o.conflicts > 0)
        why += " readers xor a writer: " + o.first_conflict + ";";
    if (o.token_drops > 0)
        why += fmt::format(" {} tokens not above the last (the first: {});", o.token_drops, o.first_drop);
    if (!server.world.token_drop.empty())
        why += " server: " + server.world.token_drop + ";";
    if (!o.broken_promise.empty())
        why += " " + o.broken_promise + ";";
    if (!o.cancels.wrong.empty())
        why += " cancellation: " + o.cancels.wrong + ";";
    if (!o.late.empty())
        why += " liveness: " + o.late + ";";
    if (!o.stalled.empty())
        why += " liveness: " + o.stalled + ";";
    if (!finished && o.conflicts == 0 && o.late.empty() && o.stalled.empty())
        why += fmt::format(" only {} of {} tasks done within 600 s of simulated time;", o.tasks_done, all);
    if (!closed)
        why += fmt::format(" the clients did not close within 30 s ({} connections open);", server.open_connections());
    if (!left.empty())
        why += " keys left once the clients closed and a TTL passed:" + left + ";";
    const auto& f = sc.faults;
    const bool faulty = f.drops_per_s > 0 || f.drop_on_request > 0 || f.refuse_connect > 0 || f.pauses_per_s > 0 ||
                        f.delay_chance > 0 || f.failovers_per_s > 0;
    if (!faulty && !sc.cancel && (o.failed > 0 || o.timeouts > 0 || o.losses > 0))
        why += fmt::format(" without faults: {} failed, {} timed out, {} lost;", o.failed, o.timeouts, o.losses);
    if (o.reads + o.writes == 0)
        why += " nothing acquired;";
    if (why.empty())
        return {};
    return fmt::format("seed {}:{}\n  the last lines:{}", seed, why, o.last_lines());
}

zksim::sweep_totals rw_sweep(const char* name, const char* env, std::vector<std::uint64_t> defaults,
                             const rw_scenario& sc, bool control = false)
{
    (void)zkcoro::detail::process_name();  // drawn before any seed (see test_sim_redis.cpp's sweep)
    return zksim::sweep(name, env, zksim::seeds_of(env, std::move(defaults)),
                        [&](std::uint64_t seed, zksim::sweep_totals& sum) { return run_rw_seed(seed, sc, sum); },
                        control);
}

// The mutex's fault case's faults (test_sim_redis.cpp, with_faults).
rw_scenario rw_with_faults()
{
    rw_scenario sc;
    sc.faults.drops_per_s = 0.3;
    sc.faults.drop_on_request = 0.01;
    sc.faults.refuse_connect = 0.1;
    sc.faults.delay_chance = 0.02;
    sc.faults.max_delay_ms = 400;
    sc.faults.script_flushes_per_s = 0.05;
    sc.faults.pauses_per_s = 0.1;
    sc.faults.max_pause_ms = 1500;
    return sc;
}

}  // namespace

TEST_CASE("sim redis rw: readers and writers, no faults: every acquisition granted, readers xor a writer, W 200 ms")
{
    rw_scenario sc;
    sc.min_deadline_ms = sc.max_deadline_ms = 60'000;
    sc.quiet_grant = std::chrono::milliseconds(200);
    sc.downgrade = true;
    const auto sum = rw_sweep("sim redis rw", "ZKCORO_SIM_REDIS_RW_SEEDS", zksim::first_seeds(2, 1), sc);
    CHECK(sum.broke == 0);
    CHECK(sum["read grants"] + sum["write grants"] - sum["downgrades"] ==
          static_cast<long>(sum.seeds_run) * sc.processes * sc.tasks * sc.rounds);
    CHECK(sum["downgrades"] > 0);
}

TEST_CASE("sim redis rw: readers and writers with faults")
{
    auto sc = rw_with_faults();
    sc.downgrade = true;
    const auto sum = rw_sweep("sim redis rw with faults", "ZKCORO_SIM_REDIS_RW_FAULT_SEEDS", zksim::first_seeds(3, 2), sc);
    CHECK(sum.broke == 0);
    CHECK(sum["write grants"] > 0);
    CHECK(sum["read grants"] > 0);
}

TEST_CASE("sim redis rw: cancellations with faults")
{
    auto sc = rw_with_faults();
    sc.cancel = true;
    const auto sum = rw_sweep("sim redis rw cancellations with faults", "ZKCORO_SIM_REDIS_RW_CANCEL_SEEDS",
                              zksim::first_seeds(3, 1), sc);
    CHECK(sum.broke == 0);
    CHECK(sum["cancelled"] > 0);
}

TEST_CASE("sim redis rw: cancellations without faults (W 200 ms: a cancelled writer's mark goes with it)")
{
    rw_scenario sc;
    sc.cancel = true;
    sc.min_deadline_ms = sc.max_deadline_ms = 60'000;
    sc.quiet_grant = std::chrono::milliseconds(200);
    const auto sum = rw_sweep("sim redis rw cancellations", "ZKCORO_SIM_REDIS_RW_QUIET_CANCEL_SEEDS",
                              zksim::first_seeds(2, 1), sc);
    CHECK(sum.broke == 0);
    CHECK(sum["cancelled"] > 0);
}

TEST_CASE("sim redis rw: reentrancy, upgrade refused and downgrade, with faults and short deadlines")
{
    auto sc = rw_with_faults();
    sc.reentrant = true;
    sc.downgrade = true;
    sc.min_deadline_ms = 300;  // short deadlines: many give up, writers' marks taken back
    sc.max_deadline_ms = 2000;
    const auto sum = rw_sweep("sim redis rw reentrant with faults", "ZKCORO_SIM_REDIS_RW_REENTRANT_SEEDS",
                              zksim::first_seeds(2, 1), sc);
    CHECK(sum.broke == 0);
    CHECK(sum["reentered (same token)"] > 0);
    CHECK(sum["upgrades refused at once"] > 0);
}

TEST_CASE("sim redis rw: failovers, grants and renewals acknowledged by WAIT")
{
    auto sc = rw_with_faults();
    sc.downgrade = true;
    sc.replicas = 1;
    sc.replica_acks = 1;
    sc.faults.replica_lag_ms = 300;
    sc.faults.failovers_per_s = 0.2;
    const auto sum = rw_sweep("sim redis rw with failovers, acknowledged", "ZKCORO_SIM_REDIS_RW_FAILOVER_SEEDS",
                              zksim::first_seeds(2, 1), sc);
    CHECK(sum.broke == 0);
    CHECK(sum["redis writes lost in failovers"] > 0);
}

TEST_CASE("sim redis rw: late replies, delayed up to 1.5 s (past the loss deadline)")
{
    auto sc = rw_with_faults();
    sc.faults.max_delay_ms = 1500;
    const auto sum = rw_sweep("sim redis rw with late replies", "ZKCORO_SIM_REDIS_RW_LATE_SEEDS", zksim::first_seeds(1, 1), sc);
    CHECK(sum.broke == 0);
}

TEST_CASE("sim redis rw negative control: a read script that ignores the writer is caught")
{
    rw_scenario sc;
    sc.broken_read = true;
    const auto sum = rw_sweep("sim redis rw control (reads ignore the writer)", "ZKCORO_SIM_REDIS_RW_CONTROL_SEEDS",
                              zksim::first_seeds(2, 1), sc, true);
    CHECK(sum.broke == static_cast<int>(sum.seeds_run));
}

TEST_CASE("sim redis rw negative control: a release that leaves the writer's key is caught by W")
{
    rw_scenario sc;
    sc.broken_release = true;
    sc.min_deadline_ms = sc.max_deadline_ms = 60'000;
    sc.quiet_grant = std::chrono::milliseconds(200);
    const auto sum = rw_sweep("sim redis rw control (a release that leaves the key)", "ZKCORO_SIM_REDIS_RW_CONTROL_SEEDS",
                              zksim::first_seeds(2, 1), sc, true);
    CHECK(sum.broke == static_cast<int>(sum.seeds_run));
}
