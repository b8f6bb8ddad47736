// The Redis connection at its edges, against real redis-servers and loopback listeners of the
// test: the URL's scheme (any case; rediss:// refused with the reason), a handshake whose AUTH or
// SELECT fails (the server's own text, no reconnection loop), a silent port bounded by the
// connect timeout, and a peer that does not speak Redis.
#include "redis_test_util.hpp"

#include <string>

using namespace rt;
using zkcoro::error_code;
using zkcoro::redis_errc;

namespace {

zkcoro::redis_options bounded_connect(std::chrono::milliseconds t = 2000ms)
{
    zkcoro::redis_options o;
    o.connect_timeout = t;
    return o;
}

}  // namespace

TEST_CASE("the URL's scheme is case-insensitive; rediss:// is refused: no TLS in hiredis 0.14; other schemes get the supported forms")
{
    error_code ec;
    std::string why;
    for (const char* good : {"REDIS://127.0.0.1:6380", "Redis://127.0.0.1:6380", "rEdIs://127.0.0.1:6380"}) {
        CAPTURE(good);
        auto u = zkcoro::parse_redis_url(good, ec, &why);
        CHECK_FALSE(ec);
        CHECK(u.host == "127.0.0.1");
        CHECK(u.port == 6380);
    }
    for (const char* tls : {"rediss://127.0.0.1:6380", "REDISS://127.0.0.1:6380", "Rediss://pw@h:1/2"}) {
        CAPTURE(tls);
        why.clear();
        zkcoro::parse_redis_url(tls, ec, &why);
        CHECK(ec == redis_errc::bad_url);
        CHECK(why.find("TLS is not supported by Debian's hiredis 0.14") != std::string::npos);
    }
    for (const char* bad : {"redis:/127.0.0.1", "redi://127.0.0.1", "unix:///tmp/redis.sock", "REDIS:127.0.0.1"}) {
        CAPTURE(bad);
        zkcoro::parse_redis_url(bad, ec, &why);
        CHECK(ec == redis_errc::bad_url);
        CHECK(why.find("redis://") != std::string::npos);
    }
    // Issue 32 item 10: a scheme that looks like Redis' or Sentinel's gets the forms there are.
    for (const char* tls : {"rediss+sentinel://127.0.0.1:26379/m", "redis+sentinels://127.0.0.1:26379/m"}) {
        CAPTURE(tls);
        zkcoro::parse_redis_url(tls, ec, &why);
        CHECK(ec == redis_errc::bad_url);
        CHECK(why.find("TLS is not supported") != std::string::npos);
        CHECK(why.find("use redis+sentinel://") != std::string::npos);
    }
    for (const char* other : {"sentinel://127.0.0.1:26379/m", "SENTINEL://h/m", "http://h:1/x"}) {
        CAPTURE(other);
        zkcoro::parse_redis_url(other, ec, &why);
        CHECK(ec == redis_errc::bad_url);
        CHECK(why.find("is not supported") != std::string::npos);
        CHECK(why.find("redis+sentinel://[[USER]:PASSWORD@]HOST:PORT") != std::string::npos);
        CHECK(why.find("path") == std::string::npos);
    }
}

TEST_CASE("a password for a server without one fails with the server's text, once, without reconnecting")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        auto before = connections_received(srv);
        zkcoro::redis_client rc(ex, fmt::format("redis://nosuchpassword@127.0.0.1:{}", srv.port()), bounded_connect());
        // A command sent before the handshake failed fails with it too.
        auto [xec, xr] = co_await rc.async_exec(cmd("PING"), asio::as_tuple(asio::use_awaitable));
        CHECK(xec == redis_errc::auth_failed);
        auto [ec] = co_await rc.async_connect(asio::as_tuple(asio::use_awaitable));
        CHECK(ec == redis_errc::auth_failed);
        CHECK(rc.state() == zkcoro::redis_state::closed);
        MESSAGE("no password configured: " << rc.last_error());
        CHECK(rc.last_error().find("without any password configured") != std::string::npos);
        co_await pause(300ms);
        // One connection (ours) and INFO's own: no loop.
        CHECK(connections_received(srv) - before <= 2);
    }, 10s);
}

