// Shared pieces of the integration tests: one real ZooKeeper server per test program (started
// on first use, stopped at exit), bounded coroutine runs, unique paths per test, and the fixture
// most tests start from (run_with_clients: connected clients and a path of their own).
#ifndef ZKCORO_TESTS_INTEGRATION_COMMON_HPP
#define ZKCORO_TESTS_INTEGRATION_COMMON_HPP

#include <zkcoro/zkcoro.hpp>

#include <zk_server.hpp>

#include "../unit/skipped_cases.hpp"  // ZKTEST_SKIP_CASE
#include "../unit/slack.hpp"          // zktest::relaxed

#include <boost/asio.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <exception>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace zktest {

namespace asio = boost::asio;
using namespace std::chrono_literals;

// A completion token for the cases that look at the error code instead of catching it.
inline constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// The server all tests of this program share (tick 200 ms: sessions of 0.4-4 s).
inline zk_server& shared_server()
{
    static zk_server server;
    return server;
}

inline std::string server_address()
{
    if (const char* env = std::getenv("ZK_TEST_SERVER"))
        return env;
    return shared_server().connect_string();
}

// A client configuration for tests: short session timeout, log lines collected.
struct test_log {
    std::mutex m;
    std::vector<std::pair<zkcoro::log_level, std::string>> lines;
    bool contains(std::string_view text)
    {
        std::lock_guard lk(m);
        for (auto& l : lines)
            if (l.second.find(text) != std::string::npos)
                return true;
        return false;
    }
};

inline zkcoro::client_config test_config(std::string connect = server_address(),
                                         std::chrono::milliseconds session_timeout = 4000ms,
                                         std::shared_ptr<test_log> log = nullptr)
{
    zkcoro::client_config cfg;
    cfg.connect_string = std::move(connect);
    cfg.session_timeout = session_timeout;
    cfg.connect_timeout = 10s;
    if (log) {
        cfg.log_threshold = zkcoro::log_level::info;
        cfg.log = [log](zkcoro::log_level l, std::string_view m) {
            std::lock_guard lk(log->m);
            log->lines.emplace_back(l, std::string(m));
        };
    }
    return cfg;
}

// A path no other test uses: /t/<test name>-<counter>.
inline std::string unique_path(std::string_view name)
{
    static int counter = 0;
    return fmt::format("/t-{}-{}-{}", name, ::getpid(), ++counter);
}

// Runs a coroutine on `ioc` until it finishes, at most `limit`; fails the test on timeout or on
// an exception escaping the coroutine.
inline void run_bounded(asio::io_context& ioc, std::function<asio::awaitable<void>()> body,
                        std::chrono::steady_clock::duration limit = 30s)
{
    bool finished = false;
    std::exception_ptr error;
    asio::co_spawn(ioc, body(), [&](std::exception_ptr e) {
        finished = true;
        error = e;
    });
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (!finished && std::chrono::steady_clock::now() < deadline) {
        ioc.restart();
        ioc.run_one_until(deadline);
    }
    if (!finished)
        FAIL("the test coroutine did not finish within its time limit");
    if (error) {
        try {
            std::rethrow_exception(error);
        } catch (const std::exception& e) {
            FAIL("the test coroutine threw: " << std::string(e.what()));
        }
    }
}

// What run_with_clients sets up. Written with designated initializers, fields in this order:
//     run_with_clients({.name = "fence", .clients = 2}, ...)
struct fixture_options {
    std::string_view name = "t";                        // the path is unique_path(name)
    int clients = 1;                                    // connected before the body starts
    std::chrono::milliseconds session_timeout = 4000ms;
    std::string connect = {};                           // empty: the shared server
    std::shared_ptr<test_log> log = nullptr;            // collects client(0)'s log lines (only its)
    std::chrono::steady_clock::duration limit = 30s;    // for the whole run, connects included
};

// Connected clients (in one io_context) and a path no other test uses; run_with_clients makes
// one and hands it to the test body.
class fixture {
public:
    fixture(asio::any_io_executor ex, const fixture_options& o)
        : path(unique_path(o.name)), ex_(std::move(ex))
    {
        auto connect = o.connect.empty() ? server_address() : o.connect;
        for (int i = 0; i < o.clients; ++i)
            clients_.push_back(std::make_unique<zkcoro::client>(
                ex_, test_config(connect, o.session_timeout, i == 0 ? o.log : nullptr)));
    }
    fixture(const fixture&) = delete;
    fixture& operator=(const fixture&) = delete;
    ~fixture()
    {
        // Last made, first destroyed, as locals of the test body would be.
        while (!clients_.empty())
            clients_.pop_back();
    }

    // A path no other test uses (nothing is created there).
    const std::string path;

    zkcoro::client& client(std::size_t i = 0) { return *clients_.at(i); }
    std::size_t size() const { return clients_.size(); }
    asio::any_io_executor executor() const { return ex_; }

