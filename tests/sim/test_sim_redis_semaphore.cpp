// zkcoro::redis_semaphore (src/redis/semaphore.cpp, its scripts modelled in
// redis_world_semaphore.cpp) on the simulated Redis, unchanged, as the mutex and the fair lock in
// test_sim_redis.cpp: processes (one redis_client and one redis_semaphore each, shared by their
// tasks) acquiring n of 3 leases (n = 1, 2 or 3, drawn), under the Redis fault case's faults,
// failovers (acknowledged or not), late replies, cancellations, and clients closed while
// acquisitions wait. Checked after every step: the leases of the guards not told they lost them
// within the count (a guard told lost was told before the grant that would exceed it); on the
// server, every grant leaves the leases held within the count, and the leases held plus those
// wanted by every acquisition that arrived before it and still waits within the count too (FIFO:
// a later acquisition never takes leases an earlier one waits for; without faults also no waiter
// departs before its grant); tokens rising (on the server at every grant; a guard's above every
// guard that had ended when its acquisition began; no two guards with one token); every
// acquisition ends by its deadline + R_S; without faults, W: no guard holding leases while
// acquisitions are under way lasts at most 200 ms. At the end: every task done; once the clients
// closed and a TTL + 1 s passed, no key left but the counter. Negative controls: a model that
// counts no lease as held, one that lets a later acquisition pass an earlier one, and one whose
// release frees nothing (W), are caught.
#include "redis_run_log.hpp"
#include "redis_sim.hpp"
#include "sim_checks.hpp"
#include "sim_harness.hpp"

#include "redis/lock_scripts.hpp"

#include <zkcoro/redis.hpp>
#include <zkcoro/redis_semaphore.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using zksim::step_now;

