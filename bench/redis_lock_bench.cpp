// zkcoro-redis-bench: zkcoro's Redis lock (zkcoro::redis_mutex) on the workloads of bench/run.sh's
// Redis section (issue 14), with the command line and the RESULT lines of its raw hiredis floor
// (bench/redis_raw_bench.cpp) and of redis-py (bench/redis_py_bench.py), so that
// bench/run_redis.sh puts all three in one table:
//
//   uncontended     a. one task, one redis_mutex: acquire + release, one at a time, after a
//                      warm-up: p50/p99 per cycle and the process CPU per cycle.
//   demo            b. --tasks tasks on ONE redis_mutex object of one client, --per-task
//                      acquisitions each, decrementing a shared counter inside the lock (like the
//                      ZooKeeper demo): the counter must reach 0, no two tasks may be inside at
//                      once, fencing tokens must increase. In-process handoff on (the default).
//   many_locks      d. --keys redis_mutex objects (one per key), --many-tasks tasks, each cycle on
//                      a uniformly random key not in flight already (the raw floor's shape), for
//                      --duration-ms; all on one client (one command connection).
//   cross_process   c. one process of several on --key (bench/run_redis.sh starts 4): from
//                      --start-at-ms (wall clock) for --duration-ms, acquire, log
//                      "<id> X <enter_ns> <exit_ns>" (std::chrono::steady_clock ns, that is
//                      CLOCK_MONOTONIC), release; the log is written to --log at the end and a
//                      PART line printed. redis_py_bench.py --summarize makes its RESULT line.
//
//   zkcoro-redis-bench --url URL [--workloads uncontended,demo,many_locks] [--cycles N] ...
//   zkcoro-redis-bench --workloads cross_process --url URL --key KEY --id ID --log FILE
//                      --start-at-ms EPOCH_MS --duration-ms MS
//
// --url is a server (redis://) or a Redis Cluster (redis+cluster://, every seed node on loopback;
// bench/run_redis.sh --cluster runs a, b, c and d so); anything off loopback, and redis+sentinel://,
// is refused.
//
// Every loop is bounded in count and checks the time limit; waits that can meet another holder
// (demo, cross_process) use the time left as their timeout; a watchdog thread ends the process
// (status 3) 15 s after the limit. a and d never contend (one task, or keys not in flight), so
// their acquisitions use acquire() without a timeout: the fast path, as an application would.
// Exit status: 0 on success, 1 on a failure (a broken check included), 2 on bad usage.
#include "bench_common.hpp"

#include <zkcoro/guard.hpp>
#include <zkcoro/redis.hpp>
#include <zkcoro/redis_fair_mutex.hpp>
#include <zkcoro/redis_mutex.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
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
#include <fstream>
#include <memory>
#include <optional>
#include <random>
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
using zkcoro::error_code;

constexpr const char* program = "zkcoro-redis-bench";
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

struct options {
    std::string url;
    long cycles = 20000;    // a: measured cycles (as the raw floor)
    long warmup = 1000;     // a: unmeasured cycles first
    long tasks = 100;       // b: tasks
    long per_task = 20;     // b: acquisitions per task
    long duration_ms = 3000;  // c, d: run time
    long keys = 1000;       // d: keys
    long many_tasks = 50;   // d: tasks
    long ttl_ms = 10000;    // the lock's TTL
    long hold_ms = 0;       // c: time held per acquisition
    long time_limit = 300;  // seconds, for the whole run
    std::vector<std::string> workloads;
    // c
    std::string key;
    std::string id = "p1";
    std::string log;
    long start_at_ms = 0;
    long max_count = 10'000'000;
    long replica_acks = 0;  // redis_options::replica_acks (WAIT n after each grant and renewal)
    bool fair = false;      // cross_process: zkcoro::redis_fair_mutex instead of redis_mutex
};

// "zkcoro_redis", or "zkcoro_redis_ackN" with --replica-acks N.
std::string impl_name = "zkcoro_redis";

// "localhost" or a literal loopback address (127.0.0.0/8, ::1); a name such as "127.example" is not.
bool is_loopback(const std::string& host)
{
    if (host == "localhost")
        return true;
    boost::system::error_code ec;
    const auto a = asio::ip::make_address(host, ec);
    return !ec && a.is_loopback();
}

