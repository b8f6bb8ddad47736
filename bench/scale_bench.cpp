// How the cost of one lock grows with its queue (issue 36, curve 1): one process of several, with
// --tasks tasks on ONE lock path, each acquiring it --rounds times, every task with a node of its
// own (mutex_options::local_handoff off: Curator's behaviour, so that the queue in ZooKeeper is
// tasks x processes long). Tasks enter --entry-per-s a second; a task that
// releases queues again at once, so the queue stays about as long as there are tasks until the
// last rounds.
//
// With --locks L, each acquisition takes one of L paths at random (curves 2 and 3); with
// --duration-ms, tasks go on until that time has passed (the share of each process is then the
// fairness figure).
//
// Prints one PART line with what this process counted, from the start (--start-at-ms, shared by
// the processes) to its last release:
//   PART id=p1 tasks=T rounds=R locks=L duration_ms=D acquisitions=A requests=Q watch_events=E
//        cpu_us=C bytes_in=B rss_kb=M rss_kb_entered=M0 rss_kb_start=MS wall_ms=W
// requests: sent to the server (zkcoro::client::stats); watch_events: received; cpu_us: user +
// system CPU of the process; bytes_in: bytes received over TCP (the replies, the queue listings
// among them); rss_kb: the resident set at the end, rss_kb_entered: once every task has entered
// (with --gate-ms: once every task waits in acquire), rss_kb_start: before the first entered.
// With --events FILE, one line per acquisition,
// "LOCK GRANT_NS RELEASE_NS" (CLOCK_MONOTONIC, shared by the processes of the machine):
// bench/scale_merge.py merges the files, checks that no two holds of one lock overlap and takes the
// handoff latency (a release to the next grant of the same lock).
//
// Every wait uses the time left of --time-limit as its timeout; a watchdog ends the process after
// it. The lock's nodes are the library's; the path is the caller's to choose and remove.
#include "bench_common.hpp"

#include <zkcoro/guard.hpp>
#include <zkcoro/mutex.hpp>
#include <zkcoro/path.hpp>
#if ZKCORO_SCALE_REDIS
#include <zkcoro/redis.hpp>
#include <zkcoro/redis_mutex.hpp>
#endif

#include <memory>
#include <random>
#include <unordered_map>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>


// Bytes this process has received over its TCP sockets (tcp_bytes.cpp).
long long tcp_bytes_received();

namespace asio = boost::asio;
using zkbench::bench_error;
using zkbench::clock_type;