TEST_CASE("a database index the server lacks fails with the server's text, without reconnecting")
{
    zktest::redis_server srv({.extra_args = {"--databases", "4"}});
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        auto before = connections_received(srv);
        zkcoro::redis_client rc(ex, fmt::format("redis://127.0.0.1:{}/9", srv.port()), bounded_connect());
        auto [ec] = co_await rc.async_connect(asio::as_tuple(asio::use_awaitable));
        CHECK(ec == redis_errc::error_reply);
        CHECK(rc.state() == zkcoro::redis_state::closed);
        MESSAGE("db out of range: " << rc.last_error());
        CHECK(rc.last_error().find("SELECT 9") != std::string::npos);
        CHECK(rc.last_error().find("DB index is out of range") != std::string::npos);
        auto [xec, xr] = co_await rc.async_exec(cmd("PING"), asio::as_tuple(asio::use_awaitable));
        CHECK(xec == redis_errc::error_reply);
        co_await pause(300ms);
        CHECK(connections_received(srv) - before <= 2);
        // The same server with a database it has: fine.
        zkcoro::redis_client ok(ex, fmt::format("redis://127.0.0.1:{}/3", srv.port()), bounded_connect());
        co_await ok.async_connect();
        CHECK(ok.state() == zkcoro::redis_state::connected);
    }, 10s);
}

TEST_CASE("a wrong password on a server with one fails with AUTH's text, without reconnecting")
{
    zktest::redis_server srv({.password = "right-one"});
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        auto before = connections_received(srv);
        zkcoro::redis_client rc(ex, fmt::format("redis://wrong@127.0.0.1:{}/2", srv.port()), bounded_connect());
        auto [ec] = co_await rc.async_connect(asio::as_tuple(asio::use_awaitable));
        CHECK(ec == redis_errc::auth_failed);
        MESSAGE("wrong password: " << rc.last_error());
        CHECK(rc.last_error().find("WRONGPASS") != std::string::npos);
        co_await pause(300ms);
        CHECK(connections_received(srv) - before <= 2);
    }, 10s);
}

TEST_CASE("a silent port (accepts, never answers) fails the connect within the connect timeout")
{
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        // Listening: the kernel completes the TCP handshake; nobody ever reads or writes.
        asio::ip::tcp::acceptor silent(ex, {asio::ip::make_address("127.0.0.1"), 0});
        auto port = silent.local_endpoint().port();
        zkcoro::redis_client rc(ex, fmt::format("redis://127.0.0.1:{}", port), bounded_connect(300ms));
        auto t0 = std::chrono::steady_clock::now();
        auto [ec] = co_await rc.async_connect(asio::as_tuple(asio::use_awaitable));
        auto took = std::chrono::steady_clock::now() - t0;
        CHECK(ec == redis_errc::connect_failed);
        CHECK(took >= 250ms);
        CHECK_MESSAGE(took < 1500ms, "the connect took "
                                         << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                                         << " ms with a 300 ms connect timeout");
        CHECK(rc.last_error().find("within 300 ms") != std::string::npos);
    }, 10s);
}

TEST_CASE("a peer that does not speak Redis is named as such, not with hiredis' 'Protocol error'")
{
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        asio::ip::tcp::acceptor web(ex, {asio::ip::make_address("127.0.0.1"), 0});
        auto port = web.local_endpoint().port();
        asio::co_spawn(ex, [&web]() -> asio::awaitable<void> {
            auto sock = co_await web.async_accept(asio::use_awaitable);
            char buf[256];
            co_await sock.async_read_some(asio::buffer(buf), asio::use_awaitable);
            co_await asio::async_write(sock, asio::buffer(std::string_view("HTTP/1.1 400 Bad Request\r\n\r\n")),
                                       asio::use_awaitable);
            co_await pause(500ms);
        }, asio::detached);
        zkcoro::redis_client http(ex, fmt::format("redis://127.0.0.1:{}", port), bounded_connect());
        auto [ec] = co_await http.async_connect(asio::as_tuple(asio::use_awaitable));
        CHECK(ec == redis_errc::not_redis);
        MESSAGE("not Redis: " << http.last_error());
        CHECK(http.last_error().find(fmt::format("the peer at 127.0.0.1:{} does not speak the Redis protocol", port)) !=
              std::string::npos);
    }, 10s);
}

