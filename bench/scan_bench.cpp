// The tree scan's cost (issue 23): N lock paths, each with one holder node (Curator's name form,
// zkcoro's default data), under 100 groups; zkcoro::async_scan of the whole tree with a few
// bounds on the requests in flight; the time, the requests made and the most outstanding.
//
//   build/bench/zkcoro-scan-bench --connect 127.0.0.1:2181 [--locks 10000] [--in-flight 1,8,64]
//   build/bench/zkcoro-scan-bench --connect H1:P1,H2:P2,H3:P3 --locks 1000 --readers 6 --duration-ms 5000
//
// Prints one RESULT line per bound. With --readers R (issue 36, curve 4: reads spread over the
// members), R more clients, reader i connected to member i mod M of the connect string only, scan
// the tree again and again (8 requests in flight each) for --duration-ms, all at once; one
// RESULT line: scans and requests a second over all readers, and the scans of each member's readers. The tree is made in transactions of 100 creates and removed
// at the end (the lock nodes are ephemeral: they go with the session).
#include "bench_common.hpp"

#include <zkcoro/client.hpp>
#include <zkcoro/scan.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace asio = boost::asio;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

asio::awaitable<void> check(zkcoro::error_code ec, std::string_view what)
{
    if (ec)
        throw std::runtime_error(fmt::format("{}: {}", what, ec.message()));
    co_return;
}

struct readers_options {
    int readers = 0;
    long duration_ms = 5000;
    std::string connect;  // every member, comma separated
};

struct reader_counts {
    long scans = 0;
    std::uint64_t requests = 0;
};

// One reader: its own session on one member, scanning until the deadline.
asio::awaitable<void> read_until(zkcoro::client& zk, std::string root, int locks,
                                 std::chrono::steady_clock::time_point deadline, reader_counts& counts)
{
    {
        auto [ec] = co_await zk.async_connect(use_tuple);
        co_await check(ec, "reader connect");
    }
    for (long n = 0; n < 1'000'000 && std::chrono::steady_clock::now() < deadline; ++n) {
        auto [ec, r] = co_await zkcoro::async_scan(zk, root, {.max_in_flight = 8}, use_tuple);
        co_await check(ec, "reader scan");
        if (r.locks.size() != static_cast<std::size_t>(locks))
            throw std::runtime_error(fmt::format("a reader's scan found {} locks, not {}", r.locks.size(), locks));
        ++counts.scans;
        counts.requests += r.requests;
    }
}

asio::awaitable<void> read_spread(const readers_options& ro, std::string root, int locks)
{
    auto ex = co_await asio::this_coro::executor;
    const auto members = zkbench::split_commas(ro.connect);
    std::vector<std::unique_ptr<zkcoro::client>> clients;
    std::vector<reader_counts> counts(static_cast<std::size_t>(ro.readers));
    for (int i = 0; i < ro.readers; ++i)
        clients.push_back(std::make_unique<zkcoro::client>(
            ex, zkbench::client_config(members[static_cast<std::size_t>(i) % members.size()])));
    const auto t0 = std::chrono::steady_clock::now();
    const auto deadline = t0 + std::chrono::milliseconds(ro.duration_ms);
    // All readers at once, as a task group (bench_common.hpp): its wait is bounded by the time
    // limit plus 5 s, here 60 s after the readers' deadline; the first failure ends the bench.
    zkbench::g_deadline = deadline + std::chrono::seconds(55);
    zkbench::task_group group(ex);
    group.tasks = static_cast<long>(clients.size());
    for (std::size_t i = 0; i < clients.size(); ++i)
        asio::co_spawn(ex, read_until(*clients[i], root, locks, deadline, counts[i]),
                       [&group](std::exception_ptr e) {
                           try {
                               if (e)
                                   std::rethrow_exception(e);
                           } catch (const std::exception& x) {
                               group.error(x.what());
                           }
                           group.task_done();
                       });
    co_await group.wait("the readers");
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (auto& c : clients)
        c->close();
    if (!group.first_error.empty())
        throw std::runtime_error(group.first_error);
    long scans = 0;
    std::uint64_t requests = 0;
    std::vector<long> per_member(members.size(), 0);
    for (std::size_t i = 0; i < counts.size(); ++i) {
        scans += counts[i].scans;
        requests += counts[i].requests;
        per_member[i % members.size()] += counts[i].scans;
    }
    std::string spread;
    for (auto n : per_member)
        spread += fmt::format("{}{}", spread.empty() ? "" : "/", n);
    fmt::print("RESULT curve=reads locks={} members={} readers={} duration_ms={:.0f} scans_per_s={:.1f} "
               "requests_per_s={:.0f} scans_per_member={}\n",
               locks, members.size(), ro.readers, s * 1000, scans / s, static_cast<double>(requests) / s, spread);
    std::fflush(stdout);
}