// Throws unless every server `u` names is on loopback: its host (redis://), or every seed node
// (redis+cluster://). A redis+sentinel:// URL is refused: the master the sentinels name may be
// anywhere.
void check_loopback(const zkcoro::redis_url& u, const std::string& text)
{
    const auto shown = zkcoro::redact_url(text);
    if (!u.sentinels.empty())
        throw bench_error(fmt::format("--url: \"{}\" is a redis+sentinel:// URL, which this benchmark does not take "
                                      "(use redis:// or redis+cluster:// on loopback)",
                                      shown));
    if (!u.cluster_nodes.empty()) {
        for (const auto& n : u.cluster_nodes)
            if (!is_loopback(n.host))
                throw bench_error(fmt::format("--url: seed node \"{}\" of \"{}\" is not on loopback (this benchmark "
                                              "runs against local servers only)",
                                              n.host, shown));
        return;
    }
    if (!is_loopback(u.host))
        throw bench_error(fmt::format("--url: \"{}\" is not on loopback (this benchmark runs against a local "
                                      "server only)",
                                      shown));
}

options parse_options(int argc, char** argv)
{
    options o;
    const char* env = std::getenv("ZKCORO_TEST_REDIS");
    o.url = (env && *env) ? env : "redis://127.0.0.1:6379";
    std::string workloads = "uncontended,demo,many_locks";
    CLI::App app("zkcoro's Redis lock (zkcoro::redis_mutex) on the Redis workloads a, b, c, d", program);
    app.footer("cross_process, one of several processes on one key (bench/run_redis.sh starts them):\n"
               "  zkcoro-redis-bench --workloads cross_process --url URL --key KEY --id ID --log FILE\n"
               "                     --start-at-ms EPOCH_MS --duration-ms MS");
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    app.get_formatter()->column_width(zkbench::help_option_width);
    app.add_option("--url", o.url, "Loopback server, or a cluster whose seed nodes are all on loopback (default: "
                   "$ZKCORO_TEST_REDIS, else redis://127.0.0.1:6379)")
        ->type_name("redis://[PW@]HOST:PORT[/DB] or redis+cluster://HOST:PORT[,HOST:PORT...]");
    app.add_option("--workloads", workloads,
                   "Comma-separated: uncontended, demo, many_locks (default: these), or cross_process alone");
    using zkbench::add_integer;
    add_integer(app, "--cycles", o.cycles, 1, 10'000'000, "N", "uncontended: cycles measured");
    add_integer(app, "--warmup", o.warmup, 0, 10'000'000, "N", "uncontended: cycles before measuring");
    add_integer(app, "--tasks", o.tasks, 1, 100'000, "T", "demo: tasks on one lock");
    add_integer(app, "--per-task", o.per_task, 1, 10'000'000, "K", "demo: acquisitions per task");
    add_integer(app, "--duration-ms", o.duration_ms, 10, 600'000, "MS", "many_locks, cross_process: run time");
    add_integer(app, "--keys", o.keys, 1, 1'000'000, "K", "many_locks: keys");
    add_integer(app, "--many-tasks", o.many_tasks, 1, 100'000, "T", "many_locks: tasks");
    add_integer(app, "--ttl-ms", o.ttl_ms, 100, 86'400'000, "MS", "The lock's TTL");
    add_integer(app, "--hold-ms", o.hold_ms, 0, 60'000, "MS", "cross_process: time held per acquisition");
    add_integer(app, "--time-limit", o.time_limit, 1, 86'400, "SECONDS",
                "Whole run; a watchdog ends the process 15 s after it");
    app.add_option("--key", o.key, "cross_process: the key shared with the other processes")->type_name("KEY");
    app.add_option("--id", o.id, "cross_process: this process' name in the hold log (default p1)")
        ->type_name("ID")
        ->check(CLI::Validator(
            [](std::string& v) -> std::string {
                if (v.empty() || v.find_first_of(" \t\n=") != std::string::npos)
                    return fmt::format("expected a non-empty name without spaces or '=', got \"{}\"", v);
                return {};
            },
            "", "name"));
    app.add_option("--log", o.log, "cross_process: the hold log to write")->type_name("FILE");
    add_integer(app, "--start-at-ms", o.start_at_ms, 0, 100'000'000'000'000, "EPOCH_MS",
                "cross_process: start time, ms since the epoch; 0: at once");
    add_integer(app, "--max-count", o.max_count, 1, 100'000'000, "N", "cross_process: at most N holds");
    app.add_flag("--fair", o.fair,
                 "cross_process: the fair lock (zkcoro::redis_fair_mutex); PART impl=zkcoro_redis_fair");
    add_integer(app, "--replica-acks", o.replica_acks, 0, 16, "N",
                "Grants wait for WAIT N (replicas of the server); RESULT impl=zkcoro_redis_ackN (default 0)");
    zkbench::parse_command_line(app, argc, argv);
    if (o.replica_acks > 0)
        impl_name = fmt::format("zkcoro_redis_ack{}", o.replica_acks);

    error_code ec;
    std::string why;
    auto u = zkcoro::parse_redis_url(o.url, ec, &why);
    if (ec)
        throw bench_error(fmt::format("--url: {}", why));
    check_loopback(u, o.url);
    std::string_view rest = workloads;
    while (!rest.empty()) {
        auto comma = rest.find(',');
        std::string w(rest.substr(0, comma));
        rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
        if (w != "uncontended" && w != "demo" && w != "many_locks" && w != "cross_process")
            throw bench_error(fmt::format("--workloads: unknown workload \"{}\"", w));
        o.workloads.push_back(w);
    }
    const bool cross = std::find(o.workloads.begin(), o.workloads.end(), "cross_process") != o.workloads.end();
    if (cross) {
        if (o.workloads.size() != 1)
            throw bench_error("--workloads: cross_process runs alone");
        if (o.key.empty() || o.log.empty())
            throw bench_error("cross_process needs --key and --log");
    } else if (!o.key.empty() || !o.log.empty() || o.fair) {
        throw bench_error("--key, --log and --fair are for the cross_process workload only");
    }
    if (o.keys < o.many_tasks * 2)
        throw bench_error("--keys must be at least twice --many-tasks (a key in flight is never drawn again)");
    if (o.tasks * o.per_task > 100'000'000)
        throw bench_error("--tasks x --per-task: at most 100000000 acquisitions");
    return o;
}

// ---------------------------------------------------------------------------------------------

struct series : zkbench::latencies {
    std::int64_t ops = 0;
    double seconds = 0;
    double cpu_us = 0;
    std::uint64_t commands = 0;  // commands sent to Redis during the run
    double per_s() const { return seconds > 0 ? static_cast<double>(ops) / seconds : 0; }
    double cpu_per_op_us() const { return ops > 0 ? cpu_us / static_cast<double>(ops) : 0; }
    double requests_per_op() const { return ops > 0 ? static_cast<double>(commands) / static_cast<double>(ops) : 0; }
};

// Measures the CPU, the wall time and the commands sent between construction and stop().
class measure {
public:
    measure(zkcoro::redis_client& rc, series& s)
        : rc_(rc), s_(s), cpu0_(zkbench::cpu_us()), t0_(clock_type::now()), sent0_(rc.commands_sent())
    {
    }
    void stop()
    {
        s_.seconds = std::chrono::duration<double>(clock_type::now() - t0_).count();
        s_.cpu_us = zkbench::cpu_us() - cpu0_;
        s_.commands = rc_.commands_sent() - sent0_;
    }

private:
    zkcoro::redis_client& rc_;
    series& s_;
    double cpu0_;
    clock_type::time_point t0_;
    std::uint64_t sent0_;
};

void print_result(std::string_view workload, const series& s, std::string_view extra)
{
    fmt::print("RESULT impl={} workload={} ops_per_s={:.1f} p50_us={:.1f} p99_us={:.1f} mean_us={:.1f} "
               "cpu_us_per_op={:.1f} requests_per_op={:.2f}{}\n",
               impl_name, workload, s.per_s(), s.percentile_us(50), s.percentile_us(99), s.mean_us(), s.cpu_per_op_us(),
               s.requests_per_op(), extra);
    std::fflush(stdout);
}


std::string key_prefix() { return fmt::format("zkbench:zkcoro:{}:", ::getpid()); }

zkcoro::redis_mutex_options lock_options(const options& o)
{
    zkcoro::redis_mutex_options mo;
    mo.ttl = std::chrono::milliseconds(o.ttl_ms);
    return mo;
}


// ---------------------------------------------------------------------------------------------
// a. uncontended

asio::awaitable<void> uncontended(zkcoro::redis_client& rc, const options& o)
{
    zkcoro::redis_mutex m(rc, key_prefix() + "a", lock_options(o));
    for (long i = 0; i < o.warmup; ++i) {
        if ((i & 255) == 0)
            check_deadline("warming up");
        auto g = co_await m.acquire();
        co_await g.release();
    }
    series s;
    s.ns.reserve(static_cast<std::size_t>(o.cycles));
    measure mt(rc, s);
    for (long i = 0; i < o.cycles; ++i) {
        if ((i & 255) == 0)
            check_deadline("running uncontended");
        const auto c0 = clock_type::now();
        auto g = co_await m.acquire();
        co_await g.release();
        s.add(clock_type::now() - c0);
    }
    mt.stop();
    s.ops = o.cycles;
    fmt::print("uncontended: {} cycles, {:.1f} cycles/s, p50 {:.1f} us, p99 {:.1f} us, CPU {:.1f} us/cycle, "
               "{:.2f} requests/cycle\n",
               s.ops, s.per_s(), s.percentile_us(50), s.percentile_us(99), s.cpu_per_op_us(), s.requests_per_op());
    print_result("uncontended", s, " requests_per_op_floor=2");
}

// ---------------------------------------------------------------------------------------------
// b. the demo: tasks on one redis_mutex object

struct demo_state : task_group {
    using task_group::task_group;
    long counter = 0;
    int inside = 0, max_inside = 0;
    std::int64_t last_token = 0;
    long token_regressions = 0;
    long acquisitions = 0;
    zkbench::latencies waits;
};

asio::awaitable<void> demo_task(std::shared_ptr<demo_state> st, zkcoro::redis_mutex& lock, long per_task)
{
    auto ex = co_await asio::this_coro::executor;
    try {
        for (long i = 0; i < per_task; ++i) {
            if (!st->first_error.empty())
                break;  // another task failed: stop early
            check_deadline("running the demo");
            const auto t0 = clock_type::now();
            auto g = co_await lock.acquire(time_left());
            if (!g)
                throw bench_error("demo: acquire timed out (time limit)");
            st->waits.add(clock_type::now() - t0);
            ++st->acquisitions;
            // The critical section yields once, so that any other task that (wrongly) also held
            // the lock would run in the middle of it and be seen.
            ++st->inside;
            st->max_inside = std::max(st->max_inside, st->inside);
            if (g->fencing_token() <= st->last_token)
                ++st->token_regressions;
            st->last_token = std::max(st->last_token, g->fencing_token());
            const long before = st->counter;
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

asio::awaitable<void> demo(zkcoro::redis_client& rc, const options& o)
{
    auto ex = co_await asio::this_coro::executor;
    const long total = o.tasks * o.per_task;
    zkcoro::redis_mutex m(rc, key_prefix() + "b", lock_options(o));
    auto st = std::make_shared<demo_state>(ex);
    st->counter = total;
    st->tasks = o.tasks;
    st->waits.ns.reserve(static_cast<std::size_t>(total));
    series s;
    measure mt(rc, s);
    for (long t = 0; t < o.tasks; ++t)
        asio::co_spawn(ex, demo_task(st, m, o.per_task), asio::detached);
    co_await st->wait("demo");
    mt.stop();
    s.ops = st->acquisitions;
    s.ns = std::move(st->waits.ns);
    const auto metrics = m.metrics();
    fmt::print("demo: {} tasks x {}: counter {} -> {}, most inside at once {}, {} acquisitions in {:.3f} s, "
               "{:.1f}/s, {} local handoffs, {:.3f} requests/acquisition\n",
               o.tasks, o.per_task, total, st->counter, st->max_inside, s.ops, s.seconds, s.per_s(),
               metrics.local_handoffs, s.requests_per_op());
    if (!st->first_error.empty())
        throw bench_error(fmt::format("demo: {}", st->first_error));
    if (s.ops != total)
        throw bench_error(fmt::format("demo: {} acquisitions of {}", s.ops, total));
    if (st->counter != 0 || st->max_inside != 1)
        throw bench_error(fmt::format("demo: exclusion broken (counter {}, {} inside at once)", st->counter,
                                      st->max_inside));
    if (st->token_regressions > 0)
        throw bench_error(fmt::format("demo: {} fencing tokens did not increase", st->token_regressions));
    print_result("demo", s,
                 fmt::format(" tasks={} per_task={} counter_ok=1 local_handoffs={}", o.tasks, o.per_task,
                             metrics.local_handoffs));
}

// ---------------------------------------------------------------------------------------------
// d. many keys: each cycle on a uniformly random key not in flight (as the raw floor)

struct many_state : task_group {
    using task_group::task_group;
    std::vector<std::unique_ptr<zkcoro::redis_mutex>> locks;
    std::vector<char> busy;
    std::mt19937_64 rng;
    clock_type::time_point end;
    std::int64_t cycles = 0;
    zkbench::latencies lat;

    long pick()
    {
        std::uniform_int_distribution<long> d(0, static_cast<long>(locks.size()) - 1);
        long k = d(rng);
        // Bounded: at most many_tasks keys are busy and keys >= 2 x many_tasks, so each draw hits
        // a free key with probability >= 1/2.
        for (int tries = 0; busy[static_cast<std::size_t>(k)] && tries < 10'000; ++tries)
            k = d(rng);
        if (busy[static_cast<std::size_t>(k)])
            throw bench_error("many_locks: no free key found");
        busy[static_cast<std::size_t>(k)] = 1;
        return k;
    }
};

asio::awaitable<void> many_task(std::shared_ptr<many_state> st)
{
    try {
        for (std::int64_t n = 0; n < 100'000'000 && clock_type::now() < st->end; ++n) {
            if (!st->first_error.empty())
                break;
            if ((n & 255) == 0)
                check_deadline("running many_locks");
            const long k = st->pick();
            const auto c0 = clock_type::now();
            auto g = co_await st->locks[static_cast<std::size_t>(k)]->acquire();
            co_await g.release();
            st->lat.add(clock_type::now() - c0);
            st->busy[static_cast<std::size_t>(k)] = 0;
            ++st->cycles;
        }
    } catch (const std::exception& e) {
        st->error(e.what());
    }
    st->task_done();
}

asio::awaitable<void> many_locks(zkcoro::redis_client& rc, const options& o)
{
    auto ex = co_await asio::this_coro::executor;
    auto st = std::make_shared<many_state>(ex);
    const auto prefix = key_prefix();
    const auto mo = lock_options(o);
    for (long k = 0; k < o.keys; ++k)
        st->locks.push_back(std::make_unique<zkcoro::redis_mutex>(rc, fmt::format("{}d{}", prefix, k), mo));
    st->busy.assign(static_cast<std::size_t>(o.keys), 0);
    st->rng.seed(static_cast<std::uint64_t>(::getpid()));
    st->tasks = o.many_tasks;
    series s;
    measure mt(rc, s);
    st->end = clock_type::now() + std::chrono::milliseconds(o.duration_ms);
    for (long t = 0; t < o.many_tasks; ++t)
        asio::co_spawn(ex, many_task(st), asio::detached);
    co_await st->wait("many_locks");
    mt.stop();
    if (!st->first_error.empty())
        throw bench_error(fmt::format("many_locks: {}", st->first_error));
    s.ops = st->cycles;
    s.ns = std::move(st->lat.ns);
    fmt::print("many_locks, {} keys, {} tasks: {} cycles in {:.2f} s, {:.1f} cycles/s, CPU {:.1f} us/cycle, "
               "{:.2f} requests/cycle\n",
               o.keys, o.many_tasks, s.ops, s.seconds, s.per_s(), s.cpu_per_op_us(), s.requests_per_op());
    print_result("many_locks", s, fmt::format(" keys={} tasks={}", o.keys, o.many_tasks));
}

// ---------------------------------------------------------------------------------------------
// c. one process of several on one key

std::int64_t steady_ns()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now().time_since_epoch()).count();
}

template <class Lock>
asio::awaitable<void> cross_process_on(Lock& m, const options& o)
{
    auto ex = co_await asio::this_coro::executor;
    if (o.start_at_ms > 0) {
        const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
        const auto wait_ms = o.start_at_ms - now_ms;
        if (wait_ms > 60'000)
            throw bench_error(fmt::format("--start-at-ms is {} s away", wait_ms / 1000));
        if (wait_ms > 0) {
            asio::steady_timer t(ex, std::chrono::milliseconds(wait_ms));
            co_await t.async_wait(use_tuple);
        }
    }
    const auto end = clock_type::now() + std::chrono::milliseconds(o.duration_ms);
    std::string lines;
    long count = 0;
    while (count < o.max_count && clock_type::now() < end) {
        check_deadline("running cross_process");
        const auto left = std::min(end, g_deadline) - clock_type::now();
        if (left <= clock_type::duration::zero())
            break;
        auto g = co_await m.acquire(left);
        if (!g)
            break;  // the run ended while waiting
        const auto enter = steady_ns();
        if (o.hold_ms > 0) {
            asio::steady_timer t(ex, std::chrono::milliseconds(o.hold_ms));
            co_await t.async_wait(use_tuple);
        }
        const auto exit = steady_ns();
        co_await g->release();
        lines += fmt::format("{} X {} {}\n", o.id, enter, exit);
        ++count;
    }
    std::ofstream f(o.log, std::ios::trunc);
    f << lines;
    f.close();
    if (!f)
        throw bench_error(fmt::format("cannot write {}", o.log));
    fmt::print("PART impl=zkcoro_redis{} workload=cross_process id={} ops={}\n", o.fair ? "_fair" : "", o.id, count);
    std::fflush(stdout);
}

asio::awaitable<void> cross_process(zkcoro::redis_client& rc, const options& o)
{
    if (o.fair) {
        zkcoro::redis_fair_mutex_options fo;
        fo.ttl = std::chrono::milliseconds(o.ttl_ms);
        zkcoro::redis_fair_mutex m(rc, o.key, fo);
        co_await cross_process_on(m, o);
    } else {
        zkcoro::redis_mutex m(rc, o.key, lock_options(o));
        co_await cross_process_on(m, o);
    }
}

// ---------------------------------------------------------------------------------------------

asio::awaitable<void> run(const options& o)
{
    auto ex = co_await asio::this_coro::executor;
    zkcoro::redis_options ro;
    ro.log = [](zkcoro::log_level l, std::string_view msg) {
        if (l > zkcoro::log_level::warn)  // errors and warnings only
            return;
        auto level = zkcoro::to_string(l);
        std::fprintf(stderr, "zkcoro %.*s: %.*s\n", static_cast<int>(level.size()), level.data(),
                     static_cast<int>(msg.size()), msg.data());
    };
    ro.replica_acks = static_cast<int>(o.replica_acks);
    // The bench measures what an acknowledgement costs, not its timeout: a replica that has just
    // come online, on a busy core, can take longer than the default 500 ms for its first one, and
    // the grant is then given back (the benchmark smoke test failed so, once, on a loaded machine).
    ro.replica_ack_timeout = std::chrono::milliseconds(5000);
    zkcoro::redis_client rc(ex, o.url, ro);
    auto [ec] = co_await rc.async_connect(use_tuple);
    if (ec)
        throw bench_error(
            fmt::format("connect to {}: {} ({})", zkcoro::redact_url(o.url), ec.message(), rc.last_error()));
    if (o.workloads.size() == 1 && o.workloads[0] == "cross_process") {
        co_await cross_process(rc, o);
        co_return;
    }
    fmt::print("{}: server {}, TTL {} ms\n", program, zkcoro::redact_url(o.url), o.ttl_ms);
    std::fflush(stdout);
    for (const auto& w : o.workloads) {
        if (w == "uncontended")
            co_await uncontended(rc, o);
        else if (w == "demo")
            co_await demo(rc, o);
        else
            co_await many_locks(rc, o);
    }
    // Let the releases' background work (unsubscriptions) go out before the client closes.
    asio::steady_timer t(ex, 10ms);
    co_await t.async_wait(use_tuple);
}

}  // namespace

int main(int argc, char** argv)
{
    options o;
    try {
        o = parse_options(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", program, e.what());
        return 2;
    }
    g_deadline = clock_type::now() + std::chrono::seconds(o.time_limit);
    zkbench::watchdog dog(program, g_deadline + 15s);
    // A failed workload may leave tasks behind that use its locks: the process ends at once then.
    try {
        asio::io_context ioc(1);
        asio::co_spawn(ioc, run(o), [](std::exception_ptr failure) {
            if (!failure)
                return;
            std::fflush(stdout);
            zkbench::print_failure(program, failure);
            std::fflush(stderr);
            std::_Exit(1);
        });
        ioc.run();
    } catch (const std::exception& e) {
        std::fflush(stdout);
        std::fprintf(stderr, "%s: %s\n", program, e.what());
        return 1;
    }
    return 0;
}