// Issue 33: the link reads the socket into a buffer of its own (16 KiB) and hands hiredis the
// bytes. Replies larger than it, pipelined between small ones, arrive whole and each to its own
// command: what a wrongly fed reader would cut, reorder or answer twice.
TEST_CASE("replies larger than the link's read buffer, pipelined with small ones, arrive whole and in order")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_client rc(ex, srv.url());
        const auto big_key = unique_key("big"), small_key = unique_key("small");
        std::string big(200'000, '\0');
        for (std::size_t i = 0; i < big.size(); ++i)
            big[i] = static_cast<char>('a' + i % 23);
        co_await rc.async_exec(cmd("SET", big_key, big), asio::use_awaitable);
        co_await rc.async_exec(cmd("SET", small_key, "s"), asio::use_awaitable);
        constexpr int tasks = 8, rounds = 4;
        int whole = 0, ended = 0;
        rt::event all_ended(ex);
        for (int t = 0; t < tasks; ++t)
            asio::co_spawn(ex, [&, t]() -> asio::awaitable<void> {
                for (int r = 0; r < rounds; ++r) {
                    // The tasks' commands go out together: big and small replies share reads.
                    auto got = co_await rc.async_exec(cmd("GET", (t + r) % 2 ? big_key : small_key),
                                                      asio::use_awaitable);
                    const auto& want = (t + r) % 2 ? big : std::string("s");
                    CHECK(got.type == zkcoro::redis_reply::kind::string);
                    if (got.str == want)
                        ++whole;
                    else
                        FAIL_CHECK("task " << t << " round " << r << ": a reply of " << got.str.size()
                                           << " bytes where " << want.size() << " were stored");
                }
                if (++ended == tasks)
                    all_ended.fire();
            }, asio::detached);
        const bool in_time = co_await all_ended.wait(20s);
        CHECK_MESSAGE(in_time, ended << " of " << tasks << " tasks got all their replies within 20 s");
        CHECK(whole == tasks * rounds);
        auto echo = co_await rc.async_exec(cmd("ECHO", "after"), asio::use_awaitable);
        CHECK(echo.str == "after");
        co_await rc.async_exec(cmd("DEL", big_key, small_key), asio::use_awaitable);
    }, 30s);
}

// Issue 39: a server that answers the handshake's PING with LOADING (loading its data after a
// start) is waited for by a first connection with first_connect_wait, as a refused one is; it
// fails with loading and the server's text at the end (was: error_reply at once). A fake server
// here answers every command so.
TEST_CASE("a first connection waits out LOADING within first_connect_wait, then fails with loading")
{
    asio::io_context ioc;
    int connections = 0;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        asio::ip::tcp::acceptor loading(ex, {asio::ip::make_address("127.0.0.1"), 0});
        auto port = loading.local_endpoint().port();
        asio::co_spawn(ex, [&loading, &connections]() -> asio::awaitable<void> {
            for (int i = 0; i < 100; ++i) {
                auto sock = std::make_shared<asio::ip::tcp::socket>(co_await loading.async_accept(asio::use_awaitable));
                ++connections;
                asio::co_spawn(loading.get_executor(), [sock]() -> asio::awaitable<void> {
                    char buf[512];
                    for (int n = 0; n < 16; ++n) {
                        auto [ec, got] = co_await sock->async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
                        if (ec || got == 0)
                            co_return;
                        co_await asio::async_write(*sock, asio::buffer(std::string_view(
                                                              "-LOADING Redis is loading the dataset in memory\r\n")),
                                                   asio::as_tuple(asio::use_awaitable));
                    }
                }, asio::detached);
            }
        }, asio::detached);
        auto o = bounded_connect();
        o.reconnect_min = 20ms;
        o.reconnect_max = 100ms;
        o.first_connect_wait = 700ms;
        zkcoro::redis_client rc(ex, fmt::format("redis://127.0.0.1:{}", port), o);
        const auto t0 = std::chrono::steady_clock::now();
        auto [ec] = co_await rc.async_connect(asio::as_tuple(asio::use_awaitable));
        const auto ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
        MESSAGE("LOADING: " << ec.message() << " after " << ms << " ms, " << connections << " connections: "
                            << rc.last_error());
        CHECK(ec == redis_errc::loading);
        CHECK(ms >= 650);
        CHECK(ms < 3000);
        CHECK(connections >= 3);
        CHECK(rc.last_error().find("LOADING Redis is loading the dataset in memory") != std::string::npos);
        loading.close();
    }, 10s);
}

