// Latency and throughput of zkcoro's lock recipes against a loopback ZooKeeper server. The
// workloads are defined alike for every implementation compared by bench/run.sh (letters as in
// the benchmark issue):
//
//   uncontended      a. one task, one mutex: N acquire + release cycles, one at a time, after a
//                    warm-up: p50/p99 per cycle and the process CPU per cycle.
//   demo             b. T tasks in this process on one client and ONE mutex object (like
//                    examples/02_mutex_demo), K acquisitions each, decrementing a shared counter
//                    inside the lock; in-process handoff on (the default).
//   demo_per_task    b. the same with one mutex object per task (no handoff between objects:
//                    every task queues in ZooKeeper with a node of its own).
//   demo_no_handoff  b. one object, mutex_options::local_handoff = false.
//   uncontended_linger  a with mutex_options::linger = --linger-ms (default 10) and a 1 ms pause
//                    (not measured) between cycles: a process that takes a lock in bursts.
//   cross_process    c. --cross-tasks tasks (default 1) on --path from --start-at-ms for
//                    --duration-ms, each hold --hold-ms long (default 0), the mutex with
//                    --linger-ms; prints a PART line (p50/p99: the wait for the lock).
//                    bench/run.sh starts several such processes at once and adds them up.
//   many_locks       d. --paths mutex objects (one per path), --many-tasks tasks, each cycle on a
//                    uniformly random path, for --duration-ms.
//   read_write       e. 8 reader and 2 writer tasks on one shared_mutex for --duration-ms.
//   semaphore        10 tasks, 3 leases, acquire + release for --duration-ms.
//   scale            f. --scale-tasks tasks wait on --scale-locks locks held by another session,
//                    all on this thread: RSS growth per waiting task, then the time from the
//                    holders' release until every task has been granted (and released).
//
// The checks: the demo counter reaches exactly 0; no two tasks are ever inside one lock at once
// (each task yields to the others while inside), no writer with a reader; fencing tokens strictly
// increase in the demo; any violation makes the exit status non-zero. Each workload also prints
// the library's own metrics of its lock objects (zkcoro::lock_metrics).
//
// Every loop is bounded in count and by an overall time limit (lock waits use the time left as
// their timeout), enforced at last by a watchdog thread. Nodes live under
// /zkcoro-bench/lock-<pid>-<workload> and are deleted afterwards.
#include "bench_common.hpp"

#include <zkcoro/semaphore.hpp>
#include <zkcoro/shared_mutex.hpp>
#include <zkcoro/client.hpp>
#include <zkcoro/guard.hpp>
#include <zkcoro/metrics.hpp>
#include <zkcoro/mutex.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fmt/format.h>

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <set>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using zkbench::bench_error;
using zkbench::check_deadline;
using zkbench::clock_type;
using zkbench::g_deadline;
using zkbench::task_group;
using zkbench::time_left;

constexpr const char* program = "zkcoro-lock-bench";

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// ---------------------------------------------------------------------------------------------
// Options

constexpr std::string_view all_workloads[] = {"uncontended", "uncontended_linger", "demo",       "demo_per_task",
                                              "demo_no_handoff", "many_locks",      "read_write", "semaphore",
                                              "scale"};

struct options {
    std::string connect;
    long cycles = 2000;     // uncontended: measured cycles
    long warmup = 0;        // uncontended: unmeasured cycles first (default: cycles / 10 in [5, 200])
    long tasks = 100;       // demo: tasks
    long per_task = 20;     // demo: acquisitions per task
    long duration_ms = 10000;  // cross_process, many_locks, read_write, semaphore: run time
    long paths = 1000;      // many_locks: lock paths
    long many_tasks = 50;   // many_locks: tasks
    long scale_tasks = 100000;  // scale: waiting tasks
    long scale_locks = 1000;    // scale: locks they wait on
    long time_limit = 300;  // seconds, for the whole run
    std::set<std::string, std::less<>> workloads;  // which to run
    // cross_process
    std::string path;
    long start_at_ms = 0;  // wall clock, ms since the epoch; 0: at once
    std::string id = "zkcoro";
    long cross_tasks = 1;  // tasks on the one mutex object
    long hold_ms = 0;      // per hold
    long linger_ms = -1;   // mutex_options::linger (-1: 0 for cross_process, 10 for uncontended_linger)
    long batch_time_ms = -1;  // cross_process: mutex_options::handoff_batch_time (-1: the default)

    bool runs(std::string_view w) const { return workloads.count(w) != 0; }
};

