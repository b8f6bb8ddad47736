// 09_metrics_endpoint: lock metrics on a Prometheus /metrics endpoint. The library renders the
// text (zkcoro::to_prometheus) and starts no server: this program serves it over HTTP with
// Boost.Beast on 127.0.0.1 (an ephemeral port).
//
// Some work first: 20 tasks share two mutexes (waits, in-memory handoffs), and one try_acquire
// finds a lock held (a timeout). Then:
//   09_metrics_endpoint                 fetches its own /metrics once over HTTP, prints it, exits;
//   09_metrics_endpoint --serve N [K]   prints "serving http://127.0.0.1:PORT/metrics", answers
//                                       requests, and exits after K (default 1) GET /metrics were
//                                       answered, or after N seconds with fewer (exit 1).
// The server is one to copy: every connection is a coroutine of its own (a slow client delays no
// other), has 5 s to send its request and take the answer, and may send 8 KiB of headers; a
// malformed request gets 400, headers too large 431, a method other than GET or HEAD 405, another
// path 404, and the server goes on serving. One request per connection (Connection: close).
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
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>

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

// The server's state, shared by the coroutines of its connections. They may outlive the caller's
// frame for a moment (until they see the close): once stopped, nothing is rendered.
struct endpoint {
    tcp::acceptor acceptor;
    std::function<std::string()> metrics;  // the text of a scrape, rendered for each
    int scrapes_left;                      // stops after this many GET /metrics answered
    bool stopped = false;
    std::list<beast::tcp_stream> open{};   // the connections being served

    // Accepts no more connections and closes those still open.
    void stop()
    {
        stopped = true;
        acceptor.close();
        for (auto& stream : open)
            stream.close();
    }
};

// The answer to a request that Beast could parse: the scrape for GET or HEAD /metrics, or an error.
http::response<http::string_body> answer(const http::request<http::empty_body>& req, endpoint& ep)
{
    http::response<http::string_body> res{http::status::ok, 11};
    const auto path = req.target().substr(0, req.target().find('?'));
    if (req.version() >= 11 && req.count(http::field::host) != 1) {
        res.result(http::status::bad_request);  // HTTP/1.1 requires one Host field
    } else if (path != "/metrics") {
        res.result(http::status::not_found);
    } else if (req.method() != http::verb::get && req.method() != http::verb::head) {
        res.result(http::status::method_not_allowed);
        res.set(http::field::allow, "GET, HEAD");
    } else {
        res.set(http::field::content_type, zkcoro::prometheus_content_type);
        res.body() = ep.metrics();
    }
    return res;
}

// One connection: one request, its answer, the close.
asio::awaitable<void> session(std::shared_ptr<endpoint> ep, beast::tcp_stream& stream)
{
    constexpr auto token = asio::as_tuple(asio::use_awaitable);
    stream.expires_after(5s);  // for the whole exchange; at the deadline the socket is closed
    beast::flat_buffer buffer;
    http::request_parser<http::empty_body> parser;  // a scrape has no body: the header is read
    parser.header_limit(8 * 1024);
    auto [ec, n] = co_await http::async_read_header(stream, buffer, parser, token);
    http::response<http::string_body> res;
    if (ep->stopped) {
        co_return;
    } else if (!ec) {
        res = answer(parser.get(), *ep);
    } else if (ec == http::error::header_limit) {
        res.result(http::status::request_header_fields_too_large);
    } else if (ec.category() == make_error_code(http::error::bad_target).category() &&
               ec != http::error::end_of_stream && ec != http::error::partial_message) {
        res.result(http::status::bad_request);  // Beast's parser refused the request
    } else {
        co_return;  // the client left, or did not send its request in time
    }
    const bool head = !ec && parser.get().method() == http::verb::head;
    if (res.body().empty())
        res.body() = fmt::format("{}\n", http::obsolete_reason(res.result()));
    res.prepare_payload();
    if (head)
        res.body().clear();  // a GET's headers, Content-Length included, without the body
    res.keep_alive(false);   // one request per connection
    std::tie(ec, n) = co_await http::async_write(stream, res, token);
    if (!ec && !head && res.result() == http::status::ok && --ep->scrapes_left == 0)
        ep->stop();
    // Read what the client still sends until it closes (or the deadline): closing a socket with
    // unread data resets the connection, and the client could lose the answer.
    stream.socket().shutdown(tcp::socket::shutdown_send, ec);
    char discard[1024];
    while (!ec)
        std::tie(ec, n) = co_await stream.async_read_some(asio::buffer(discard), token);
}

// Accepts connections, each served by a coroutine of its own, until stopped (or cancelled).
asio::awaitable<void> serve(std::shared_ptr<endpoint> ep)
{
    // However this ends (the last scrape, the caller's cancellation), the connections end with it.
    struct stop_at_exit {
        endpoint& ep;
        ~stop_at_exit() { ep.stop(); }
    } guard{*ep};
    auto ex = co_await asio::this_coro::executor;
    for (;;) {
        auto [ec, socket] = co_await ep->acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
        if (ec == asio::error::operation_aborted)
            co_return;
        if (ec) {  // out of file descriptors, say: try again soon
            asio::steady_timer pause(ex, 100ms);
            co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
            continue;
        }
        auto it = ep->open.emplace(ep->open.end(), std::move(socket));
        asio::co_spawn(ex, session(ep, *it), [ep, it](std::exception_ptr) { ep->open.erase(it); });
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
    int serve_seconds = 0, scrapes = 1;
    if ((argc == 3 || argc == 4) && std::string_view(argv[1]) == "--serve") {
        serve_seconds = std::stoi(argv[2]);
        scrapes = argc == 4 ? std::stoi(argv[3]) : 1;
    }
    if (argc != 1 && (serve_seconds < 1 || scrapes < 1)) {
        fmt::print(stderr, "usage: 09_metrics_endpoint [--serve SECONDS [SCRAPES]]\n");
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
    auto ep = std::make_shared<endpoint>(
        std::move(acceptor), [&] { return metrics_text(a, b, other); }, scrapes);
    int rc = 0;
    if (serve_seconds == 0) {
        // Our own scrape: the server side and the client side at once.
        const std::string body = co_await (serve(ep) && fetch(port));
        fmt::print("{}", body);
    } else {
        fmt::print("serving http://127.0.0.1:{}/metrics\n", port);
        std::fflush(stdout);
        asio::steady_timer limit(ex, std::chrono::seconds(serve_seconds));
        co_await (serve(ep) || limit.async_wait(asio::use_awaitable));
        if (ep->scrapes_left > 0) {
            fmt::print(stderr, "{} of {} scrapes answered within {} s\n", scrapes - ep->scrapes_left, scrapes,
                       serve_seconds);
            rc = 1;
        }
    }
    co_await zk.async_close();  // the lock paths' parents are left: persistent, empty
    co_return rc;
}