namespace {

struct options {
    std::string connect;
    std::string path;
    std::string id = "p1";
    std::string events;
    std::string redis;  // a redis:// URL: the Redis lock instead of ZooKeeper's
    long tasks = 10;
    long rounds = 3;
    long locks = 1;
    long duration_ms = 0;
    long entry_per_s = 2000;
    long gate_ms = 0;
    long start_at_ms = 0;
    long time_limit = 300;
    bool local_handoff = false;
};

struct results {
    long acquisitions = 0;
    std::uint64_t requests = 0, watch_events = 0;
    double cpu_us = 0;
    long long bytes_in = 0;
    double wall_ms = 0;
    struct hold {
        long lock;
        std::int64_t granted, released;  // ns, CLOCK_MONOTONIC
    };
    std::vector<hold> holds;
    long long rss_kb = 0;          // at the end
    long long rss_kb_entered = 0;  // once every task has entered
    long long rss_kb_start = 0;    // before the first task entered
};

// A redis:// URL whose HOST:PORT is on loopback (a password before '@' is allowed).
CLI::Validator redis_loopback()
{
    return CLI::Validator(
        [](std::string& s) -> std::string {
            constexpr std::string_view scheme = "redis://";
            if (!s.starts_with(scheme))
                return fmt::format("expected redis://HOST:PORT, got \"{}\"", s);
            auto rest = s.substr(scheme.size());
            if (auto at = rest.rfind('@'); at != std::string::npos)
                rest = rest.substr(at + 1);
            if (auto slash = rest.find('/'); slash != std::string::npos)
                rest = rest.substr(0, slash);
            return zkbench::loopback_only(zkbench::bracketed_ipv4::accept)(rest);
        },
        "", "loopback redis URL");
}

options parse(int argc, char** argv)
{
    options o;
    CLI::App app("How the cost of one lock grows with its queue (issue 36): --tasks tasks of this process on one\n"
                 "lock, each with a node of its own, --rounds acquisitions each. bench/scale.sh runs several.");
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    app.get_formatter()->column_width(zkbench::help_option_width);
    o.connect = zkbench::default_connect();
    app.add_option("--connect", o.connect, "Loopback ZooKeeper servers, comma-separated (default: $ZK_CONNECT)")
        ->type_name("HOST:PORT[,...]")
        ->transform(zkbench::loopback_list(zkbench::bracketed_ipv4::accept));
    app.add_option("--redis", o.redis, "Loopback redis://HOST:PORT: zkcoro::redis_mutex instead of ZooKeeper's")
        ->type_name("URL")
        ->check(redis_loopback());
    app.add_option("--path", o.path, "The lock path (or key), shared with the other processes")->required();
    app.add_option("--id", o.id, "A name for the PART line (default p1)");
    app.add_option("--events", o.events, "Writes \"LOCK GRANT_NS RELEASE_NS\" per acquisition to this file");
    zkbench::add_integer(app, "--tasks", o.tasks, 1, 100'000, "T", "Tasks of this process on the lock");
    zkbench::add_integer(app, "--rounds", o.rounds, 1, 10'000, "R", "Acquisitions per task");
    zkbench::add_integer(app, "--locks", o.locks, 1, 1'000'000, "L",
                         "Lock paths: 1, --path itself; more, PATH/l0 ... PATH/l<L-1>, one chosen\n"
                         "at random for each acquisition");
    zkbench::add_integer(app, "--duration-ms", o.duration_ms, 0, 3'600'000, "MS",
                         "Acquire until this long has passed instead of --rounds times; 0: rounds");
    zkbench::add_integer(app, "--entry-per-s", o.entry_per_s, 1, 1'000'000, "N",
                         "Tasks of this process that start per second (bench/scale.sh: 2000 over\n"
                         "all the processes of a point)");
    zkbench::add_integer(app, "--gate-ms", o.gate_ms, 0, 3'600'000, "MS",
                         "Hold the lock (of --locks 1) from the start this long, not counted, so\n"
                         "that the queue fills while the tasks enter; 0: no gate");
    app.add_flag("--local-handoff", o.local_handoff,
                 "The tasks of this process share one node a lock (the library's default;\n"
                 "without it, a node per task): the memory curve");
    zkbench::add_integer(app, "--start-at-ms", o.start_at_ms, 0, 100'000'000'000'000, "EPOCH_MS",
                         "Start time, ms since the epoch; 0: at once");
    zkbench::add_integer(app, "--time-limit", o.time_limit, 1, 86'400, "SECONDS",
                         "Overall limit; exceeding it is an error");
    zkbench::parse_command_line(app, argc, argv);
    if (auto problem = zkcoro::check_path(o.path); o.redis.empty() && !problem.ok())
        throw bench_error(fmt::format("--path: {}", problem.describe(o.path)));
    return o;
}

std::int64_t monotonic_ns()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now().time_since_epoch()).count();
}

// Waits until --start-at-ms (shared by the processes of one point).
asio::awaitable<void> wait_for_start(const options& o)
{
    if (o.start_at_ms <= 0)
        co_return;
    auto wait = std::chrono::system_clock::time_point(std::chrono::milliseconds(o.start_at_ms)) -
                std::chrono::system_clock::now();
    if (wait > std::chrono::minutes(10))
        throw bench_error("--start-at-ms is more than 10 minutes away");
    if (wait > wait.zero()) {
        asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::duration_cast<clock_type::duration>(wait));
        co_await t.async_wait(asio::use_awaitable);
    }
}

std::string lock_name(const options& o, long k)
{
    return o.locks == 1 ? o.path : fmt::format("{}/l{}", o.path, k);
}