namespace {

constexpr std::uint16_t sem_port = 6391;
const std::string sem_key = "sim:sem";
const std::string sem_fence = "{sim:sem}:fencing";
const std::string sem_queue = "{sim:sem}:queue";

// R_S: an acquisition ends by its deadline + R_S. The semaphore's take (sem_take in
// src/redis/semaphore.cpp) waits past its deadline only for the attempt in flight: the wait for
// the connection (wait_connected), the wait for a message or a refresh and the retry's pause are
// all bounded by the deadline, and every round checks it before sending again; the attempt's run
// (the script, and WAIT when replicas must acknowledge) is bounded by a timer at max(deadline,
// sent + 1 s), and an attempt is sent before the deadline (or once, at the start, when the
// deadline has passed already). A failure's give-back (take_back) runs in the background, not
// awaited; a grant is handed on at once. So R_S = 1 s + the trips of the engine's hand-off (the
// completion posted to the caller's executor): 1.01 s here. (The mutex's R adds the link's 5 s
// connect timeout: its take waits for a connection being made; this one does not.)
constexpr std::chrono::milliseconds sem_liveness_bound{1'010};

struct sem_scenario {
    int processes = 4;
    int tasks = 2;   // per process
    int rounds = 6;  // acquisitions per task
    int max_leases = 3;
    std::chrono::milliseconds ttl{600};  // and the waiter timeout: a waiter comes back every 200 ms
    int max_hold_ms = 900;               // some holds outlast the TTL: renewed
    int min_deadline_ms = 1000, max_deadline_ms = 5000;
    zksim::redis_faults faults;
    int replicas = 0;
    int replica_acks = 0;
    // Whether the count is promised: not across a failover without replica acknowledgement
    // (docs/redis.md), where grants beyond it are counted instead.
    bool count_promised = true;
    bool cancel = false;  // 2 acquisitions in 3 cancelled (sim_checks.hpp: arm_cancel, judge_cancel)
    // The order on the server (redis_world::sem_orders; not across failovers, which lose queue
    // entries); `strict_fifo` besides: no queued acquisition departs before its grant.
    bool fifo = true;
    bool strict_fifo = false;
    // The clients close at this simulated time, acquisitions still queued (0: when every task ended).
    std::chrono::milliseconds close_early{0};
    bool broken_leases = false;  // the negative controls (redis_world)
    // The server's count check (redis_world::sem_over); the leases control turns it off, so that
    // the guards' tally alone must catch it.
    bool server_count = true;
    bool broken_order = false;
    bool broken_release = false;  // the W control (redis_world::broken_sem_release)
    // W (0: not checked): no guard holding leases while acquisitions are under way breaks the seed
    // after this long (redis_run_log::check_quiet).
    std::chrono::milliseconds quiet_grant{0};
};

struct sem_observed : zksim::redis_run_log {
    int inside = 0;  // leases of the guards not told they lost them, not yet released
    int overs = 0;
    std::string first_over;
    int granted = 0, timeouts = 0, failed = 0, losses = 0, granted_lost = 0, tasks_done = 0;
    std::map<std::string, int> failures;
    std::map<int, int> granted_by_n;
    std::int64_t ended_max_token = 0;  // the highest token of the guards whose hold ended
    int token_drops = 0;
    std::string first_drop;
    std::set<std::int64_t> tokens;
    bool closing = false;
    std::string early_failure;
    zksim::cancel_counts cancels;
};

asio::awaitable<void> sem_hold(sem_observed& o, const sem_scenario& sc, int process, int n, zkcoro::guard& g,
                               std::int64_t ended_before, std::mt19937_64& rng)
{
    ++o.granted;
    ++o.granted_by_n[n];
    ++o.held;  // until its release has been answered (W)
    const auto who = fmt::format("p{} ({} leases, token {})", process, n, g.fencing_token());
    o.note(process, fmt::format("granted {} leases, token {}", n, g.fencing_token()));
    if (g.fencing_token() <= ended_before && ++o.token_drops == 1)
        o.first_drop = fmt::format("{} granted at {:.6f} s (step {}), not above token {} of a guard that had ended "
                                   "before its acquisition began",
                                   who, o.now_s(), step_now(), ended_before);
    if (!o.tokens.insert(g.fencing_token()).second && ++o.token_drops == 1)
        o.first_drop = fmt::format("{} granted at {:.6f} s (step {}) with a token another guard had", who, o.now_s(),
                                   step_now());
    auto counted = std::make_shared<bool>(false);
    if (g.lost()) {
        ++o.granted_lost;  // told already: holds nothing
    } else {
        if (o.inside + n > sc.max_leases && ++o.overs == 1)
            o.first_over = fmt::format("{} granted at {:.6f} s (step {}) while guards not told they lost them held {} "
                                       "of {} leases",
                                       who, o.now_s(), step_now(), o.inside, sc.max_leases);
        o.inside += n;
        *counted = true;
        g.async_wait_lost([&o, counted, process, n](zkcoro::error_code ec) {
            if (ec == zkcoro::client_errc::lock_lost && *counted) {
                *counted = false;
                o.inside -= n;
                ++o.losses;
                o.note(process, fmt::format("told it lost its {} leases", n));
            }
        });
    }
    co_await zksim::hold_for(rng, sc.max_hold_ms * 1000);
    if (*counted) {
        *counted = false;
        o.inside -= n;
    }
    o.ended_max_token = std::max(o.ended_max_token, g.fencing_token());
    try {
        co_await g.release();
    } catch (const boost::system::system_error&) {
        // leases lost, or a release whose connection dropped: they expire
    }
    --o.held;
}

asio::awaitable<void> sem_task(zkcoro::redis_semaphore& s, sem_observed& o, int process, std::uint64_t seed,
                               const sem_scenario& sc)
{
    std::mt19937_64 rng(seed);
    for (int i = 0; i < sc.rounds; ++i) {
        const auto timeout = std::chrono::milliseconds(
            std::uniform_int_distribution<int>(sc.min_deadline_ms, sc.max_deadline_ms)(rng));
        static constexpr int ns[] = {1, 1, 1, 2, 2, 3};
        const int n = std::min(sc.max_leases, ns[std::uniform_int_distribution<int>(0, 5)(rng)]);
        const int id = o.next_attempt++;
        const auto began = o.now_ns();
        const auto deadline = began + std::chrono::nanoseconds(timeout).count();
        o.pending[id] = {process, began, deadline};
        const auto ended_before = o.ended_max_token;
        std::optional<zkcoro::guard> g;
        zkcoro::error_code ec;
        bool fired = false;
        const int pick = sc.cancel ? zksim::draw_cancel(rng) : 0;
        if (pick == 0) {
            try {
                g = co_await s.acquire(n, timeout);
            } catch (const boost::system::system_error& e) {
                ec = e.code();
            }
        } else {
            asio::steady_timer trigger(co_await asio::this_coro::executor);
            auto bc = zksim::arm_cancel(rng, pick, trigger);
            auto [e, r] = co_await s.async_acquire(n, timeout,
                                                   asio::bind_cancellation_slot(bc->sig.slot(), zksim::use_tuple));
            bc->ended = true;
            trigger.cancel();
            fired = bc->fired;
            if (zksim::judge_cancel(o.cancels, *bc, e, r.has_value(), o.now_s())) {
                o.pending.erase(id);
                continue;
            }
            ec = e;
            g = std::move(r);
        }
        o.pending.erase(id);
        o.longest_past = std::max(o.longest_past, o.now_ns() - deadline);
        if (ec) {
            // Transient failures are waited through until the deadline (sem_take): nothing else
            // fails here before it.
            if (!fired && o.now_ns() < deadline && !o.closing && o.early_failure.empty())
                o.early_failure = fmt::format("an acquisition of {} leases by p{} begun at {:.6f} s failed at {:.6f} s, "
                                              "before its deadline {:.6f} s: {} (step {})",
                                              n, process, static_cast<double>(began) / 1e9, o.now_s(),
                                              static_cast<double>(deadline) / 1e9, ec.message(), step_now());
            ++o.failed;
            ++o.failures[ec.message()];
            o.note(process, "acquisition failed: " + ec.message());
            continue;
        }
        if (!g) {
            ++o.timeouts;
            continue;
        }
        co_await sem_hold(o, sc, process, n, *g, ended_before, rng);
    }
    ++o.tasks_done;
}

std::string run_sem_seed(std::uint64_t seed, const sem_scenario& sc, zksim::sweep_totals& sum)
{
    zksim::sim_reset(seed);
    sem_observed o;
    o.t0 = zksim::sim_now();
    auto f = sc.faults;
    f.replicas = sc.replicas;
    zksim::redis_sim server(sem_port, f);
    server.world.broken_sem_leases = sc.broken_leases;
    server.world.broken_sem_order = sc.broken_order;
    server.world.broken_sem_release = sc.broken_release;
    asio::io_context ioc;
    std::vector<std::unique_ptr<zkcoro::redis_client>> clients;
    std::vector<std::unique_ptr<zkcoro::redis_semaphore>> sems;
    for (int p = 0; p < sc.processes; ++p) {
        zkcoro::redis_options opts;
        opts.first_connect_wait = 30s;  // a refused first connect is tried again
        opts.replica_acks = sc.replica_acks;
        opts.log = [&o, p](zkcoro::log_level l, std::string_view m) {
            o.note(p, fmt::format("{}: {}", zkcoro::to_string(l), m));
        };
        clients.push_back(std::make_unique<zkcoro::redis_client>(ioc.get_executor(), server.url(), opts));
        zkcoro::redis_semaphore_options so;
        so.ttl = sc.ttl;  // the waiter timeout too
        sems.push_back(std::make_unique<zkcoro::redis_semaphore>(*clients.back(), sem_key, sc.max_leases, so));
    }
    const int all = sc.processes * sc.tasks;
    for (int p = 0; p < sc.processes; ++p)
        for (int t = 0; t < sc.tasks; ++t)
            asio::co_spawn(ioc,
                           sem_task(*sems[static_cast<std::size_t>(p)], o, p,
                                    seed * 1000 + static_cast<std::uint64_t>(p * 10 + t), sc),
                           asio::detached);
    auto& w = server.world;
    // After every step: the leases within the count, the server's order, no acquisition past its
    // deadline + R_S.
    const bool finished = zksim::run_until(ioc, [&] {
        if (o.inside > sc.max_leases && o.overs == 0 && sc.count_promised) {
            ++o.overs;
            o.first_over = fmt::format("{} leases held by guards not told they lost them at {:.6f} s (step {})",
                                       o.inside, o.now_s(), step_now());
        }
        o.check_late("an acquisition", "R_S", sem_liveness_bound);
        if (sc.quiet_grant.count() > 0)
            o.check_quiet("no lease held", sc.quiet_grant);
        const bool broke = (o.overs > 0 && sc.count_promised) || !o.late.empty() || !o.stalled.empty() ||
                           (sc.fifo && !w.sem_fifo_break.empty()) ||
                           (sc.count_promised && sc.server_count && !w.sem_over.empty());
        return o.tasks_done == all || broke ||
               (sc.close_early.count() > 0 && o.now_ns() >= std::chrono::nanoseconds(sc.close_early).count());
    }, 600s) && (o.tasks_done == all || sc.close_early.count() > 0);
    const auto broke_at = step_now();
    // The end: the faults stop, the clients close; once a TTL and 1 s have passed (the scripts'
    // tidy: every key expires 1 s after the last lease or waiter timeout in it), nothing may be
    // left but the counter.
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
    zksim::run_until(ioc, [] { return false; }, sc.ttl + 1010ms);
    std::string left;
    server.sync_clock();
    for (auto& [k, v] : w.live_keys())
        if (k != sem_fence)
            left += fmt::format(" {}={}", k, v);
    sems.clear();
    clients.clear();
    for (int i = 0; i < 1000 && ioc.poll() > 0; ++i) {
    }

    sum.counts["granted"] += o.granted;
    for (auto& [n, c] : o.granted_by_n)
        sum.counts[fmt::format("granted: {} leases", n)] += c;
    sum.counts["timed out"] += o.timeouts;
    sum.counts["failed"] += o.failed;
    sum.counts["guards lost"] += o.losses;
    sum.counts["granted already lost"] += o.granted_lost;
    for (auto& [what, n] : o.failures)
        sum.counts["failed: " + what] += n;
    sum.counts["redis connections dropped"] += server.counts.drops;
    sum.counts["redis replies delayed"] += server.counts.delayed;
    sum.counts["redis pauses"] += server.counts.pauses;
    sum.counts["redis commands"] += w.commands;
    if (sc.replicas > 0) {
        sum.counts["redis failovers"] += server.counts.failovers;
        sum.counts["redis writes lost in failovers"] += server.counts.lost_writes;
    }
    const auto& order = w.sem_orders[sem_queue];
    sum.counts["sem: arrivals"] += order.arrived;
    sum.counts["sem: grants"] += order.granted;
    sum.counts["sem: grants past an earlier waiter whose leases were kept"] += order.passed;
    sum.counts["sem: waiters departed (timeout passed, or keys expired)"] += order.departed;
    sum.counts["sem: waiters that left (deadline, cancellation, failure)"] += order.left;
    if (!sc.count_promised)
        sum.counts["grants beyond the count (not promised here)"] += o.overs;
    sum.most("s past a deadline at most", static_cast<double>(o.longest_past) / 1e9);
    sum.mix(static_cast<std::uint64_t>(close_began));
    sum.mix(static_cast<std::uint64_t>(w.commands));
    sum.mix(static_cast<std::uint64_t>(o.granted));
    sum.mix(static_cast<std::uint64_t>(o.tokens.empty() ? 0 : *o.tokens.rbegin()));
    std::string why;
    if (sc.cancel)
        why += zksim::cancel_verdict(o.cancels, sum);
    if (o.overs > 0 && sc.count_promised)
        why += " the count: " + o.first_over + ";";
    if (sc.count_promised && sc.server_count && !w.sem_over.empty())
        why += fmt::format(" server (step {}): {};", broke_at, w.sem_over);
    if (sc.fifo && !w.sem_fifo_break.empty())
        why += fmt::format(" FIFO (step {}): {};", broke_at, w.sem_fifo_break);
    if (sc.strict_fifo && order.departed + order.left > 0)
        why += fmt::format(" FIFO: queued acquisitions departed before their grant ({} departed, {} left);",
                           order.departed, order.left);
    if (o.token_drops > 0 && sc.count_promised)
        why += fmt::format(" {} fencing tokens broke (the first: {});", o.token_drops, o.first_drop);
    if (!w.token_drop.empty())
        why += " server: " + w.token_drop + ";";
    if (!o.early_failure.empty())
        why += " " + o.early_failure + ";";
    if (!o.late.empty())
        why += " liveness: " + o.late + ";";
    if (!o.stalled.empty())
        why += " liveness: " + o.stalled + ";";
    if (!finished && why.empty())
        why += fmt::format(" only {} of {} tasks done within 600 s of simulated time;", o.tasks_done, all);
    if (!closed)
        why += fmt::format(" the clients did not close within 30 s ({} connections open);", server.open_connections());
    if (!left.empty())
        why += " keys left once the clients closed and a TTL + 1 s passed:" + left + ";";
    const bool faults = sc.faults.drops_per_s > 0 || sc.faults.drop_on_request > 0 || sc.faults.refuse_connect > 0 ||
                        sc.faults.pauses_per_s > 0 || sc.faults.delay_chance > 0 || sc.faults.failovers_per_s > 0;
    if (!faults && !sc.cancel && sc.close_early.count() == 0 && (o.failed > 0 || o.timeouts > 0 || o.losses > 0))
        why += fmt::format(" without faults: {} failed, {} timed out, {} lost;", o.failed, o.timeouts, o.losses);
    if (o.granted == 0 && !sc.cancel)
        why += " nothing acquired;";
    if (!why.empty())
        return fmt::format("seed {}:{}\n  the last lines:{}", seed, why, o.last_lines());
    return {};
}

zksim::sweep_totals sem_sweep(const char* name, const char* env, std::vector<std::uint64_t> defaults,
                              const sem_scenario& sc, bool control = false)
{
    (void)zkcoro::detail::process_name();  // drawn before any seed (test_sim_redis.cpp's sweep)
    return zksim::sweep(name, env, zksim::seeds_of(env, std::move(defaults)),
                        [&](std::uint64_t seed, zksim::sweep_totals& sum) { return run_sem_seed(seed, sc, sum); },
                        control);
}

// The Redis fault case's faults (test_sim_redis.cpp, with_faults).
sem_scenario sem_with_faults()
{
    sem_scenario sc;
    sc.faults.drops_per_s = 0.3;
    sc.faults.drop_on_request = 0.01;
    sc.faults.refuse_connect = 0.1;
    sc.faults.delay_chance = 0.02;
    sc.faults.max_delay_ms = 400;  // below the guard's loss deadline (TTL 600 ms - margin 120 ms)
    sc.faults.script_flushes_per_s = 0.05;
    sc.faults.pauses_per_s = 0.1;
    sc.faults.max_pause_ms = 1500;
    return sc;
}

sem_scenario sem_with_failovers(bool acknowledged)
{
    auto sc = sem_with_faults();
    sc.fifo = false;  // a failover loses queue entries: they queue again
    sc.replicas = 1;
    sc.replica_acks = acknowledged ? 1 : 0;
    sc.count_promised = acknowledged;
    sc.faults.replica_lag_ms = 300;
    sc.faults.failovers_per_s = 0.2;
    return sc;
}

}  // namespace

TEST_CASE("sim redis semaphore: 4 processes acquiring 1-3 of 3 leases, no faults: every acquisition granted, in order, "
          "W 200 ms")
{
    sem_scenario sc;
    sc.strict_fifo = true;
    sc.quiet_grant = std::chrono::milliseconds(200);
    sc.min_deadline_ms = sc.max_deadline_ms = 60'000;  // each acquisition waits its turn
    const auto sum = sem_sweep("sim redis semaphore", "ZKCORO_SIM_REDIS_SEM_SEEDS", zksim::first_seeds(2, 1), sc);
    CHECK(sum.broke == 0);
    CHECK(sum["granted"] == static_cast<long>(sum.seeds_run) * sc.processes * sc.tasks * sc.rounds);
    CHECK(sum["sem: grants"] == sum["sem: arrivals"]);
}

TEST_CASE("sim redis semaphore: with faults: the count, the order, tokens rising, R_S, nothing left")
{
    const auto sc = sem_with_faults();
    const auto sum = sem_sweep("sim redis semaphore with faults", "ZKCORO_SIM_REDIS_SEM_FAULT_SEEDS",
                               zksim::first_seeds(3, 2), sc);
    CHECK(sum.broke == 0);
    CHECK(sum["granted"] > 0);
}

TEST_CASE("sim redis semaphore: cancellations with faults")
{
    auto sc = sem_with_faults();
    sc.cancel = true;
    const auto sum = sem_sweep("sim redis semaphore cancellations with faults", "ZKCORO_SIM_REDIS_SEM_CANCEL_SEEDS",
                               zksim::first_seeds(3, 2), sc);
    CHECK(sum.broke == 0);
    CHECK(sum["cancelled"] > 0);
}

TEST_CASE("sim redis semaphore: failovers, grants and renewals acknowledged by WAIT: the count, tokens rising")
{
    const auto sc = sem_with_failovers(true);
    const auto sum = sem_sweep("sim redis semaphore with failovers, acknowledged", "ZKCORO_SIM_REDIS_SEM_FAILOVER_SEEDS",
                               zksim::first_seeds(1, 1), sc);
    CHECK(sum.broke == 0);
    CHECK(sum["granted"] > 0);
    CHECK(sum["redis failovers"] > 0);
}

TEST_CASE("sim redis semaphore: failovers without acknowledgement: tokens still rise, grants beyond the count counted")
{
    const auto sc = sem_with_failovers(false);
    const auto sum = sem_sweep("sim redis semaphore with failovers, unacknowledged", "ZKCORO_SIM_REDIS_SEM_UNACKED_SEEDS",
                               zksim::first_seeds(1, 1), sc);
    CHECK(sum.broke == 0);
    CHECK(sum["granted"] > 0);
}

TEST_CASE("sim redis semaphore: late replies, delayed up to 1.5 s (past the loss deadline)")
{
    auto sc = sem_with_faults();
    sc.faults.max_delay_ms = 1500;
    const auto sum = sem_sweep("sim redis semaphore with late replies", "ZKCORO_SIM_REDIS_SEM_LATE_SEEDS",
                               zksim::first_seeds(1, 1), sc);
    CHECK(sum.broke == 0);
}

// Every client closes at 4 s with acquisitions queued (60 s deadlines): nothing of theirs may
// outlive the waiter timeout + 1 s.
TEST_CASE("sim redis semaphore: clients closed while acquisitions wait: nothing left")
{
    auto sc = sem_with_faults();
    sc.min_deadline_ms = sc.max_deadline_ms = 60'000;
    sc.close_early = std::chrono::milliseconds(4000);
    const auto sum = sem_sweep("sim redis semaphore closed while waiting", "ZKCORO_SIM_REDIS_SEM_CLOSE_SEEDS",
                               zksim::first_seeds(2, 1), sc);
    CHECK(sum.broke == 0);
    CHECK(sum["granted"] > 0);
}

TEST_CASE("sim redis semaphore negative control: an acquire script that counts no lease as held is caught")
{
    sem_scenario sc;
    sc.broken_leases = true;
    sc.server_count = false;
    sc.fifo = false;  // (its check would see the leases beyond the count first)
    sc.min_deadline_ms = sc.max_deadline_ms = 60'000;
    const auto sum = sem_sweep("sim redis semaphore control (leases held not counted)",
                               "ZKCORO_SIM_REDIS_SEM_CONTROL_SEEDS", zksim::first_seeds(2, 1), sc, true);
    CHECK(sum.broke == static_cast<int>(sum.seeds_run));
}

TEST_CASE("sim redis semaphore negative control: an acquire script that lets a later acquisition pass is caught")
{
    sem_scenario sc;
    sc.strict_fifo = true;
    sc.broken_order = true;
    sc.min_deadline_ms = sc.max_deadline_ms = 60'000;
    const auto sum = sem_sweep("sim redis semaphore control (no queue order)", "ZKCORO_SIM_REDIS_SEM_CONTROL_SEEDS",
                               zksim::first_seeds(2, 1), sc, true);
    CHECK(sum.broke == static_cast<int>(sum.seeds_run));
}

TEST_CASE("sim redis semaphore negative control: a release script that frees nothing is caught by W")
{
    sem_scenario sc;
    sc.broken_release = true;
    sc.quiet_grant = std::chrono::milliseconds(200);
    sc.min_deadline_ms = sc.max_deadline_ms = 60'000;
    const auto sum = sem_sweep("sim redis semaphore control (a release that frees nothing)",
                               "ZKCORO_SIM_REDIS_SEM_CONTROL_SEEDS", zksim::first_seeds(2, 1), sc, true);
    CHECK(sum.broke == static_cast<int>(sum.seeds_run));
}
