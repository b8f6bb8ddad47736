// 09_metrics_endpoint: lock metrics on a Prometheus /metrics endpoint. The library renders the
// text (zkcoro::to_prometheus) and starts no server: this program serves it over HTTP with
// Boost.Beast on 127.0.0.1 (an ephemeral port).
//
// Some work first: 20 tasks share two mutexes (waits, in-memory handoffs), and one try_acquire
// finds a lock held (a timeout). Then:
//   09_metrics_endpoint               fetches its own /metrics once over HTTP, prints it, exits;
//   09_metrics_endpoint --serve N     prints "serving http://127.0.0.1:PORT/metrics", answers
//                                     scrapes, and exits after the first one answered, or after
//                                     N seconds with none (exit 1).
// ZooKeeper: $ZK_CONNECT (the examples' main.cpp).
#include "example.hpp"

#include <zkcoro/prometheus.hpp>

#include <boost/asio.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <fmt/format.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;
using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;

namespace {

// The metrics of the locks this program uses, as Prometheus text.
// (`other`: a finished object's on a's path; samples of one path and recipe are summed.)
std::string metrics_text(zkcoro::mutex& a, zkcoro::mutex& b, const zkcoro::lock_metrics& other)
{
    return zkcoro::to_prometheus(
        {{a.path(), "mutex", a.metrics()}, {b.path(), "mutex", b.metrics()}, {a.path(), "mutex", other}});
}

// Answers one HTTP connection: GET /metrics, else 404. True when /metrics was served.
asio::awaitable<bool> serve_one(tcp::socket socket, std::string body)
{
    beast::flat_buffer buffer;
    http::request<http::string_body> req;
    co_await http::async_read(socket, buffer, req, asio::use_awaitable);
    const bool ok = req.method() == http::verb::get && req.target() == "/metrics";
    http::response<http::string_body> res{ok ? http::status::ok : http::status::not_found, req.version()};
    res.set(http::field::content_type, ok ? std::string(zkcoro::prometheus_content_type) : "text/plain");
    res.body() = ok ? std::move(body) : "not found\n";
    res.prepare_payload();
    res.keep_alive(false);
    co_await http::async_write(socket, res, asio::use_awaitable);
    beast::error_code ec;
    socket.shutdown(tcp::socket::shutdown_send, ec);
    co_return ok;
}

// Serves until one /metrics scrape was answered.
asio::awaitable<void> serve(tcp::acceptor& acceptor, zkcoro::mutex& a, zkcoro::mutex& b,
                            const zkcoro::lock_metrics& other)
{
    for (;;) {
        auto socket = co_await acceptor.async_accept(asio::use_awaitable);
        if (co_await serve_one(std::move(socket), metrics_text(a, b, other)))
            co_return;
    }
}

// GET http://127.0.0.1:port/metrics with Beast: the body.
asio::awaitable<std::string> fetch(unsigned short port)
{
    tcp::socket socket(co_await asio::this_coro::executor);
    co_await socket.async_connect({asio::ip::address_v4::loopback(), port}, asio::use_awaitable);
    http::request<http::empty_body> req{http::verb::get, "/metrics", 11};
    req.set(http::field::host, "127.0.0.1");
    co_await http::async_write(socket, req, asio::use_awaitable);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    co_await http::async_read(socket, buffer, res, asio::use_awaitable);
    co_return res.body();
}

}  // namespace

asio::awaitable<int> co_main(zkcoro::client_config cfg, int argc, char** argv)
{
    int serve_seconds = 0;
    if (argc == 3 && std::string_view(argv[1]) == "--serve")
        serve_seconds = std::stoi(argv[2]);
    else if (argc != 1) {
        fmt::print(stderr, "usage: 09_metrics_endpoint [--serve SECONDS]\n");
        co_return 2;
    }
    auto ex = co_await asio::this_coro::executor;
    zkcoro::client zk(ex, cfg);
    co_await zk.async_connect();
    const std::string root = fmt::format("/zkcoro-example-metrics-{}", ::getpid());
    zkcoro::mutex a(zk, root + "/a"), b(zk, root + "/b");

    // The work: 20 tasks, 10 per lock, each holding it 2 ms.
    int done = 0;
    for (int i = 0; i < 20; ++i)
        asio::co_spawn(ex, [&, i]() -> asio::awaitable<void> {
            auto& m = i % 2 ? a : b;
            auto g = co_await m.acquire();
            asio::steady_timer hold(ex, 2ms);
            co_await hold.async_wait(asio::use_awaitable);
            co_await g.release();
            ++done;
        }, asio::detached);
    zkcoro::lock_metrics other;
    {
        auto g = co_await a.acquire();           // queued behind the tasks, then held
        zkcoro::mutex elsewhere(zk, a.path());   // another object queues in ZooKeeper: held, a timeout
        auto none = co_await elsewhere.try_acquire();
        fmt::print(stderr, "another object's try_acquire while held: {}\n", none ? "granted (unexpected)" : "timed out");
        other = elsewhere.metrics();
        co_await g.release();
    }
    while (done < 20) {
        asio::steady_timer t(ex, 5ms);
        co_await t.async_wait(asio::use_awaitable);
    }

    tcp::acceptor acceptor(ex, {asio::ip::address_v4::loopback(), 0});
    const auto port = acceptor.local_endpoint().port();
    int rc = 0;
    if (serve_seconds == 0) {
        // Our own scrape: the server side and the client side at once.
        const std::string body = co_await (serve(acceptor, a, b, other) && fetch(port));
        fmt::print("{}", body);
    } else {
        fmt::print("serving http://127.0.0.1:{}/metrics\n", port);
        std::fflush(stdout);
        asio::steady_timer limit(ex, std::chrono::seconds(serve_seconds));
        auto which = co_await (serve(acceptor, a, b, other) || limit.async_wait(asio::use_awaitable));
        if (which.index() == 1) {
            fmt::print(stderr, "no scrape within {} s\n", serve_seconds);
            rc = 1;
        }
    }
    co_await zk.async_close();  // the lock paths' parents are left: persistent, empty
    co_return rc;
}
