// How the cost of one lock grows with its queue (issue 36, curve 1): one process of several, with
// --tasks tasks on ONE lock path, each acquiring it --rounds times, every task with a node of its
// own (mutex_options::local_handoff off: Curator's behaviour, so that the queue in ZooKeeper is
// tasks x processes long). A task that releases queues again at once, so the queue stays about as
// long as there are tasks until the last rounds.
//
// Prints one PART line with what this process counted, from the start (--start-at-ms, shared by
// the processes) to its last release:
//   PART id=p1 tasks=T rounds=R acquisitions=A requests=Q watch_events=E cpu_us=C bytes_in=B wall_ms=W
// requests: sent to the server (zkcoro::client::stats); watch_events: received; cpu_us: user +
// system CPU of the process; bytes_in: bytes received over TCP (the replies, the queue listings
// among them). With --events FILE, one line per acquisition, "GRANT_NS RELEASE_NS"
// (CLOCK_MONOTONIC, shared by the processes of the machine): bench/scale.sh merges the files,
// checks that no two holds overlap and takes the handoff latency (a release to the next grant).
//
// Every wait uses the time left of --time-limit as its timeout; a watchdog ends the process after
// it. The lock's nodes are the library's; the path is the caller's to choose and remove.
#include "bench_common.hpp"

#include <zkcoro/guard.hpp>
#include <zkcoro/mutex.hpp>
#include <zkcoro/path.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>


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
    long tasks = 10;
    long rounds = 3;
    long start_at_ms = 0;
    long time_limit = 300;
};

struct results {
    long acquisitions = 0;
    std::uint64_t requests = 0, watch_events = 0;
    double cpu_us = 0;
    long long bytes_in = 0;
    double wall_ms = 0;
    std::vector<std::pair<std::int64_t, std::int64_t>> holds;  // grant, release (ns, monotonic)
};

// A comma-separated list of loopback HOST:PORT (a ZooKeeper connect string without chroot).
CLI::Validator loopback_list()
{
    return CLI::Validator(
        [](std::string& s) -> std::string {
            const auto one = zkbench::loopback_only(zkbench::bracketed_ipv4::accept);
            std::string out;
            for (std::size_t from = 0; from <= s.size();) {
                auto comma = s.find(',', from);
                if (comma == std::string::npos)
                    comma = s.size();
                auto part = s.substr(from, comma - from);
                if (auto error = one(part); !error.empty())
                    return error;
                out += (out.empty() ? "" : ",") + part;
                from = comma + 1;
            }
            s = out;
            return {};
        },
        "", "loopback list");
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
        ->transform(loopback_list());
    app.add_option("--path", o.path, "The lock path, shared with the other processes")->required();
    app.add_option("--id", o.id, "A name for the PART line (default p1)");
    app.add_option("--events", o.events, "Writes \"GRANT_NS RELEASE_NS\" per acquisition to this file");
    zkbench::add_integer(app, "--tasks", o.tasks, 1, 100'000, "T", "Tasks of this process on the lock");
    zkbench::add_integer(app, "--rounds", o.rounds, 1, 10'000, "R", "Acquisitions per task");
    zkbench::add_integer(app, "--start-at-ms", o.start_at_ms, 0, 100'000'000'000'000, "EPOCH_MS",
                         "Start time, ms since the epoch; 0: at once");
    zkbench::add_integer(app, "--time-limit", o.time_limit, 1, 86'400, "SECONDS",
                         "Overall limit; exceeding it is an error");
    zkbench::parse_command_line(app, argc, argv);
    if (auto problem = zkcoro::check_path(o.path); !problem.ok())
        throw bench_error(fmt::format("--path: {}", problem.describe(o.path)));
    return o;
}

std::int64_t monotonic_ns()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now().time_since_epoch()).count();
}

asio::awaitable<void> run(const options& o, results& res)
{
    auto ex = co_await asio::this_coro::executor;
    zkcoro::client zk(ex, zkbench::client_config(o.connect));
    co_await zk.async_connect();
    zkcoro::mutex_options mo;
    mo.local_handoff = false;  // a node per task: the queue in ZooKeeper is every task of every process
    zkcoro::mutex m(zk, o.path, mo);
    if (o.start_at_ms > 0) {
        auto wait = std::chrono::system_clock::time_point(std::chrono::milliseconds(o.start_at_ms)) -
                    std::chrono::system_clock::now();
        if (wait > std::chrono::minutes(10))
            throw bench_error("--start-at-ms is more than 10 minutes away");
        if (wait > wait.zero()) {
            asio::steady_timer t(ex, std::chrono::duration_cast<clock_type::duration>(wait));
            co_await t.async_wait(asio::use_awaitable);
        }
    }
    const auto stats0 = zk.stats();
    const double cpu0 = zkbench::cpu_us();
    const long long bytes_in0 = tcp_bytes_received();
    const auto t0 = clock_type::now();
    res.holds.reserve(static_cast<std::size_t>(o.tasks * o.rounds));

    auto group = std::make_shared<zkbench::task_group>(ex);
    group->tasks = o.tasks;
    long inside = 0;
    for (long t = 0; t < o.tasks; ++t)
        asio::co_spawn(ex, [&, group]() -> asio::awaitable<void> {
            try {
                for (long r = 0; r < o.rounds && group->first_error.empty(); ++r) {
                    zkbench::check_deadline("waiting for the lock");
                    auto g = co_await m.acquire(zkbench::time_left());
                    if (!g)
                        throw bench_error("acquire timed out (time limit)");
                    const auto granted = monotonic_ns();
                    if (++inside > 1)
                        throw bench_error("two tasks of this process held the lock at once");
                    ++res.acquisitions;
                    --inside;
                    const auto released = monotonic_ns();
                    co_await g->release();
                    res.holds.emplace_back(granted, released);
                }
            } catch (const std::exception& e) {
                group->error(e.what());
            }
            group->task_done();
        }, asio::detached);
    co_await group->wait("the waiters");
    res.wall_ms = std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
    res.requests = zk.stats().requests - stats0.requests;
    res.watch_events = zk.stats().watch_events - stats0.watch_events;
    res.cpu_us = zkbench::cpu_us() - cpu0;
    res.bytes_in = tcp_bytes_received() - bytes_in0;
    if (!group->first_error.empty())
        throw bench_error(group->first_error);
    // The last process to finish removes the lock path (the others find it still in use).
    auto [ec] = co_await zk.async_remove(o.path, -1, asio::as_tuple(asio::use_awaitable));
    if (ec && ec != zkcoro::zk_errc::no_node && ec != zkcoro::zk_errc::not_empty)
        std::fprintf(stderr, "warning: deleting %s: %s\n", o.path.c_str(), ec.message().c_str());
}

int finish(const options& o, const results& res)
{
    fmt::print("PART id={} tasks={} rounds={} acquisitions={} requests={} watch_events={} cpu_us={:.0f} bytes_in={} "
               "wall_ms={:.1f}\n",
               o.id, o.tasks, o.rounds, res.acquisitions, res.requests, res.watch_events, res.cpu_us, res.bytes_in,
               res.wall_ms);
    if (!o.events.empty()) {
        std::ofstream out(o.events);
        for (const auto& [g, r] : res.holds)
            out << g << ' ' << r << '\n';
        if (!out) {
            std::fprintf(stderr, "zkcoro-scale-bench: could not write %s\n", o.events.c_str());
            return 1;
        }
    }
    return res.acquisitions == o.tasks * o.rounds ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv)
{
    return zkbench::bench_main<options, results>(argc, argv, "zkcoro-scale-bench", parse, std::chrono::seconds(30),
                                                 run, finish);
}
