// zkcoro-two-locks: one session takes a first lock and then, holding it, a second one, so that
// two such processes taking them in opposite orders deadlock (the wait-for cycle that
// `zklock status -r --cycles` names); the zkcoro counterpart of CuratorTwoLocks.java.
//
//   zkcoro-two-locks --connect HOST:PORT --first /a --second /b [--data TEXT] [--wait-ms 60000]
//                    [--second-after-line yes]
//
// --second-after-line yes: after the first lock is held, reads a line from stdin before asking
// for the second (so that a test makes both processes hold their first lock before either asks).
// stdout: "holding FIRST" once the first lock is held, "holding SECOND" if the second one is
// got (then both are kept), or "timed out SECOND" after --wait-ms. Runs until SIGTERM or SIGINT,
// then closes its session (its nodes vanish at once) and exits 0. Exit 2 on error or bad usage.
#include <zkcoro/client.hpp>
#include <zkcoro/mutex.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include <unistd.h>

namespace asio = boost::asio;

int main(int argc, char** argv)
{
    std::string connect, first, second, data;
    long wait_ms = 60000;
    bool after_line = false;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string_view k = argv[i];
        if (k == "--connect") connect = argv[i + 1];
        else if (k == "--first") first = argv[i + 1];
        else if (k == "--second") second = argv[i + 1];
        else if (k == "--data") data = argv[i + 1];
        else if (k == "--wait-ms") wait_ms = std::stol(argv[i + 1]);
        else if (k == "--second-after-line") after_line = std::string_view(argv[i + 1]) == "yes";
        else {
            fmt::print(stderr, "zkcoro-two-locks: unknown option {}\n", k);
            return 2;
        }
    }
    if (connect.empty() || first.empty() || second.empty() || argc % 2 == 0) {
        fmt::print(stderr, "usage: zkcoro-two-locks --connect HOST:PORT --first /a --second /b [--data TEXT] "
                           "[--wait-ms N]\n");
        return 2;
    }
    asio::io_context ioc;
    zkcoro::client_config cfg;
    cfg.connect_string = connect;
    cfg.session_timeout = std::chrono::milliseconds(4000);
    zkcoro::client zk(ioc.get_executor(), cfg);
    int rc = 0;
    bool stopping = false;
    asio::steady_timer forever(ioc, std::chrono::hours(24));
    asio::signal_set signals(ioc, SIGTERM, SIGINT);
    // The pending acquire completes with client_errc::closed, the wait with operation_aborted:
    // the task ends, its guards go, and run() returns.
    signals.async_wait([&](boost::system::error_code ec, int) {
        if (ec)
            return;
        stopping = true;
        zk.close();
        forever.cancel();
        zk.close();
    });
    asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
        try {
            co_await zk.async_connect(asio::use_awaitable);
            zkcoro::mutex a(zk, first, {.data = data});
            zkcoro::mutex b(zk, second, {.data = data});
            auto ga = co_await a.acquire();
            fmt::print("holding {}\n", first);
            std::fflush(stdout);
            if (after_line) {  // the caller says when: a line on stdin (e.g. from a FIFO)
                asio::posix::stream_descriptor in(ioc, ::dup(0));
                asio::streambuf line;
                co_await asio::async_read_until(in, line, '\n', asio::use_awaitable);
            }
            auto gb = co_await b.acquire(std::chrono::milliseconds(wait_ms));
            fmt::print("{} {}\n", gb ? "holding" : "timed out", second);
            std::fflush(stdout);
            co_await forever.async_wait(asio::as_tuple(asio::use_awaitable));
        } catch (const std::exception& e) {
            if (!stopping) {
                fmt::print(stderr, "zkcoro-two-locks: {}\n", e.what());
                rc = 2;
            }
        }
        signals.cancel();
        forever.cancel();
        zk.close();
    }, asio::detached);
    ioc.run();
    return rc;
}
