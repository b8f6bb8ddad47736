// The tree scan's cost (issue 23): N lock paths, each with one holder node (Curator's name form,
// zkcoro's default data), under 100 groups; zkcoro::async_scan of the whole tree with a few
// bounds on the requests in flight; the time, the requests made and the most outstanding.
//
//   build/bench/zkcoro-scan-bench --connect 127.0.0.1:2181 [--locks 10000] [--in-flight 1,8,64]
//
// Prints one RESULT line per bound. The tree is made in transactions of 100 creates and removed
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

asio::awaitable<void> run(zkcoro::client& zk, int locks, std::vector<std::size_t> bounds)
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
        zkbench::add_shared_options(app, connect, zkbench::bracketed_ipv4::accept);
        int locks = 10000;
        std::vector<std::size_t> bounds{1, 8, 64};
        app.add_option("--locks", locks, "Lock paths to make")->check(CLI::Range(1, 1000000));
        app.add_option("--in-flight", bounds, "Bounds on the requests in flight, one scan each")->delimiter(',');
        zkbench::parse_command_line(app, argc, argv);
        asio::io_context ioc;
        zkcoro::client zk(ioc.get_executor(), zkbench::client_config(connect));
        std::exception_ptr error;
        asio::co_spawn(ioc, run(zk, locks, bounds), [&](std::exception_ptr e) {
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
