// Latency and throughput of zkcoro::mutex against a loopback ZooKeeper server.
//
//   uncontended      one task, one mutex: N acquire + release cycles, one at a time, after a
//                    warm-up. Each cycle is a create (ephemeral-sequential) pipelined with a
//                    get_children, then a delete.
//   demo             T tasks in this process on one client and one mutex (like
//                    examples/02_mutex_demo), K acquisitions each, decrementing a shared counter
//                    inside the lock; mutex_options::local_handoff = true (the default).
//   demo_no_handoff  the same with local_handoff = false: every task queues in ZooKeeper with a
//                    node of its own.
//
// The demo workloads check that the counter reaches exactly 0, that no two tasks are ever inside
// the critical section at once (each task yields to the others while inside), and that fencing
// tokens strictly increase from grant to grant; any violation makes the exit status non-zero.
//
// Every loop is bounded in count and by an overall time limit (lock waits use the time left as
// their timeout), enforced at last by a watchdog thread. Nodes live under
// /zkcoro-bench/lock-<pid>-<workload> and are deleted afterwards.
#include "bench_common.hpp"

#include <zkcoro/semaphore.hpp>
#include <zkcoro/shared_mutex.hpp>
#include <zkcoro/client.hpp>
#include <zkcoro/guard.hpp>
#include <zkcoro/mutex.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
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

constexpr const char* program = "zkcoro-lock-bench";

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// ZooKeeper result codes (zookeeper.h), as zkcoro passes them through.
constexpr int zk_no_node = -101;
constexpr int zk_not_empty = -111;

// ---------------------------------------------------------------------------------------------
// Options

struct options {
    std::string connect;
    long cycles = 2000;     // uncontended: measured cycles
    long warmup = -1;       // uncontended: unmeasured cycles first (-1: cycles / 10 in [5, 200])
    long tasks = 100;       // demo: tasks
    long per_task = 20;     // demo: acquisitions per task
    long mixed_ms = 3000;   // read-write and semaphore workloads: how long each runs
    long time_limit = 120;  // seconds, for the whole run
};

void usage(std::FILE* f)
{
    std::fputs(
        "usage: zkcoro-lock-bench [--connect HOST:PORT] [--cycles N] [--warmup N] [--tasks T]\n"
        "                         [--per-task K] [--mixed-ms MS] [--time-limit SECONDS]\n"
        "  --connect     loopback ZooKeeper server (default: $ZK_CONNECT, else 127.0.0.1:2181)\n"
        "  --cycles      uncontended acquire+release cycles measured (default 2000)\n"
        "  --warmup      uncontended cycles before measuring (default cycles/10, in [5, 200])\n"
        "  --tasks       demo: tasks sharing one client and one mutex (default 100)\n"
        "  --per-task    demo: acquisitions per task (default 20)\n"
        "  --mixed-ms    read-write (8 readers, 2 writers) and semaphore (10 tasks, 3 leases) run time\n"
        "  --time-limit  overall limit in seconds (default 120); exceeding it is an error\n",
        f);
}

options parse_options(int argc, char** argv)
{
    options o;
    o.connect = zkbench::default_connect();
    static constexpr zkbench::integer_option<options> integers[] = {
        {"--cycles", &options::cycles, 1, 10'000'000},
        {"--warmup", &options::warmup, 0, 10'000'000},
        {"--tasks", &options::tasks, 1, 100'000},
        {"--per-task", &options::per_task, 1, 10'000'000},
        {"--mixed-ms", &options::mixed_ms, 10, 600'000},
        {"--time-limit", &options::time_limit, 1, 86'400},
    };
    zkbench::parse_args(argc, argv, usage, zkbench::help_with_value::unknown, o, integers);
    if (o.tasks * o.per_task > 100'000'000)
        throw bench_error("--tasks x --per-task: at most 100000000 acquisitions");
    if (o.warmup < 0)
        o.warmup = std::clamp<long>(o.cycles / 10, 5, 200);
    o.connect = zkbench::loopback_only(o.connect, zkbench::bracketed_ipv4::reject);
    return o;
}

// ---------------------------------------------------------------------------------------------
// Time limit

// What is left of the time limit, as a lock-wait timeout (at least 1 ms).
clock_type::duration time_left()
{
    return std::max<clock_type::duration>(g_deadline - clock_type::now(), 1ms);
}

struct workload_result {
    std::string name;
    zkbench::latencies lat;  // uncontended: per cycle; demo: per acquisition, acquire() call to grant
    double seconds = 0;   // wall time of the measured part
    long ops = 0;         // cycles or acquisitions
    std::uint64_t requests = 0;  // sent to ZooKeeper during the measured part
    double requests_per_op() const { return ops > 0 ? static_cast<double>(requests) / static_cast<double>(ops) : 0; }
    double ops_per_s() const { return seconds > 0 ? static_cast<double>(ops) / seconds : 0; }
    // demo only
    long tasks = 0, per_task = 0;
    long counter_end = 0;
    int max_inside = 0;
    long token_regressions = 0;
    std::uint64_t local_handoffs = 0;
    bool ok = true;
    std::string failure;
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
            if (cec && cec != zkcoro::make_zk_error(zk_no_node))
                std::fprintf(stderr, "warning: deleting %s: %s\n", child_path.c_str(), cec.message().c_str());
        }
    }
    auto [ec] = co_await zk.async_remove(path, -1, use_tuple);
    if (ec && ec != zkcoro::make_zk_error(zk_no_node))
        std::fprintf(stderr, "warning: deleting %s: %s\n", path.c_str(), ec.message().c_str());
    std::string root = "/zkcoro-bench";
    auto [rec] = co_await zk.async_remove(root, -1, use_tuple);
    if (rec && rec != zkcoro::make_zk_error(zk_no_node) && rec != zkcoro::make_zk_error(zk_not_empty))
        std::fprintf(stderr, "warning: deleting %s: %s\n", root.c_str(), rec.message().c_str());
}

// ---------------------------------------------------------------------------------------------
// uncontended

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
    auto start = clock_type::now();
    auto requests0 = zk.stats().requests;
    for (long i = 0; i < o.cycles; ++i) {
        check_deadline("measuring uncontended cycles");
        auto t0 = clock_type::now();
        co_await one_cycle();
        res.lat.add(clock_type::now() - t0);
    }
    res.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
    res.ops = static_cast<long>(res.lat.ns.size());
    res.requests = zk.stats().requests - requests0;
}