// Issue 32 item 5: the password of a URL is in no message and no log line. Every form below
// holds a password the parser takes as such (user info: the text before the URL's last '@').
TEST_CASE("a URL's password is never shown: bad URLs, refused connections, refused AUTH")
{
    constexpr std::string_view secret = "TopSecret";
    error_code ec;
    std::string why;
    for (const char* bad : {"redis://:TopSecret@127.0.0.1:6379/3x", "redis://:TopSecret@127.0.0.1:99999",
                            "redis://TopSecret@127.0.0.1:6379/-16", "redis://locker:TopSecret@:6379",
                            "redis+sentinel://user:TopSecret@127.0.0.1:26379/mymaster/9x",
                            "redis+sentinel://user:TopSecret@127.0.0.1:26379", "rediss://:TopSecret@127.0.0.1:6379",
                            "rediss+sentinel://user:TopSecret@127.0.0.1:26379/mymaster",
                            "redis+sentinels://:TopSecret@127.0.0.1:26379/mymaster",
                            "sentinel://user:TopSecret@127.0.0.1:26379/mymaster", "unix://:TopSecret@/tmp/redis.sock",
                            "redis://:a@TopSecret@[::1:6379", "redis://:Top/SecretTopSecret@127.0.0.1:1/x"}) {
        CAPTURE(bad);
        why.clear();
        zkcoro::parse_redis_url(bad, ec, &why);
        CHECK(ec == redis_errc::bad_url);
        CHECK_FALSE(why.empty());
        CHECK_MESSAGE(why.find(secret) == std::string::npos, why);
        CHECK(why.find("***") != std::string::npos);
    }
    // The function every message uses: the user stays, the password goes.
    CHECK(zkcoro::redact_url("redis://:TopSecret@h:1/3x") == "redis://:***@h:1/3x");
    CHECK(zkcoro::redact_url("redis://TopSecret@h:1") == "redis://***@h:1");
    CHECK(zkcoro::redact_url("redis+sentinel://locker:Top@Secret@h:1,h:2/m/99") == "redis+sentinel://locker:***@h:1,h:2/m/99");
    CHECK(zkcoro::redact_url("REDIS://u:p:q@h") == "REDIS://u:***@h");
    CHECK(zkcoro::redact_url("redis://h:1/3") == "redis://h:1/3");
    CHECK(zkcoro::redact_url("zk1:2181,zk2:2181/locks@prod") == "zk1:2181,zk2:2181/locks@prod");  // a chroot's '@'
    CHECK(zkcoro::redact_url("user:TopSecret@zk1:2181/x") == "user:***@zk1:2181/x");

    std::vector<std::string> lines;
    zkcoro::redis_options o = bounded_connect(1000ms);
    o.log = [&lines](zkcoro::log_level, std::string_view m) { lines.emplace_back(m); };
    auto shown = [&](const zkcoro::redis_client& rc) {
        std::string all = rc.last_error();
        for (auto& l : lines)
            all += "\n" + l;
        return all;
    };
    auto& srv = shared_redis();
    CHECK(srv.command({"ACL", "SETUSER", "locker", "on", ">right-one", "~*", "+@all"}) == "OK");
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        std::uint16_t closed = 0;
        {
            asio::ip::tcp::acceptor a(ex, {asio::ip::make_address("127.0.0.1"), 0});
            closed = a.local_endpoint().port();
        }
        const std::string urls[] = {
            "redis://:TopSecret@127.0.0.1:6379/3x",                                  // refused at once
            fmt::format("redis://:TopSecret@127.0.0.1:{}", closed),                  // connection refused
            fmt::format("redis+sentinel://u:TopSecret@127.0.0.1:{}/mymaster", closed),  // no sentinel answers
            fmt::format("redis://:TopSecret@127.0.0.1:{}/2", srv.port()),            // no password configured
            fmt::format("redis://locker:TopSecret@127.0.0.1:{}", srv.port()),        // WRONGPASS
        };
        for (const auto& url : urls) {
            CAPTURE(url);
            lines.clear();
            zkcoro::redis_client rc(ex, url, o);
            auto [cec] = co_await rc.async_connect(asio::as_tuple(asio::use_awaitable));
            CHECK(cec);
            const auto all = shown(rc);
            CHECK_FALSE(rc.last_error().empty());
            CHECK_MESSAGE(all.find(secret) == std::string::npos, all);
        }
    }, 20s);
}
