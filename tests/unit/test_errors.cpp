// Error categories, messages and predicates; configuration checks.
#include <zkcoro/client_config.hpp>
#include <zkcoro/error.hpp>

#include <zookeeper/zookeeper.h>

#include <doctest/doctest.h>

using namespace zkcoro;

TEST_CASE("categories and messages")
{
    error_code ec = client_errc::invalid_path;
    CHECK(std::string(ec.category().name()) == "zkcoro.client");
    CHECK(ec.message().find("check_path") != std::string::npos);
    auto z = make_zk_error(ZNONODE);
    CHECK(std::string(z.category().name()) == "zkcoro.zookeeper");
    CHECK(z.value() == ZNONODE);
    CHECK(z.message().rfind("ZNONODE: ", 0) == 0);
    CHECK_FALSE(make_zk_error(ZOK));
}

TEST_CASE("predicates")
{
    CHECK(is_session_lost(client_errc::session_expired));
    CHECK(is_session_lost(make_zk_error(ZSESSIONEXPIRED)));
    CHECK(is_session_lost(client_errc::closed));
    CHECK_FALSE(is_session_lost(make_zk_error(ZCONNECTIONLOSS)));
    CHECK(is_retriable(make_zk_error(ZCONNECTIONLOSS)));
    CHECK_FALSE(is_retriable(make_zk_error(ZNONODE)));
    CHECK_FALSE(is_retriable(client_errc::closed));
}

// Bad connect strings and option values are caught before anything is sent.
TEST_CASE("check_config")
{
    client_config c;
    CHECK_FALSE(check_config(c));
    c.connect_string = "127.0.0.1:2181,127.0.0.1:2182/app/locks";
    CHECK_FALSE(check_config(c));
    std::string why;
    for (auto bad : {"", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:70000", "h:12x", ",h:1", "h:1/bad/",
                     "/chroot", "h:1//x"}) {
        c.connect_string = bad;
        CHECK_MESSAGE(check_config(c, &why) == client_errc::invalid_connect_string, bad);
        CHECK(!why.empty());
    }
    // Host names and bracketed IPv6 addresses are syntax, resolved at connect.
    for (auto good : {"localhost:2181", "zk-1.example.org:2181,zk_2:2182/app", "[::1]:2181", "[fe80::1]:1,10.0.0.1:2"}) {
        c.connect_string = good;
        CHECK_MESSAGE(!check_config(c), good);
    }
    // A bare IPv6 address, a host with characters no name has, and half brackets.
    for (auto bad : {"::1:2181", "bad host:1", "h\x01:1", "[::1:2181", "[::1]2181", "[nothex]:1", "h:1,"}) {
        c.connect_string = bad;
        CHECK_MESSAGE(check_config(c, &why) == client_errc::invalid_connect_string, bad);
        CHECK(!why.empty());
    }
    c.connect_string = "::1:2181";
    check_config(c, &why);
    CHECK(why.find("brackets") != std::string::npos);
    c.connect_string = "127.0.0.1:2181";
    c.session_timeout = std::chrono::milliseconds(0);
    CHECK(check_config(c, &why) == client_errc::invalid_argument);
    CHECK(why.find("session_timeout") != std::string::npos);
}