// ---------------------------------------------------------------------------------------------
// demo

// Shared by the demo's tasks; kept alive by each of them.
struct demo_state {
    explicit demo_state(asio::any_io_executor ex) : done_timer(ex) {}
    std::optional<zkcoro::mutex> lock;
    long counter = 0;
    int inside = 0, max_inside = 0;
    std::int64_t last_token = 0;
    long token_regressions = 0;
    long tasks = 0;
    long finished_tasks = 0;
    long acquisitions = 0;
    std::string first_error;
    zkbench::latencies wait;
    asio::steady_timer done_timer;  // cancelled by the last task to finish
};

// The demo in progress, if any: after a failure its tasks may outlive demo(); the client waits
// for them before it goes.
std::weak_ptr<demo_state> g_live_demo;

asio::awaitable<void> demo_task(std::shared_ptr<demo_state> st, long per_task)
{
    auto ex = co_await asio::this_coro::executor;
    try {
        for (long i = 0; i < per_task; ++i) {
            if (!st->first_error.empty())
                break;  // another task failed: stop early
            check_deadline("running the demo");
            auto t0 = clock_type::now();
            auto g = co_await st->lock->acquire(time_left());
            if (!g)
                throw bench_error("demo: acquire timed out (time limit)");
            st->wait.add(clock_type::now() - t0);
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
        if (st->first_error.empty())
            st->first_error = e.what();
    }
    if (++st->finished_tasks == st->tasks)
        st->done_timer.cancel();  // wakes the waiter
}

asio::awaitable<void> demo(zkcoro::client& zk, const options& o, bool local_handoff, workload_result& res)
{
    auto ex = co_await asio::this_coro::executor;
    res.name = local_handoff ? "demo" : "demo_no_handoff";
    res.tasks = o.tasks;
    res.per_task = o.per_task;
    const long total = o.tasks * o.per_task;

    auto st = std::make_shared<demo_state>(ex);
    zkcoro::mutex_options mo;
    mo.local_handoff = local_handoff;
    st->lock.emplace(zk, lock_path(res.name), std::move(mo));
    st->counter = total;
    st->tasks = o.tasks;
    g_live_demo = st;
    st->wait.ns.reserve(static_cast<std::size_t>(total));

    auto start = clock_type::now();
    auto requests0 = zk.stats().requests;
    for (long t = 0; t < o.tasks; ++t)
        asio::co_spawn(ex, demo_task(st, o.per_task), asio::detached);

    // Wait for every task: each one ends by the time limit (its lock waits time out then), so
    // a grace period after it suffices. Bounded in count too: one wake-up per task at most.
    const auto give_up = g_deadline + 5s;
    for (long wakeups = 0; st->finished_tasks < o.tasks && wakeups <= o.tasks + 1; ++wakeups) {
        if (clock_type::now() >= give_up)
            break;
        st->done_timer.expires_at(give_up);
        co_await st->done_timer.async_wait(use_tuple);
    }
    res.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
    res.requests = zk.stats().requests - requests0;
    if (st->finished_tasks < o.tasks) {
        // Leave the remaining tasks to the client's close, which fails their waits.
        throw bench_error(fmt::format("{}: only {} of {} tasks finished within the time limit", res.name,
                                      st->finished_tasks, o.tasks));
    }

    res.ops = st->acquisitions;
    res.lat = std::move(st->wait);
    res.counter_end = st->counter;
    res.max_inside = st->max_inside;
    res.token_regressions = st->token_regressions;
    res.local_handoffs = st->lock->local_handoffs();
    st->lock.reset();

    std::vector<std::string> problems;
    if (!st->first_error.empty())
        problems.push_back(st->first_error);
    if (res.ops != total)
        problems.push_back(fmt::format("{} acquisitions of {}", res.ops, total));
    if (res.counter_end != 0)
        problems.push_back(fmt::format("counter ended at {}, expected 0", res.counter_end));
    if (res.max_inside > 1)
        problems.push_back(fmt::format("{} tasks were inside the lock at once", res.max_inside));
    if (res.token_regressions > 0)
        problems.push_back(fmt::format("{} fencing tokens did not increase", res.token_regressions));
    res.ok = problems.empty();
    for (const auto& p : problems)
        res.failure += (res.failure.empty() ? "" : "; ") + p;
}

// ---------------------------------------------------------------------------------------------
// Read-write and semaphore workloads: tasks loop for a fixed time; throughput per kind.

struct mixed_state {
    explicit mixed_state(asio::any_io_executor ex) : done_timer(ex) {}
    int readers_inside = 0, writers_inside = 0, leases_inside = 0;
    int max_readers = 0, max_leases = 0;
    long violations = 0;
    long reads = 0, writes = 0, leases = 0;
    long tasks = 0, finished = 0;
    std::string first_error;
    asio::steady_timer done_timer;
};

asio::awaitable<void> rw_task(std::shared_ptr<mixed_state> st, zkcoro::shared_mutex& rw, bool writer,
                              clock_type::time_point end)
{
    auto ex = co_await asio::this_coro::executor;
    try {
        for (long i = 0; i < 1000000 && clock_type::now() < end; ++i) {
            check_deadline("running the read-write workload");
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
        }
    } catch (const std::exception& e) {
        if (st->first_error.empty())
            st->first_error = e.what();
    }
    if (++st->finished == st->tasks)
        st->done_timer.cancel();
}

asio::awaitable<void> semaphore_task(std::shared_ptr<mixed_state> st, zkcoro::semaphore& sem, int max_leases,
                                     clock_type::time_point end)
{
    auto ex = co_await asio::this_coro::executor;
    try {
        for (long i = 0; i < 1000000 && clock_type::now() < end; ++i) {
            check_deadline("running the semaphore workload");
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
        }
    } catch (const std::exception& e) {
        if (st->first_error.empty())
            st->first_error = e.what();
    }
    if (++st->finished == st->tasks)
        st->done_timer.cancel();
}

asio::awaitable<void> wait_tasks(std::shared_ptr<mixed_state> st)
{
    const auto give_up = g_deadline + 5s;
    for (long wakeups = 0; st->finished < st->tasks && wakeups <= st->tasks + 1; ++wakeups) {
        if (clock_type::now() >= give_up)
            break;
        st->done_timer.expires_at(give_up);
        co_await st->done_timer.async_wait(use_tuple);
    }
    if (st->finished < st->tasks)
        throw bench_error(fmt::format("only {} of {} tasks finished within the time limit", st->finished, st->tasks));
}

// 8 readers and 2 writers on one read-write lock for `seconds`.
asio::awaitable<void> read_write(zkcoro::client& zk, const options& o, workload_result& reads, workload_result& writes)
{
    auto ex = co_await asio::this_coro::executor;
    reads.name = "rw_read";
    writes.name = "rw_write";
    auto st = std::make_shared<mixed_state>(ex);
    zkcoro::shared_mutex rw(zk, lock_path("rw"));
    st->tasks = 10;
    auto start = clock_type::now();
    auto end = start + std::chrono::milliseconds(o.mixed_ms);
    for (int t = 0; t < 10; ++t)
        asio::co_spawn(ex, rw_task(st, rw, t >= 8, end), asio::detached);
    co_await wait_tasks(st);
    double secs = std::chrono::duration<double>(clock_type::now() - start).count();
    reads.seconds = writes.seconds = secs;
    reads.ops = st->reads;
    writes.ops = st->writes;
    std::string problem = st->first_error;
    if (st->violations)
        problem += fmt::format("{}{} exclusion violations", problem.empty() ? "" : "; ", st->violations);
    if (st->writes == 0 || st->reads == 0)
        problem += fmt::format("{}a side never acquired", problem.empty() ? "" : "; ");
    reads.ok = writes.ok = problem.empty();
    reads.failure = writes.failure = problem;
    reads.max_inside = st->max_readers;
}

// 10 tasks, 3 leases, acquire + release for `seconds`.
asio::awaitable<void> semaphore_load(zkcoro::client& zk, const options& o, workload_result& res)
{
    auto ex = co_await asio::this_coro::executor;
    res.name = "semaphore";
    auto st = std::make_shared<mixed_state>(ex);
    zkcoro::semaphore sem(zk, lock_path("semaphore"), 3);
    st->tasks = 10;
    auto start = clock_type::now();
    auto end = start + std::chrono::milliseconds(o.mixed_ms);
    for (int t = 0; t < 10; ++t)
        asio::co_spawn(ex, semaphore_task(st, sem, 3, end), asio::detached);
    co_await wait_tasks(st);
    res.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
    res.ops = st->leases;
    res.max_inside = st->max_leases;
    std::string problem = st->first_error;
    if (st->violations)
        problem += fmt::format("{}{} times more than 3 leases", problem.empty() ? "" : "; ", st->violations);
    res.ok = problem.empty() && res.ops > 0;
    res.failure = problem;
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
    try {
        co_await zk.async_connect();
        out.session_timeout_ms = static_cast<int>(zk.session_timeout().count());

        workload_result u;
        used_paths.push_back(lock_path("uncontended"));
        co_await uncontended(zk, o, u);
        out.workloads.push_back(std::move(u));

        for (bool handoff : {true, false}) {
            workload_result d;
            used_paths.push_back(lock_path(handoff ? "demo" : "demo_no_handoff"));
            co_await demo(zk, o, handoff, d);
            bool ok = d.ok;
            out.workloads.push_back(std::move(d));
            if (!ok)
                break;  // reported; the exit status says it
        }

        workload_result rr, rwr, sem;
        used_paths.push_back(lock_path("rw"));
        co_await read_write(zk, o, rr, rwr);
        out.workloads.push_back(std::move(rr));
        out.workloads.push_back(std::move(rwr));
        used_paths.push_back(lock_path("semaphore"));
        co_await semaphore_load(zk, o, sem);
        out.workloads.push_back(std::move(sem));
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

// Prints the results; the exit status is 1 if a demo check failed.
int report(const options& o, const results& r)
{
    fmt::print("zkcoro lock benchmark: zkcoro::mutex acquire + release\n");
    fmt::print("server {}  session timeout {} ms  paths /zkcoro-bench/lock-{}-<workload>\n\n", o.connect,
               r.session_timeout_ms, ::getpid());
    for (const auto& w : r.workloads) {
        if (w.name == "uncontended") {
            fmt::print("uncontended: {} cycles after {} warm-up: p50 {:.1f} us  p99 {:.1f} us  mean {:.1f} us  "
                       "{:.1f} cycles/s; {:.2f} requests/cycle\n",
                       w.ops, o.warmup, w.lat.percentile_us(50), w.lat.percentile_us(99), w.lat.mean_us(),
                       w.ops_per_s(), w.requests_per_op());
        } else {
            fmt::print("{}: {} tasks x {} = {} acquisitions in {:.3f} s: {:.1f} acquisitions/s; wait per "
                       "acquisition p50 {:.1f} us  p99 {:.1f} us; local handoffs {}; {:.2f} requests/acquisition; "
                       "counter ended at {}, max inside {}: {}\n",
                       w.name, w.tasks, w.per_task, w.ops, w.seconds, w.ops_per_s(), w.lat.percentile_us(50),
                       w.lat.percentile_us(99), w.local_handoffs, w.requests_per_op(), w.counter_end,
                       w.max_inside, w.ok ? "ok" : "FAILED (" + w.failure + ")");
        }
    }
    fmt::print("(uncontended: p50/p99 per acquire+release cycle; demo: p50/p99 of the wait from acquire() "
               "to the grant)\n");
    for (const auto& w : r.workloads)
        if (w.ok)  // a failed demo's figures are not results
            fmt::print("RESULT impl=zkcoro workload={} ops_per_s={:.1f} p50_us={:.1f} p99_us={:.1f} "
                       "mean_us={:.1f} requests_per_op={:.2f}\n",
                       w.name, w.ops_per_s(), w.lat.percentile_us(50), w.lat.percentile_us(99), w.lat.mean_us(),
                       w.requests_per_op());
    std::fflush(stdout);
    bool all_ok =
        std::all_of(r.workloads.begin(), r.workloads.end(), [](const workload_result& w) { return w.ok; });
    if (!all_ok) {
        std::fprintf(stderr, "%s: a demo check failed\n", program);
        return 1;
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv)
{
    return zkbench::bench_main(argc, argv, program, parse_options, 20s, run_bench, report);
}