options parse_options(int argc, char** argv)
{
    options o;
    CLI::App app{"Latency and throughput of zkcoro's lock recipes against a loopback ZooKeeper server.", program};
    app.footer("cross_process, one of several processes on one lock (bench/run.sh starts them):\n"
               "  zkcoro-lock-bench --workloads cross_process --path /zkcoro-bench/x [--start-at-ms EPOCH_MS]\n"
               "                    [--duration-ms MS] [--id NAME] [--connect HOST:PORT]");
    zkbench::add_shared_options(app, o.connect, zkbench::bracketed_ipv4::reject);
    std::vector<std::string> known(std::begin(all_workloads), std::end(all_workloads));
    known.emplace_back("cross_process");
    std::vector<std::string> list;
    auto* workloads = app.add_option("--workloads", list,
                                     "Comma-separated, from uncontended, uncontended_linger, demo, demo_per_task,\ndemo_no_handoff, "
                                     "many_locks, read_write, semaphore, scale (default: all of them), or\n"
                                     "cross_process alone")
                          ->type_name("LIST")
                          ->delimiter(',')
                          ->allow_extra_args(false)  // one LIST per --workloads: no spaces between names
                          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)  // a repeated one adds to it
                          ->check(CLI::IsMember(known).description(""));
    using zkbench::add_integer;
    add_integer(app, "--cycles", o.cycles, 1, 10'000'000, "N", "Uncontended: acquire+release cycles measured");
    auto* warmup = add_integer(app, "--warmup", o.warmup, 0, 10'000'000, "N", "Uncontended: cycles before measuring",
                               "cycles/10, in [5, 200]");
    add_integer(app, "--tasks", o.tasks, 1, 100'000, "T", "Demo: tasks");
    add_integer(app, "--per-task", o.per_task, 1, 10'000'000, "K", "Demo: acquisitions per task");
    add_integer(app, "--duration-ms", o.duration_ms, 10, 600'000, "MS",
                "cross_process, many_locks, read_write, semaphore: run time");
    add_integer(app, "--paths", o.paths, 1, 100'000, "P", "many_locks: lock paths");
    add_integer(app, "--many-tasks", o.many_tasks, 1, 100'000, "T", "many_locks: tasks");
    add_integer(app, "--scale-tasks", o.scale_tasks, 1, 10'000'000, "N", "scale: waiting tasks");
    add_integer(app, "--scale-locks", o.scale_locks, 1, 100'000, "L", "scale: locks they wait on");
    app.add_option("--path", o.path, "cross_process: the lock path shared with the other processes (required)")
        ->type_name("PATH");
    add_integer(app, "--start-at-ms", o.start_at_ms, 0, 100'000'000'000'000, "EPOCH_MS",
                "cross_process: start time, ms since the epoch; 0: at once");
    add_integer(app, "--cross-tasks", o.cross_tasks, 1, 1000, "T", "cross_process: tasks on the one mutex object");
    add_integer(app, "--hold-ms", o.hold_ms, 0, 60'000, "MS", "cross_process: hold time per acquisition");
    add_integer(app, "--linger-ms", o.linger_ms, 0, 60'000, "MS",
                "cross_process, uncontended_linger: mutex_options::linger", "0; uncontended_linger: 10");
    add_integer(app, "--batch-time-ms", o.batch_time_ms, 0, 60'000, "MS",
                "cross_process: mutex_options::handoff_batch_time (0: the count of 63 alone)", "the library's");
    // The id becomes a field of the PART line, which bench/run.sh splits at spaces and '='.
    app.add_option("--id", o.id, fmt::format("cross_process: a name for the PART line (default {})", o.id))
        ->type_name("NAME")
        ->check(CLI::Validator(
            [](std::string& v) -> std::string {
                if (v.empty() || v.find_first_of(" \t\n=") != std::string::npos)
                    return fmt::format("expected a non-empty name without spaces or '=', got \"{}\"", v);
                return {};
            },
            "", "name"));
    add_integer(app, "--time-limit", o.time_limit, 1, 86'400, "SECONDS",
                "Overall limit; exceeding it is an error");
    zkbench::parse_command_line(app, argc, argv);

    if (o.tasks * o.per_task > 100'000'000)
        throw bench_error("--tasks x --per-task: at most 100000000 acquisitions");
    if (warmup->count() == 0)
        o.warmup = std::clamp<long>(o.cycles / 10, 5, 200);
    if (workloads->count() == 0)
        o.workloads.insert(std::begin(all_workloads), std::end(all_workloads));
    else
        o.workloads.insert(list.begin(), list.end());
    if (o.runs("cross_process")) {
        if (o.workloads.size() != 1)
            throw bench_error("--workloads: cross_process runs alone");
        if (o.path.empty() || o.path.front() != '/')
            throw bench_error("cross_process: --path /absolute/lock/path is required");
    } else if (!o.path.empty()) {
        throw bench_error("--path is for the cross_process workload only");
    }
    return o;
}

// ---------------------------------------------------------------------------------------------
// Time limit


// Sums b into a (histograms merged).
void add_metrics(zkcoro::lock_metrics& a, const zkcoro::lock_metrics& b)
{
    a.acquires += b.acquires;
    a.timeouts += b.timeouts;
    a.cancellations += b.cancellations;
    a.errors += b.errors;
    a.losses += b.losses;
    a.local_handoffs += b.local_handoffs;
    a.release_failures += b.release_failures;
    a.wait.merge(b.wait);
}

struct workload_result {
    std::string name;
    zkbench::latencies lat;  // uncontended: per cycle; demo: per acquisition, acquire() call to grant
    double seconds = 0;   // wall time of the measured part
    long ops = 0;         // cycles or acquisitions
    std::uint64_t requests = 0;  // sent to ZooKeeper during the measured part
    double cpu_us = 0;    // process CPU time during the measured part
    zkcoro::lock_metrics metrics;  // of the workload's lock objects
    bool has_metrics = false;
    std::string extra;    // more RESULT fields (" key=value ...")
    double requests_per_op() const { return ops > 0 ? static_cast<double>(requests) / static_cast<double>(ops) : 0; }
    double ops_per_s() const { return seconds > 0 ? static_cast<double>(ops) / seconds : 0; }
    double cpu_per_op() const { return ops > 0 ? cpu_us / static_cast<double>(ops) : 0; }
    // demo only
    long tasks = 0, per_task = 0;
    long counter_end = 0;
    int max_inside = 0;
    long token_regressions = 0;
    bool ok = true;
    std::string failure;

    void fail(const std::string& why) { failure += (failure.empty() ? "" : "; ") + why; ok = false; }
};

// Measures the wall time, CPU time and requests of a workload's measured part.
struct measure {
    measure(zkcoro::client& zk, workload_result& r) : zk_(zk), r_(r), requests0_(zk.stats().requests) {}
    void stop()
    {
        r_.seconds = std::chrono::duration<double>(clock_type::now() - t0_).count();
        r_.cpu_us = zkbench::cpu_us() - cpu0_;
        r_.requests = zk_.stats().requests - requests0_;
    }

private:
    zkcoro::client& zk_;
    workload_result& r_;
    std::uint64_t requests0_;
    double cpu0_ = zkbench::cpu_us();
    clock_type::time_point t0_ = clock_type::now();
};


// ---------------------------------------------------------------------------------------------
// ZooKeeper helpers

std::string lock_path(std::string_view workload)
{
    return fmt::format("/zkcoro-bench/lock-{}-{}", ::getpid(), workload);
}

// Deletes `path` and its children (lock nodes left behind by a failure); then the common root
// unless another run still uses it. Reports, never throws.
asio::awaitable<void> remove_tree(zkcoro::client& zk, std::string path)
{
    auto [lec, listed] = co_await zk.async_get_children(path, use_tuple);
    if (!lec) {
        for (const auto& child : listed.children) {
            std::string child_path = path + "/" + child;
            auto [cec] = co_await zk.async_remove(child_path, -1, use_tuple);
            if (cec && cec != zkcoro::zk_errc::no_node)
                std::fprintf(stderr, "warning: deleting %s: %s\n", child_path.c_str(), cec.message().c_str());
        }
    }
    auto [ec] = co_await zk.async_remove(path, -1, use_tuple);
    if (ec && ec != zkcoro::zk_errc::no_node)
        std::fprintf(stderr, "warning: deleting %s: %s\n", path.c_str(), ec.message().c_str());
    std::string root = "/zkcoro-bench";
    auto [rec] = co_await zk.async_remove(root, -1, use_tuple);
    if (rec && rec != zkcoro::zk_errc::no_node && rec != zkcoro::zk_errc::not_empty)
        std::fprintf(stderr, "warning: deleting %s: %s\n", root.c_str(), rec.message().c_str());
}

// ---------------------------------------------------------------------------------------------
// a. uncontended

asio::awaitable<void> uncontended(zkcoro::client& zk, const options& o, workload_result& res)
{
    res.name = "uncontended";
    zkcoro::mutex m(zk, lock_path(res.name));
    res.lat.ns.reserve(static_cast<std::size_t>(o.cycles));
    auto one_cycle = [&m]() -> asio::awaitable<void> {
        auto g = co_await m.acquire(time_left());
        if (!g)
            throw bench_error("uncontended: acquire timed out (time limit)");
        co_await g->release();
    };
    for (long i = 0; i < o.warmup; ++i) {
        check_deadline("warming up (uncontended)");
        co_await one_cycle();
    }
    measure mt(zk, res);
    for (long i = 0; i < o.cycles; ++i) {
        check_deadline("measuring uncontended cycles");
        auto t0 = clock_type::now();
        co_await one_cycle();
        res.lat.add(clock_type::now() - t0);
    }
    mt.stop();
    res.ops = static_cast<long>(res.lat.ns.size());
    res.metrics = m.metrics();
    res.has_metrics = true;
}

// a with lingering: the node stays between bursts, so a cycle needs no request (a 1 ms pause,
// not measured, between cycles).
asio::awaitable<void> uncontended_linger(zkcoro::client& zk, const options& o, workload_result& res)
{
    auto ex = co_await asio::this_coro::executor;
    res.name = "uncontended_linger";
    zkcoro::mutex_options mo;
    mo.linger = std::chrono::milliseconds(o.linger_ms < 0 ? 10 : o.linger_ms);
    zkcoro::mutex m(zk, lock_path(res.name), mo);
    res.lat.ns.reserve(static_cast<std::size_t>(o.cycles));
    asio::steady_timer pause(ex);
    auto one_cycle = [&m]() -> asio::awaitable<void> {
        auto g = co_await m.acquire(time_left());
        if (!g)
            throw bench_error("uncontended_linger: acquire timed out (time limit)");
        co_await g->release();
    };
    for (long i = 0; i < o.warmup; ++i) {
        check_deadline("warming up (uncontended_linger)");
        co_await one_cycle();
    }
    double paused_s = 0;
    measure mt(zk, res);
    for (long i = 0; i < o.cycles; ++i) {
        check_deadline("measuring uncontended_linger cycles");
        auto t0 = clock_type::now();
        co_await one_cycle();
        auto t1 = clock_type::now();
        res.lat.add(t1 - t0);
        pause.expires_after(1ms);
        co_await pause.async_wait(asio::use_awaitable);
        paused_s += std::chrono::duration<double>(clock_type::now() - t1).count();
    }
    mt.stop();
    res.seconds = std::max(res.seconds - paused_s, 1e-9);  // ops/s of the cycles, pauses left out
    res.ops = static_cast<long>(res.lat.ns.size());
    res.metrics = m.metrics();
    res.has_metrics = true;
    res.extra = fmt::format(" linger_ms={} linger_grants={}", mo.linger.count(), res.metrics.linger_grants);
}

// ---------------------------------------------------------------------------------------------
// b. demo

enum class demo_mode { shared, per_task, no_handoff };

// Shared by the demo's tasks; kept alive by each of them.
struct demo_state : task_group {
    using task_group::task_group;
    std::vector<std::unique_ptr<zkcoro::mutex>> locks;  // one, or one per task
    long counter = 0;
    int inside = 0, max_inside = 0;
    std::int64_t last_token = 0;
    long token_regressions = 0;
    long acquisitions = 0;
    zkbench::latencies waits;
};

// The demo in progress, if any: after a failure its tasks may outlive demo(); the client waits
// for them before it goes.
std::weak_ptr<demo_state> g_live_demo;

asio::awaitable<void> demo_task(std::shared_ptr<demo_state> st, zkcoro::mutex& lock, long per_task)
{
    auto ex = co_await asio::this_coro::executor;
    try {
        for (long i = 0; i < per_task; ++i) {
            if (!st->first_error.empty())
                break;  // another task failed: stop early
            check_deadline("running the demo");
            auto t0 = clock_type::now();
            auto g = co_await lock.acquire(time_left());
            if (!g)
                throw bench_error("demo: acquire timed out (time limit)");
            st->waits.add(clock_type::now() - t0);
            ++st->acquisitions;
            // The critical section. It yields once, so that any other task that (wrongly) also
            // held the lock would run in the middle of it and be seen.
            ++st->inside;
            st->max_inside = std::max(st->max_inside, st->inside);
            if (g->fencing_token() <= st->last_token)
                ++st->token_regressions;
            st->last_token = std::max(st->last_token, g->fencing_token());
            long before = st->counter;
            co_await asio::post(ex, asio::use_awaitable);
            st->counter = before - 1;
            --st->inside;
            co_await g->release();
        }
    } catch (const std::exception& e) {
        st->error(e.what());
    }
    st->task_done();
}

asio::awaitable<void> demo(zkcoro::client& zk, const options& o, demo_mode mode, workload_result& res)
{
    auto ex = co_await asio::this_coro::executor;
    res.name = mode == demo_mode::shared ? "demo" : mode == demo_mode::per_task ? "demo_per_task" : "demo_no_handoff";
    res.tasks = o.tasks;
    res.per_task = o.per_task;
    const long total = o.tasks * o.per_task;

    auto st = std::make_shared<demo_state>(ex);
    zkcoro::mutex_options mo;
    mo.local_handoff = mode != demo_mode::no_handoff;
    long objects = mode == demo_mode::per_task ? o.tasks : 1;
    for (long i = 0; i < objects; ++i)
        st->locks.push_back(std::make_unique<zkcoro::mutex>(zk, lock_path(res.name), mo));
    st->counter = total;
    st->tasks = o.tasks;
    g_live_demo = st;
    st->waits.ns.reserve(static_cast<std::size_t>(total));

    measure mt(zk, res);
    for (long t = 0; t < o.tasks; ++t)
        asio::co_spawn(ex, demo_task(st, *st->locks[static_cast<std::size_t>(t % objects)], o.per_task),
                       asio::detached);
    co_await st->wait(res.name);  // on failure the remaining tasks are left to the client's close
    mt.stop();

    res.ops = st->acquisitions;
    res.lat = std::move(st->waits);
    res.counter_end = st->counter;
    res.max_inside = st->max_inside;
    res.token_regressions = st->token_regressions;
    for (auto& l : st->locks)
        add_metrics(res.metrics, l->metrics());
    res.has_metrics = true;
    st->locks.clear();

    if (!st->first_error.empty())
        res.fail(st->first_error);
    if (res.ops != total)
        res.fail(fmt::format("{} acquisitions of {}", res.ops, total));
    if (res.counter_end != 0)
        res.fail(fmt::format("counter ended at {}, expected 0", res.counter_end));
    if (res.max_inside > 1)
        res.fail(fmt::format("{} tasks were inside the lock at once", res.max_inside));
    if (res.token_regressions > 0)
        res.fail(fmt::format("{} fencing tokens did not increase", res.token_regressions));
}

// ---------------------------------------------------------------------------------------------
// c. cross_process: one task of one of several processes

asio::awaitable<void> cross_process(zkcoro::client& zk, const options& o, workload_result& res)
{
    auto ex = co_await asio::this_coro::executor;
    res.name = "cross_process";
    zkcoro::mutex_options mo;
    mo.linger = std::chrono::milliseconds(std::max(o.linger_ms, 0L));
    if (o.batch_time_ms >= 0)
        mo.handoff_batch_time = std::chrono::milliseconds(o.batch_time_ms);
    zkcoro::mutex m(zk, o.path, mo);
    if (o.start_at_ms > 0) {
        auto start = std::chrono::system_clock::time_point(std::chrono::milliseconds(o.start_at_ms));
        auto wait = start - std::chrono::system_clock::now();
        if (wait > std::chrono::minutes(10))
            throw bench_error("--start-at-ms is more than 10 minutes away");
        if (wait > wait.zero()) {
            asio::steady_timer t(ex, std::chrono::duration_cast<clock_type::duration>(wait));
            co_await t.async_wait(asio::use_awaitable);
        }
    }
    const auto end = clock_type::now() + std::chrono::milliseconds(o.duration_ms);
    measure mt(zk, res);
    auto group = std::make_shared<task_group>(ex);
    group->tasks = o.cross_tasks;
    for (long t = 0; t < o.cross_tasks; ++t)
        asio::co_spawn(ex, [&, group]() -> asio::awaitable<void> {
            asio::steady_timer hold(co_await asio::this_coro::executor);
            try {
                for (long i = 0; i < 100'000'000 && clock_type::now() < end && group->first_error.empty(); ++i) {
                    check_deadline("running cross_process");
                    auto t0 = clock_type::now();
                    auto g = co_await m.acquire(time_left());
                    if (!g)
                        throw bench_error("cross_process: acquire timed out (time limit)");
                    res.lat.add(clock_type::now() - t0);
                    ++res.ops;
                    if (o.hold_ms > 0) {
                        hold.expires_after(std::chrono::milliseconds(o.hold_ms));
                        co_await hold.async_wait(asio::use_awaitable);
                    }
                    co_await g->release();
                }
            } catch (const std::exception& e) {
                group->error(e.what());
            }
            group->task_done();
        }, asio::detached);
    co_await group->wait("cross_process");
    mt.stop();
    if (!group->first_error.empty())
        throw bench_error(group->first_error);
    res.metrics = m.metrics();
    res.has_metrics = true;
    // The last process to finish removes the lock path (the others find it still in use).
    for (const auto& p : {o.path, std::string("/zkcoro-bench")}) {
        auto [ec] = co_await zk.async_remove(p, -1, use_tuple);
        if (ec && ec != zkcoro::zk_errc::no_node && ec != zkcoro::zk_errc::not_empty)
            std::fprintf(stderr, "warning: deleting %s: %s\n", p.c_str(), ec.message().c_str());
    }
}

// ---------------------------------------------------------------------------------------------
// d. many_locks

struct many_state : task_group {
    using task_group::task_group;
    std::vector<std::unique_ptr<zkcoro::mutex>> locks;
    std::vector<int> inside;  // per lock
    long violations = 0;
    long cycles = 0;
    zkbench::latencies lat;
};

asio::awaitable<void> many_task(std::shared_ptr<many_state> st, unsigned seed, clock_type::time_point end)
{
    auto ex = co_await asio::this_coro::executor;
    std::minstd_rand rng(seed);
    std::uniform_int_distribution<std::size_t> pick(0, st->locks.size() - 1);
    try {
        for (long i = 0; i < 100'000'000 && clock_type::now() < end && st->first_error.empty(); ++i) {
            check_deadline("running many_locks");
            auto k = pick(rng);
            auto t0 = clock_type::now();
            auto g = co_await st->locks[k]->acquire(time_left());
            if (!g)
                throw bench_error("many_locks: acquire timed out (time limit)");
            if (++st->inside[k] > 1)
                ++st->violations;
            co_await asio::post(ex, asio::use_awaitable);
            --st->inside[k];
            co_await g->release();
            st->lat.add(clock_type::now() - t0);
            ++st->cycles;
        }
    } catch (const std::exception& e) {
        st->error(e.what());
    }
    st->task_done();
}

asio::awaitable<void> many_locks(zkcoro::client& zk, const options& o, workload_result& res)
{
    auto ex = co_await asio::this_coro::executor;
    res.name = "many_locks";
    res.tasks = o.many_tasks;
    auto st = std::make_shared<many_state>(ex);
    auto parent = lock_path(res.name);
    for (long i = 0; i < o.paths; ++i)
        st->locks.push_back(std::make_unique<zkcoro::mutex>(zk, fmt::format("{}/p{}", parent, i)));
    st->inside.assign(st->locks.size(), 0);
    st->tasks = o.many_tasks;
    st->lat.ns.reserve(1'000'000);
    measure mt(zk, res);
    auto end = clock_type::now() + std::chrono::milliseconds(o.duration_ms);
    for (long t = 0; t < o.many_tasks; ++t)
        asio::co_spawn(ex, many_task(st, static_cast<unsigned>(t + 1), end), asio::detached);
    co_await st->wait(res.name);
    mt.stop();
    res.ops = st->cycles;
    res.lat = std::move(st->lat);
    for (auto& l : st->locks)
        add_metrics(res.metrics, l->metrics());
    res.has_metrics = true;
    if (!st->first_error.empty())
        res.fail(st->first_error);
    if (st->violations)
        res.fail(fmt::format("{} exclusion violations", st->violations));
}

// ---------------------------------------------------------------------------------------------
// e. read_write, and the semaphore: tasks loop for a fixed time; throughput per kind.

struct mixed_state : task_group {
    using task_group::task_group;
    int readers_inside = 0, writers_inside = 0, leases_inside = 0;
    int max_readers = 0, max_leases = 0;
    long violations = 0;
    long reads = 0, writes = 0, leases = 0;
    zkbench::latencies read_lat, write_lat;
};

asio::awaitable<void> rw_task(std::shared_ptr<mixed_state> st, zkcoro::shared_mutex& rw, bool writer,
                              clock_type::time_point end)
{
    auto ex = co_await asio::this_coro::executor;
    try {
        for (long i = 0; i < 100'000'000 && clock_type::now() < end; ++i) {
            check_deadline("running the read-write workload");
            auto t0 = clock_type::now();
            std::optional<zkcoro::guard> g;
            if (writer)
                g = co_await rw.acquire_write(time_left());
            else
                g = co_await rw.acquire_read(time_left());
            if (!g)
                throw bench_error("read-write: acquire timed out (time limit)");
            if (writer) {
                if (++st->writers_inside > 1 || st->readers_inside > 0)
                    ++st->violations;
            } else {
                st->max_readers = std::max(st->max_readers, ++st->readers_inside);
                if (st->writers_inside > 0)
                    ++st->violations;
            }
            co_await asio::post(ex, asio::use_awaitable);
            (writer ? st->writers_inside : st->readers_inside)--;
            ++(writer ? st->writes : st->reads);
            co_await g->release();
            (writer ? st->write_lat : st->read_lat).add(clock_type::now() - t0);
        }
    } catch (const std::exception& e) {
        st->error(e.what());
    }
    st->task_done();
}

asio::awaitable<void> semaphore_task(std::shared_ptr<mixed_state> st, zkcoro::semaphore& sem, int max_leases,
                                     clock_type::time_point end)
{
    auto ex = co_await asio::this_coro::executor;
    try {
        for (long i = 0; i < 100'000'000 && clock_type::now() < end; ++i) {
            check_deadline("running the semaphore workload");
            auto t0 = clock_type::now();
            auto lease = co_await sem.acquire(1, time_left());
            if (!lease)
                throw bench_error("semaphore: acquire timed out (time limit)");
            st->max_leases = std::max(st->max_leases, ++st->leases_inside);
            if (st->leases_inside > max_leases)
                ++st->violations;
            co_await asio::post(ex, asio::use_awaitable);
            --st->leases_inside;
            ++st->leases;
            co_await lease->front().release();
            st->read_lat.add(clock_type::now() - t0);
        }
    } catch (const std::exception& e) {
        st->error(e.what());
    }
    st->task_done();
}

// 8 readers and 2 writers on one read-write lock for duration_ms.
asio::awaitable<void> read_write(zkcoro::client& zk, const options& o, workload_result& reads, workload_result& writes)
{
    auto ex = co_await asio::this_coro::executor;
    reads.name = "rw_read";
    writes.name = "rw_write";
    auto st = std::make_shared<mixed_state>(ex);
    zkcoro::shared_mutex rw(zk, lock_path("rw"));
    st->tasks = 10;
    measure mt(zk, reads);
    auto end = clock_type::now() + std::chrono::milliseconds(o.duration_ms);
    for (int t = 0; t < 10; ++t)
        asio::co_spawn(ex, rw_task(st, rw, t >= 8, end), asio::detached);
    co_await st->wait("read_write");
    mt.stop();
    writes.seconds = reads.seconds;
    writes.cpu_us = reads.cpu_us;  // shared: per-op CPU is not meaningful per side
    writes.requests = reads.requests;
    reads.ops = st->reads;
    writes.ops = st->writes;
    reads.lat = std::move(st->read_lat);
    writes.lat = std::move(st->write_lat);
    reads.metrics = rw.reader().metrics();
    writes.metrics = rw.writer().metrics();
    reads.has_metrics = writes.has_metrics = true;
    reads.max_inside = st->max_readers;
    for (auto* r : {&reads, &writes}) {
        if (!st->first_error.empty())
            r->fail(st->first_error);
        if (st->violations)
            r->fail(fmt::format("{} exclusion violations", st->violations));
        if (st->writes == 0 || st->reads == 0)
            r->fail("a side never acquired");
    }
}

// 10 tasks, 3 leases, acquire + release for duration_ms.
asio::awaitable<void> semaphore_load(zkcoro::client& zk, const options& o, workload_result& res)
{
    auto ex = co_await asio::this_coro::executor;
    res.name = "semaphore";
    auto st = std::make_shared<mixed_state>(ex);
    zkcoro::semaphore sem(zk, lock_path("semaphore"), 3);
    st->tasks = 10;
    measure mt(zk, res);
    auto end = clock_type::now() + std::chrono::milliseconds(o.duration_ms);
    for (int t = 0; t < 10; ++t)
        asio::co_spawn(ex, semaphore_task(st, sem, 3, end), asio::detached);
    co_await st->wait(res.name);
    mt.stop();
    res.ops = st->leases;
    res.lat = std::move(st->read_lat);  // acquire + release cycles
    res.max_inside = st->max_leases;
    res.metrics = sem.metrics();
    res.has_metrics = true;
    if (!st->first_error.empty())
        res.fail(st->first_error);
    if (st->violations)
        res.fail(fmt::format("{} times more than 3 leases", st->violations));
    if (res.ops == 0)
        res.fail("no lease was acquired");
}

// ---------------------------------------------------------------------------------------------
// f. scale: many waiting tasks on one thread

struct scale_state : task_group {
    using task_group::task_group;
    std::vector<std::unique_ptr<zkcoro::mutex>> locks;
    long started = 0, granted = 0;
    std::vector<int> inside;
    long violations = 0;
};

asio::awaitable<void> scale_task(std::shared_ptr<scale_state> st, std::size_t k)
{
    try {
        ++st->started;
        auto g = co_await st->locks[k]->acquire(time_left());
        if (!g)
            throw bench_error("scale: acquire timed out (time limit)");
        ++st->granted;
        if (++st->inside[k] > 1)
            ++st->violations;
        --st->inside[k];
        co_await g->release();
    } catch (const std::exception& e) {
        st->error(e.what());
    }
    st->task_done();
}

// How many of `paths` have exactly `want` children (lock nodes), asked all at once.
asio::awaitable<long> count_queued(zkcoro::client& zk, const std::vector<std::string>& paths, std::size_t want)
{
    using op_type = decltype(zk.async_get_children(paths.front(), asio::deferred));
    std::vector<op_type> ops;
    ops.reserve(paths.size());
    for (const auto& p : paths)
        ops.push_back(zk.async_get_children(p, asio::deferred));
    auto [order, ecs, lists] = co_await asio::experimental::make_parallel_group(std::move(ops))
                                   .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
    long n = 0;
    for (std::size_t i = 0; i < paths.size(); ++i)
        if (!ecs[i] && lists[i].children.size() == want)
            ++n;
    co_return n;
}

asio::awaitable<void> scale(zkcoro::client& zk, const options& o, workload_result& res)
{
    auto ex = co_await asio::this_coro::executor;
    res.name = "scale";
    res.tasks = o.scale_tasks;
    auto parent = lock_path(res.name);
    std::vector<std::string> paths;
    for (long i = 0; i < o.scale_locks; ++i)
        paths.push_back(fmt::format("{}/p{}", parent, i));

    // Another session holds every lock, so that the tasks have to wait.
    zkcoro::client holder(ex, zkbench::client_config(o.connect));
    co_await holder.async_connect();
    std::vector<std::unique_ptr<zkcoro::mutex>> held_locks;
    std::vector<zkcoro::guard> held;
    for (const auto& p : paths) {
        check_deadline("scale: taking the locks");
        held_locks.push_back(std::make_unique<zkcoro::mutex>(holder, p));
        auto g = co_await held_locks.back()->acquire(time_left());
        if (!g)
            throw bench_error("scale: the holder could not take a lock (time limit)");
        held.push_back(std::move(*g));
    }

    auto st = std::make_shared<scale_state>(ex);
    for (const auto& p : paths)
        st->locks.push_back(std::make_unique<zkcoro::mutex>(zk, p));
    st->inside.assign(st->locks.size(), 0);
    st->tasks = o.scale_tasks;

    // Memory before and once every task waits: each lock's first waiter has its node queued
    // behind the holder's, the others wait in memory behind it.
    const auto rss0 = zkbench::rss_bytes();
    const auto heap0 = ::mallinfo2().uordblks;
    for (long t = 0; t < o.scale_tasks; ++t)
        asio::co_spawn(ex, scale_task(st, static_cast<std::size_t>(t % o.scale_locks)), asio::detached);
    for (long i = 0; i <= o.scale_tasks + 1 && st->started < o.scale_tasks; ++i)
        co_await asio::post(ex, asio::use_awaitable);
    asio::steady_timer pause(ex);
    long queued = 0;
    for (int i = 0; i < 10'000; ++i) {
        check_deadline("scale: waiting for the tasks to queue");
        queued = co_await count_queued(holder, paths, 2);
        if (queued == o.scale_locks)
            break;
        pause.expires_after(10ms);
        co_await pause.async_wait(use_tuple);
    }
    if (queued != o.scale_locks)
        throw bench_error(fmt::format("scale: only {} of {} locks have a waiter queued", queued, o.scale_locks));
    if (st->granted != 0)
        throw bench_error("scale: a task was granted a lock that another session holds");
    const auto rss1 = zkbench::rss_bytes();
    const auto heap1 = ::mallinfo2().uordblks;
    const double per_task = static_cast<double>(rss1 - rss0) / static_cast<double>(o.scale_tasks);
    const double heap_per_task =
        (static_cast<double>(heap1) - static_cast<double>(heap0)) / static_cast<double>(o.scale_tasks);

    // Release every holder lock at once (dropping a guard releases in the background) and time
    // until every task has had its turn.
    measure mt(zk, res);
    held.clear();
    co_await st->wait(res.name);
    mt.stop();
    res.ops = st->granted;
    for (auto& l : st->locks)
        add_metrics(res.metrics, l->metrics());
    res.has_metrics = true;
    res.extra = fmt::format(" rss_per_waiter_bytes={:.0f} heap_per_waiter_bytes={:.0f} grant_all_s={:.3f} waiters={} "
                            "locks={}",
                            per_task, heap_per_task, res.seconds, o.scale_tasks, o.scale_locks);
    fmt::print("scale: {} tasks waiting on {} locks: RSS {:.1f} MiB -> {:.1f} MiB, {:.0f} bytes per waiting task "
               "({:.0f} bytes of heap in use); all granted {:.3f} s after the release\n",
               o.scale_tasks, o.scale_locks, static_cast<double>(rss0) / 1048576.0,
               static_cast<double>(rss1) / 1048576.0, per_task, heap_per_task, res.seconds);
    st->locks.clear();
    held_locks.clear();
    co_await holder.async_close();
    if (!st->first_error.empty())
        res.fail(st->first_error);
    if (st->violations)
        res.fail(fmt::format("{} exclusion violations", st->violations));
    if (res.ops != o.scale_tasks)
        res.fail(fmt::format("{} of {} tasks granted", res.ops, o.scale_tasks));
}

// ---------------------------------------------------------------------------------------------
// The run

struct results {
    std::vector<workload_result> workloads;
    int session_timeout_ms = 0;
};

asio::awaitable<void> run_bench(const options& o, results& out)
{
    auto ex = co_await asio::this_coro::executor;
    zkcoro::client zk(ex, zkbench::client_config(o.connect));

    std::exception_ptr failure;
    std::vector<std::string> used_paths;
    // Runs one workload, keeps its result, and notes its path for cleanup.
    auto run = [&](std::string_view name, auto&& body) -> asio::awaitable<bool> {
        if (!o.runs(name))
            co_return true;
        used_paths.push_back(lock_path(name == "read_write" ? "rw" : name));
        std::vector<workload_result> rs(name == "read_write" ? 2 : 1);
        co_await body(rs);
        bool ok = true;
        for (auto& r : rs) {
            ok = ok && r.ok;
            out.workloads.push_back(std::move(r));
        }
        co_return ok;
    };
    try {
        co_await zk.async_connect();
        out.session_timeout_ms = static_cast<int>(zk.session_timeout().count());
        if (o.runs("cross_process")) {
            workload_result r;
            co_await cross_process(zk, o, r);
            out.workloads.push_back(std::move(r));
        }
        co_await run("uncontended", [&](auto& rs) { return uncontended(zk, o, rs[0]); });
        co_await run("uncontended_linger", [&](auto& rs) { return uncontended_linger(zk, o, rs[0]); });
        // A failed demo leaves tasks behind: stop there (reported; the exit status says it).
        bool ok = co_await run("demo", [&](auto& rs) { return demo(zk, o, demo_mode::shared, rs[0]); });
        if (ok)
            ok = co_await run("demo_per_task", [&](auto& rs) { return demo(zk, o, demo_mode::per_task, rs[0]); });
        if (ok)
            ok = co_await run("demo_no_handoff", [&](auto& rs) { return demo(zk, o, demo_mode::no_handoff, rs[0]); });
        if (ok) {
            co_await run("many_locks", [&](auto& rs) { return many_locks(zk, o, rs[0]); });
            co_await run("read_write", [&](auto& rs) { return read_write(zk, o, rs[0], rs[1]); });
            co_await run("semaphore", [&](auto& rs) { return semaphore_load(zk, o, rs[0]); });
            co_await run("scale", [&](auto& rs) { return scale(zk, o, rs[0]); });
        }
    } catch (...) {
        failure = std::current_exception();
    }

    // Cleanup, with a few seconds of its own if the time limit was what failed.
    g_deadline = std::max(g_deadline, clock_type::now() + 5s);
    if (zk.session_timeout().count() > 0) {
        for (const auto& p : used_paths) {
            try {
                co_await remove_tree(zk, p);
            } catch (const std::exception& e) {
                std::fprintf(stderr, "warning: cleanup of %s: %s\n", p.c_str(), e.what());
            }
        }
    }
    try {
        co_await zk.async_close();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "warning: closing the client: %s\n", e.what());
    }
    // Tasks of a failed demo end once the close has failed their waits; their mutex must go
    // before the client does.
    asio::steady_timer pause(ex);
    for (int i = 0; i < 100 && !g_live_demo.expired(); ++i) {
        pause.expires_after(50ms);
        co_await pause.async_wait(use_tuple);
    }
    if (!g_live_demo.expired())
        std::fprintf(stderr, "warning: demo tasks still running after the client closed\n");
    if (failure)
        std::rethrow_exception(failure);
}

double us(std::chrono::nanoseconds d) { return static_cast<double>(d.count()) / 1e3; }

// Prints the results; the exit status is 1 if a check failed.
int report(const options& o, const results& r)
{
    if (o.runs("cross_process")) {
        for (const auto& w : r.workloads)
            fmt::print("PART impl=zkcoro workload=cross_process id={} ops={} seconds={:.3f} p50_us={:.1f} "
                       "p99_us={:.1f} cpu_us_per_op={:.1f} tasks={} batch_time_ends={} linger_grants={}\n",
                       o.id, w.ops, w.seconds, w.lat.percentile_us(50), w.lat.percentile_us(99), w.cpu_per_op(),
                       o.cross_tasks, w.metrics.batch_time_ends, w.metrics.linger_grants);
        std::fflush(stdout);
        return 0;
    }
    fmt::print("zkcoro lock benchmark\n");
    fmt::print("server {}  session timeout {} ms  paths /zkcoro-bench/lock-{}-<workload>\n\n", o.connect,
               r.session_timeout_ms, ::getpid());
    fmt::print("{:<16} {:>9} {:>8} {:>11} {:>10} {:>10} {:>10} {:>9}  {}\n", "workload", "ops", "seconds", "ops/s",
               "p50 us", "p99 us", "CPU us/op", "req/op", "check");
    for (const auto& w : r.workloads)
        fmt::print("{:<16} {:>9} {:>8.3f} {:>11.1f} {:>10.1f} {:>10.1f} {:>10.1f} {:>9.2f}  {}\n", w.name, w.ops,
                   w.seconds, w.ops_per_s(), w.lat.percentile_us(50), w.lat.percentile_us(99), w.cpu_per_op(),
                   w.requests_per_op(), w.ok ? "ok" : "FAILED (" + w.failure + ")");
    fmt::print("(uncontended, many_locks, rw_*: p50/p99 per acquire+release cycle; demo*: of the wait from "
               "acquire() to the grant)\n\n");
    fmt::print("The library's metrics (zkcoro::lock_metrics, summed over each workload's lock objects):\n");
    fmt::print("{:<16} {:>9} {:>8} {:>8} {:>6} {:>7} {:>9} {:>10} {:>10} {:>10} {:>10}\n", "workload", "acquires",
               "timeouts", "cancels", "errors", "losses", "handoffs", "wait p50", "wait p90", "wait p99", "wait max");
    for (const auto& w : r.workloads) {
        if (!w.has_metrics)
            continue;
        const auto& m = w.metrics;
        fmt::print("{:<16} {:>9} {:>8} {:>8} {:>6} {:>7} {:>9} {:>10.1f} {:>10.1f} {:>10.1f} {:>10.1f}\n", w.name,
                   m.acquires, m.timeouts, m.cancellations, m.errors, m.losses, m.local_handoffs,
                   us(m.wait.percentile(50)), us(m.wait.percentile(90)), us(m.wait.percentile(99)), us(m.wait.max()));
    }
    fmt::print("(wait: us from the acquire call to the grant, from the library's histogram)\n");
    for (const auto& w : r.workloads)
        if (w.ok)  // a failed workload's figures are not results
            fmt::print("RESULT impl=zkcoro workload={} ops_per_s={:.1f} p50_us={:.1f} p99_us={:.1f} "
                       "mean_us={:.1f} cpu_us_per_op={:.1f} requests_per_op={:.2f}{}\n",
                       w.name, w.ops_per_s(), w.lat.percentile_us(50), w.lat.percentile_us(99), w.lat.mean_us(),
                       w.cpu_per_op(), w.requests_per_op(), w.extra);
    for (const auto& w : r.workloads)
        if (w.ok && w.name.starts_with("uncontended"))
            w.lat.write_samples("zkcoro", w.name);
    std::fflush(stdout);
    bool all_ok =
        std::all_of(r.workloads.begin(), r.workloads.end(), [](const workload_result& w) { return w.ok; });
    if (!all_ok) {
        std::fprintf(stderr, "%s: a check failed\n", program);
        return 1;
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv)
{
    return zkbench::bench_main(argc, argv, program, parse_options, 20s, run_bench, report);
}