// The tasks on either backend: `make(name)` makes the mutex object of a lock (when first used, as
// a service keeps one per lock it takes); `counters()` reads the client's {requests, events}.
template <class Mutex, class Make, class Counters>
asio::awaitable<void> drive(const options& o, results& res, Make make, Counters counters)
{
    auto ex = co_await asio::this_coro::executor;
    std::unordered_map<long, std::unique_ptr<Mutex>> mutexes;
    auto lock_of = [&](long k) -> Mutex& {
        auto& m = mutexes[k];
        if (!m)
            m = make(lock_name(o, k));
        return *m;
    };
    std::mt19937_64 rng(static_cast<std::uint64_t>(::getpid()));
    std::uniform_int_distribution<long> pick(0, o.locks - 1);
    co_await wait_for_start(o);
    const auto counts0 = counters();
    const double cpu0 = zkbench::cpu_us();
    const long long bytes_in0 = tcp_bytes_received();
    const auto t0 = clock_type::now();
    if (o.duration_ms == 0)
        res.holds.reserve(static_cast<std::size_t>(o.tasks * o.rounds));
    const auto end = t0 + std::chrono::milliseconds(o.duration_ms);
    std::vector<long> inside(static_cast<std::size_t>(o.locks), 0);

    auto group = std::make_shared<zkbench::task_group>(ex);
    group->tasks = o.tasks;
    if (o.gate_ms > 0) {
        // The gate: held while the tasks of every process enter, released at start + gate_ms.
        auto gate = co_await lock_of(0).acquire(zkbench::time_left());
        if (!gate)
            throw bench_error("the gate's acquisition timed out (time limit)");
        asio::co_spawn(ex, [&o, t0, g = std::make_shared<zkcoro::guard>(std::move(*gate))]() -> asio::awaitable<void> {
            asio::steady_timer t(co_await asio::this_coro::executor, t0 + std::chrono::milliseconds(o.gate_ms));
            co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
            co_await g->release();
        }, asio::detached);
    }
    asio::steady_timer ramp(ex);
    res.rss_kb_start = zkbench::rss_bytes() / 1024;
    long asking = 0;  // tasks that have called acquire at least once
    for (long t = 0; t < o.tasks; ++t) {
        // Tasks enter --entry-per-s a second: 10 000 entering at once sent the server 10 000
        // listings of up to 10 000 names (about 3 GB of replies), more than its heap (the test
        // harness's 256 MB); 8 000 a second (4 processes) did too.
        if (const auto due = t0 + std::chrono::nanoseconds(t * 1'000'000'000LL / o.entry_per_s); due > clock_type::now()) {
            ramp.expires_at(due);
            co_await ramp.async_wait(asio::use_awaitable);
        }
        asio::co_spawn(ex, [&, group]() -> asio::awaitable<void> {
            try {
                for (long r = 0; group->first_error.empty(); ++r) {
                    if (o.duration_ms > 0 ? clock_type::now() >= end || r >= 100'000'000 : r >= o.rounds)
                        break;
                    zkbench::check_deadline("waiting for the lock");
                    const long k = pick(rng);
                    if (r == 0)
                        ++asking;
                    auto g = co_await lock_of(k).acquire(zkbench::time_left());
                    if (!g)
                        throw bench_error("acquire timed out (time limit)");
                    const auto granted = monotonic_ns();
                    auto& in = inside[static_cast<std::size_t>(k)];
                    if (++in > 1)
                        throw bench_error("two tasks of this process held one lock at once");
                    ++res.acquisitions;
                    --in;
                    const auto released = monotonic_ns();
                    co_await g->release();
                    res.holds.push_back({k, granted, released});
                }
            } catch (const std::exception& e) {
                group->error(e.what());
            }
            group->task_done();
        }, asio::detached);
    }
    // Every task has entered (most wait in the queue): the client's memory with the queue full.
    // With the gate held, every task is then suspended in acquire: each has asked, and after a
    // few more turns of the event loop (each lets every handler then queued run) the steps an
    // acquire takes before it waits have run. Bounded by the time limit.
    if (o.gate_ms > 0) {
        for (int settled = 0; settled < 64;) {
            zkbench::check_deadline("waiting for the tasks to enter");
            co_await asio::post(ex, asio::use_awaitable);
            if (asking >= o.tasks || group->finished > 0)
                ++settled;
        }
    }
    res.rss_kb_entered = zkbench::rss_bytes() / 1024;
    co_await group->wait("the waiters");
    res.wall_ms = std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
    const auto counts = counters();
    res.requests = counts.first - counts0.first;
    res.watch_events = counts.second - counts0.second;
    res.cpu_us = zkbench::cpu_us() - cpu0;
    res.bytes_in = tcp_bytes_received() - bytes_in0;
    res.rss_kb = zkbench::rss_bytes() / 1024;
    if (!group->first_error.empty())
        throw bench_error(group->first_error);
}

asio::awaitable<void> run(const options& o, results& res)
{
    auto ex = co_await asio::this_coro::executor;
#if !ZKCORO_SCALE_REDIS
    if (!o.redis.empty())
        throw bench_error("--redis: this build has no Redis backend (configured with -Dredis=disabled)");
#else
    if (!o.redis.empty()) {
        // Redis keeps no queue: the waiters of all processes retry on each release's notification,
        // so the commands per acquisition are the server's to count (bench/scale.sh: INFO stats).
        zkcoro::redis_client rc(ex, o.redis);
        zkcoro::redis_mutex_options mo;
        mo.local_handoff = false;  // every task competes on the server, as every ZooKeeper task queues
        co_await drive<zkcoro::redis_mutex>(
            o, res, [&](std::string key) { return std::make_unique<zkcoro::redis_mutex>(rc, std::move(key), mo); },
            [] { return std::pair<std::uint64_t, std::uint64_t>{0, 0}; });
        co_return;
    }
#endif
    zkcoro::client zk(ex, zkbench::client_config(o.connect));
    co_await zk.async_connect();
    zkcoro::mutex_options mo;
    // A node per task: the queue in ZooKeeper is every task of every process (the memory curve,
    // --local-handoff: one node for the process, its tasks queue in it).
    mo.local_handoff = o.local_handoff;
    co_await drive<zkcoro::mutex>(
        o, res, [&](std::string path) { return std::make_unique<zkcoro::mutex>(zk, std::move(path), mo); },
        [&] { return std::pair<std::uint64_t, std::uint64_t>{zk.stats().requests, zk.stats().watch_events}; });
    // The last process to finish removes the lock paths (the others find them still in use).
    std::vector<std::string> paths;
    if (o.locks > 1)
        for (long k = 0; k < o.locks; ++k)
            paths.push_back(lock_name(o, k));
    paths.push_back(o.path);
    for (const auto& p : paths) {
        auto [ec] = co_await zk.async_remove(p, -1, asio::as_tuple(asio::use_awaitable));
        if (ec && ec != zkcoro::zk_errc::no_node && ec != zkcoro::zk_errc::not_empty)
            std::fprintf(stderr, "warning: deleting %s: %s\n", p.c_str(), ec.message().c_str());
    }
}

int finish(const options& o, const results& res)
{
    fmt::print("PART id={} tasks={} rounds={} locks={} duration_ms={} acquisitions={} requests={} watch_events={} "
               "cpu_us={:.0f} bytes_in={} rss_kb={} rss_kb_entered={} rss_kb_start={} wall_ms={:.1f}\n",
               o.id, o.tasks, o.duration_ms > 0 ? 0 : o.rounds, o.locks, o.duration_ms, res.acquisitions, res.requests,
               res.watch_events, res.cpu_us, res.bytes_in, res.rss_kb, res.rss_kb_entered, res.rss_kb_start,
               res.wall_ms);
    if (!o.events.empty()) {
        std::ofstream out(o.events);
        for (const auto& h : res.holds)
            out << h.lock << ' ' << h.granted << ' ' << h.released << '\n';
        if (!out) {
            std::fprintf(stderr, "zkcoro-scale-bench: could not write %s\n", o.events.c_str());
            return 1;
        }
    }
    return o.duration_ms > 0 || res.acquisitions == o.tasks * o.rounds ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv)
{
    return zkbench::bench_main<options, results>(argc, argv, "zkcoro-scale-bench", parse, std::chrono::seconds(30),
                                                 run, finish);
}
