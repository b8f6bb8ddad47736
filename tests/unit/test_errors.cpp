// Error categories, messages and predicates; configuration checks.
#include <zkcoro/client_config.hpp>
#include <zkcoro/error.hpp>

#include <boost/asio/error.hpp>

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
    // The C client fails every pending request with it when a reply comes out of order, then
    // reconnects: as for a lost connection, a request may or may not have been applied.
    CHECK(is_retriable(make_zk_error(ZRUNTIMEINCONSISTENCY)));
    CHECK_FALSE(is_retriable(make_zk_error(ZNONODE)));
    CHECK_FALSE(is_retriable(client_errc::closed));
}

// Issue 41: one rule for connecting on both backends. A server that is down (or a name not yet in
// DNS) at start-up is retriable, as Redis' connect_failed and no_sentinel are
// (tests/redis/test_redis_replies.cpp); bad configuration stays permanent.
TEST_CASE("classify(): failures to connect are retriable, bad configuration is permanent")
{
    CHECK(classify(client_errc::connect_timeout) == error_kind::retriable);
    CHECK(classify(client_errc::name_resolution_failed) == error_kind::retriable);
    CHECK(is_retriable(client_errc::connect_timeout));
    CHECK_FALSE(is_session_lost(client_errc::name_resolution_failed));
    for (auto e : {client_errc::invalid_connect_string, client_errc::invalid_argument, client_errc::chroot_not_found,
                   client_errc::invalid_path})
        CHECK_MESSAGE(classify(e) == error_kind::permanent, make_error_code(e).message());
    CHECK(classify(client_errc::auth_failed) == error_kind::session_lost);
    CHECK(classify(client_errc::closed) == error_kind::session_lost);
    CHECK(classify(error_code{}) == error_kind::none);
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

// zk_errc carries ZooKeeper's own numbers: each enumerator is the C client's constant.
static_assert(static_cast<int>(zk_errc::system_error) == ZSYSTEMERROR);
static_assert(static_cast<int>(zk_errc::runtime_inconsistency) == ZRUNTIMEINCONSISTENCY);
static_assert(static_cast<int>(zk_errc::data_inconsistency) == ZDATAINCONSISTENCY);
static_assert(static_cast<int>(zk_errc::connection_loss) == ZCONNECTIONLOSS);
static_assert(static_cast<int>(zk_errc::marshalling_error) == ZMARSHALLINGERROR);
static_assert(static_cast<int>(zk_errc::unimplemented) == ZUNIMPLEMENTED);
static_assert(static_cast<int>(zk_errc::operation_timeout) == ZOPERATIONTIMEOUT);
static_assert(static_cast<int>(zk_errc::bad_arguments) == ZBADARGUMENTS);
static_assert(static_cast<int>(zk_errc::invalid_state) == ZINVALIDSTATE);
static_assert(static_cast<int>(zk_errc::new_config_no_quorum) == ZNEWCONFIGNOQUORUM);
static_assert(static_cast<int>(zk_errc::reconfig_in_progress) == ZRECONFIGINPROGRESS);
static_assert(static_cast<int>(zk_errc::ssl_connection_error) == ZSSLCONNECTIONERROR);
static_assert(static_cast<int>(zk_errc::api_error) == ZAPIERROR);
static_assert(static_cast<int>(zk_errc::no_node) == ZNONODE);
static_assert(static_cast<int>(zk_errc::no_auth) == ZNOAUTH);
static_assert(static_cast<int>(zk_errc::bad_version) == ZBADVERSION);
static_assert(static_cast<int>(zk_errc::no_children_for_ephemerals) == ZNOCHILDRENFOREPHEMERALS);
static_assert(static_cast<int>(zk_errc::node_exists) == ZNODEEXISTS);
static_assert(static_cast<int>(zk_errc::not_empty) == ZNOTEMPTY);
static_assert(static_cast<int>(zk_errc::session_expired) == ZSESSIONEXPIRED);
static_assert(static_cast<int>(zk_errc::invalid_callback) == ZINVALIDCALLBACK);
static_assert(static_cast<int>(zk_errc::invalid_acl) == ZINVALIDACL);
static_assert(static_cast<int>(zk_errc::auth_failed) == ZAUTHFAILED);
static_assert(static_cast<int>(zk_errc::closing) == ZCLOSING);
static_assert(static_cast<int>(zk_errc::nothing) == ZNOTHING);
static_assert(static_cast<int>(zk_errc::session_moved) == ZSESSIONMOVED);
static_assert(static_cast<int>(zk_errc::not_read_only) == ZNOTREADONLY);
static_assert(static_cast<int>(zk_errc::ephemeral_on_local_session) == ZEPHEMERALONLOCALSESSION);
static_assert(static_cast<int>(zk_errc::no_watcher) == ZNOWATCHER);
static_assert(static_cast<int>(zk_errc::reconfig_disabled) == ZRECONFIGDISABLED);
static_assert(static_cast<int>(zk_errc::session_closed_requires_sasl_auth) == ZSESSIONCLOSEDREQUIRESASLAUTH);
static_assert(static_cast<int>(zk_errc::throttled_op) == ZTHROTTLEDOP);

TEST_CASE("zk_errc compares with what the C client returns")
{
    CHECK(make_zk_error(ZNONODE) == zk_errc::no_node);
    CHECK(make_zk_error(ZNOTEMPTY) != zk_errc::no_node);
    error_code ec = zk_errc::node_exists;
    CHECK(ec.category() == zookeeper_category());
    CHECK(ec.value() == ZNODEEXISTS);
    CHECK(ec.message().rfind("ZNODEEXISTS: ", 0) == 0);
}

TEST_CASE("one classifier decides retriable and session-ending")
{
    CHECK(classify(error_code{}) == error_kind::none);
    for (auto e : {zk_errc::connection_loss, zk_errc::operation_timeout, zk_errc::throttled_op}) {
        CHECK(classify(e) == error_kind::retriable);
        CHECK(is_retriable(e));
        CHECK_FALSE(is_session_lost(e));
    }
    for (auto e : {zk_errc::session_expired, zk_errc::auth_failed, zk_errc::closing, zk_errc::session_moved}) {
        CHECK(classify(e) == error_kind::session_lost);
        CHECK(is_session_lost(e));
        CHECK_FALSE(is_retriable(e));
    }
    for (auto e : {client_errc::session_expired, client_errc::closed, client_errc::auth_failed, client_errc::lock_lost})
        CHECK(classify(e) == error_kind::session_lost);
    for (auto e : {zk_errc::no_node, zk_errc::no_auth, zk_errc::node_exists, zk_errc::bad_version})
        CHECK(classify(e) == error_kind::permanent);
    CHECK(classify(client_errc::invalid_path) == error_kind::permanent);
    CHECK(classify(boost::asio::error::operation_aborted) == error_kind::permanent);
}

// Issue 20: a second release said "a value is out of its documented range".
TEST_CASE("every client error has its own message; an empty guard says why it is empty")
{
    for (int v = 1; v <= static_cast<int>(client_errc::internal_error); ++v) {
        const error_code ec = static_cast<client_errc>(v);
        CAPTURE(v);
        CHECK(ec.message() != "unknown zkcoro client error");
    }
    const error_code empty = client_errc::empty_guard;
    CHECK(empty.message().find("released already") != std::string::npos);
    CHECK(empty != client_errc::invalid_argument);
    // Issue 21: an exception in the library's own coroutine was reported as ZooKeeper's
    // ZSYSTEMERROR, on the Redis path too.
    const error_code internal = client_errc::internal_error;
    CHECK(internal.message().find("bug") != std::string::npos);
    CHECK(internal != zk_errc::system_error);
    CHECK(classify(internal) == error_kind::permanent);
}