asio::awaitable<void> run(zkcoro::client& zk, int locks, std::vector<std::size_t> bounds,
                          const readers_options& ro)
{
    {
        auto [ec] = co_await zk.async_connect(use_tuple);
        co_await check(ec, "connect");
    }
    const std::string root = fmt::format("/zkcoro-scan-bench-{}", ::getpid());
    const int groups = 100;
    std::vector<zkcoro::multi_op> ops;
    ops.push_back(zkcoro::create_op{root, "", zkcoro::create_mode::persistent});
    for (int g = 0; g < groups; ++g)
        ops.push_back(zkcoro::create_op{fmt::format("{}/g{:02}", root, g), "", zkcoro::create_mode::persistent});
    {
        auto [ec, r] = co_await zk.async_multi(std::move(ops), use_tuple);
        co_await check(ec, "creating the groups");
    }
    const auto t_make = std::chrono::steady_clock::now();
    for (int i = 0; i < locks;) {
        std::vector<zkcoro::multi_op> batch;
        for (int k = 0; k < 50 && i < locks; ++k, ++i) {
            const auto path = fmt::format("{}/g{:02}/lock{:05}", root, i % groups, i);
            batch.push_back(zkcoro::create_op{path, "", zkcoro::create_mode::persistent});
            batch.push_back(zkcoro::create_op{path + "/_c_6f1c2e0a-lock-0000000000",
                                              fmt::format("host=bench pid={} program=zkcoro-scan-bench", ::getpid()),
                                              zkcoro::create_mode::ephemeral});
        }
        auto [ec, r] = co_await zk.async_multi(std::move(batch), use_tuple);
        co_await check(ec, "creating lock paths");
    }
    fmt::print("made {} lock paths under {} in {:.1f} s\n", locks, root,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t_make).count());
    for (auto bound : bounds) {
        const auto t0 = std::chrono::steady_clock::now();
        auto [ec, r] = co_await zkcoro::async_scan(zk, root, {.max_in_flight = bound}, use_tuple);
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        co_await check(ec, "scan");
        if (r.locks.size() != static_cast<std::size_t>(locks))
            throw std::runtime_error(fmt::format("the scan found {} locks, not {}", r.locks.size(), locks));
        fmt::print("RESULT scan locks={} in_flight_bound={} time_ms={:.0f} requests={} listings={} reads={} "
                   "max_in_flight_seen={}\n",
                   locks, bound, ms, r.requests, r.nodes_listed, r.requests - r.nodes_listed, r.max_in_flight_seen);
        std::fflush(stdout);
    }
    if (ro.readers > 0)
        co_await read_spread(ro, root, locks);
    // Remove the persistent nodes (the ephemeral ones first), bounded: transactions of 100.
    for (int i = 0; i < locks;) {
        std::vector<zkcoro::multi_op> batch;
        for (int k = 0; k < 50 && i < locks; ++k, ++i) {
            const auto path = fmt::format("{}/g{:02}/lock{:05}", root, i % groups, i);
            batch.push_back(zkcoro::remove_op{path + "/_c_6f1c2e0a-lock-0000000000"});
            batch.push_back(zkcoro::remove_op{path});
        }
        auto [ec, r] = co_await zk.async_multi(std::move(batch), use_tuple);
        co_await check(ec, "removing lock paths");
    }
    std::vector<zkcoro::multi_op> rm;
    for (int g = 0; g < groups; ++g)
        rm.push_back(zkcoro::remove_op{fmt::format("{}/g{:02}", root, g)});
    rm.push_back(zkcoro::remove_op{root});
    auto [ec, r] = co_await zk.async_multi(std::move(rm), use_tuple);
    co_await check(ec, "removing the groups");
}

}  // namespace

int main(int argc, char** argv)
{
    try {
        CLI::App app{"zkcoro::async_scan of a tree of lock paths"};
        std::string connect;
        zkbench::add_shared_options(app, connect, zkbench::bracketed_ipv4::accept, zkbench::connect_servers::list);
        int locks = 10000;
        std::vector<std::size_t> bounds{1, 8, 64};
        app.add_option("--locks", locks, "Lock paths to make")->check(CLI::Range(1, 1000000));
        app.add_option("--in-flight", bounds, "Bounds on the requests in flight, one scan each")->delimiter(',');
        readers_options ro;
        app.add_option("--readers", ro.readers,
                       "Then this many clients scan at once, reader i on member i mod M of --connect")
            ->check(CLI::Range(0, 1000));
        app.add_option("--duration-ms", ro.duration_ms, "How long the readers scan")->check(CLI::Range(1, 3'600'000));
        zkbench::parse_command_line(app, argc, argv);
        ro.connect = connect;
        asio::io_context ioc;
        zkcoro::client zk(ioc.get_executor(), zkbench::client_config(connect));
        std::exception_ptr error;
        asio::co_spawn(ioc, run(zk, locks, bounds, ro), [&](std::exception_ptr e) {
            error = e;
            zk.close();
        });
        ioc.run();
        if (error)
            std::rethrow_exception(error);
        return 0;
    } catch (const std::exception& e) {
        fmt::print(stderr, "zkcoro-scan-bench: {}\n", e.what());
        return 1;
    }
}