    // The first N clients, for a structured binding: auto [a, b] = f.clients<2>();
    template <std::size_t N>
    auto clients()
    {
        return [this]<std::size_t... I>(std::index_sequence<I...>) {
            return std::tie(*clients_.at(I)...);
        }(std::make_index_sequence<N>{});
    }

    // Connects every client, one after the other, in order.
    asio::awaitable<void> connect_all()
    {
        for (auto& c : clients_)
            co_await c->async_connect();
    }

private:
    asio::any_io_executor ex_;
    std::vector<std::unique_ptr<zkcoro::client>> clients_;
};

// The standard preamble of a test: an io_context, opts.clients clients connected to the shared
// server (or opts.connect), a unique path; then `body` runs, all within opts.limit (a timeout or
// an exception escaping the body fails the test, as with run_bounded). The body's locals end
// before the clients do.
inline void run_with_clients(const fixture_options& opts, std::function<asio::awaitable<void>(fixture&)> body)
{
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        fixture f(ioc.get_executor(), opts);
        co_await f.connect_all();
        co_await body(f);
    }, opts.limit);
}

// Polls `pred` (a coroutine returning bool) every 20 ms until true, at most `limit`.
template <class Pred>
asio::awaitable<bool> eventually(Pred pred, std::chrono::milliseconds limit = 5000ms)
{
    auto ex = co_await asio::this_coro::executor;
    auto deadline = std::chrono::steady_clock::now() + limit;
    asio::steady_timer t(ex);
    for (int i = 0; i < 100000; ++i) {
        if (co_await pred())
            co_return true;
        if (std::chrono::steady_clock::now() >= deadline)
            co_return false;
        t.expires_after(20ms);
        co_await t.async_wait(asio::deferred);
    }
    co_return false;
}

// Waits until the client's state is `wanted`, at most `limit`.
inline asio::awaitable<bool> wait_for_state(zkcoro::client& c, zkcoro::session_state wanted,
                                            std::chrono::milliseconds limit = 10000ms)
{
    using namespace asio::experimental::awaitable_operators;
    auto ex = co_await asio::this_coro::executor;
    auto deadline = std::chrono::steady_clock::now() + limit;
    for (int i = 0; i < 1000 && c.state() != wanted; ++i) {
        asio::steady_timer t(ex, deadline);
        auto r = co_await (c.async_wait_state(c.state(), asio::use_awaitable) ||
                           t.async_wait(asio::use_awaitable));
        if (r.index() == 1)
            break;
    }
    co_return c.state() == wanted;
}

// A client whose credentials the server refuses (a scheme it does not know), connected and
// closed by the refusal, which comes right after the session is established (the connect's own
// result races it). False when the close never came.
inline asio::awaitable<bool> connect_refused(zkcoro::client& c)
{
    co_await c.async_connect(asio::as_tuple(asio::use_awaitable));
    co_return co_await wait_for_state(c, zkcoro::session_state::closed);
}
inline zkcoro::client_config refused_config()
{
    auto cfg = test_config();
    cfg.auth.push_back({"foo", "bar"});
    return cfg;
}

// The children of `path`; none if it cannot be listed (it does not exist, say).
inline asio::awaitable<std::vector<std::string>> children_of(zkcoro::client& c, const std::string& path)
{
    auto [ec, r] = co_await c.async_get_children(path, asio::as_tuple(asio::use_awaitable));
    co_return ec ? std::vector<std::string>{} : r.children;
}

// Ends a session from the outside: a second handle attaches to it and closes it.
inline asio::awaitable<void> close_session_from_outside(const zkcoro::session_credentials& creds,
                                                        std::string connect)
{
    auto ex = co_await asio::this_coro::executor;
    auto cfg = test_config(std::move(connect));
    cfg.resume_session = creds;
    zkcoro::client other(ex, cfg);
    co_await other.async_connect();
    co_await other.async_close();
}

// Expires `victim`'s session. The server drops the victim's connection when the second handle
// attaches; if the victim reconnects before the close arrives, the session moves back and the
// close misses it. So: repeat until the victim reports the expiry (bounded).
inline asio::awaitable<bool> expire_session(zkcoro::client& victim, std::string connect = server_address())
{
    auto gen = victim.session_generation();
    auto creds = victim.session();
    for (int attempt = 0; attempt < 10; ++attempt) {
        co_await close_session_from_outside(creds, connect);
        bool seen = co_await eventually([&]() -> asio::awaitable<bool> {
            co_return victim.session_generation() != gen || victim.state() == zkcoro::session_state::expired ||
                victim.state() == zkcoro::session_state::connecting;
        }, 3000ms);
        if (seen)
            co_return true;
    }
    co_return false;
}

}  // namespace zktest

#endif
