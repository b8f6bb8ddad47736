// The redis-server harness itself: start, PING, command counts, restart with and without AOF,
// a password, kill9 and stop by PID.
#include "redis_server.hpp"

#include <doctest/doctest.h>

#include <signal.h>

#include <cerrno>
#include <stdexcept>
#include <string>

using zktest::redis_options;
using zktest::redis_server;

namespace {

bool process_alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

}  // namespace

TEST_CASE("redis_server: starts on a free loopback port, answers PING, stops by PID")
{
    redis_server s;
    REQUIRE(s.running());
    CHECK(s.port() > 0);
    CHECK(s.url() == "redis://127.0.0.1:" + std::to_string(s.port()));
    CHECK(zktest::redis_ping(s.port()));
    CHECK(s.command({"PING"}) == "PONG");
    CHECK(s.command({"SET", "k", "v", "NX", "PX", "10000"}) == "OK");
    CHECK(s.command({"SET", "k", "w", "NX", "PX", "10000"}) == "(nil)");
    CHECK(s.command({"GET", "k"}) == "v");

    // Command counts: a query counts itself.
    const auto before = s.total_commands_processed();
    s.command({"PING"});
    CHECK(s.total_commands_processed() == before + 2);
    CHECK(s.command_calls("set") == 2);
    CHECK(s.command_calls("nosuchcommand") == 0);

    const pid_t pid = s.pid();
    s.stop();
    CHECK_FALSE(s.running());
    CHECK_FALSE(process_alive(pid));
    CHECK_FALSE(zktest::redis_ping(s.port()));
}

TEST_CASE("redis_server: without persistence a restart forgets every key")
{
    redis_server s;
    s.command({"SET", "k", "v"});
    const auto port = s.port();
    s.kill9();
    CHECK_FALSE(s.running());
    s.restart();
    CHECK(s.port() == port);
    CHECK(s.command({"EXISTS", "k"}) == "0");
}

TEST_CASE("redis_server: with AOF (appendfsync always) a key survives SIGKILL and restart")
{
    redis_options o;
    o.persist = redis_options::persistence::aof;
    redis_server s(o);
    CHECK(s.command({"SET", "k", "v", "PX", "60000"}) == "OK");
    s.kill9();
    s.restart();
    CHECK(s.command({"GET", "k"}) == "v");
    CHECK(std::stoll(s.command({"PTTL", "k"})) > 0);
}

TEST_CASE("redis_server: a password is required and used")
{
    redis_options o;
    o.password = "s3cret";
    redis_server s(o);
    CHECK(s.url() == "redis://s3cret@127.0.0.1:" + std::to_string(s.port()));
    CHECK(s.command({"PING"}) == "PONG");
    CHECK_FALSE(zktest::redis_ping(s.port()));
    CHECK_THROWS_AS(zktest::redis_command(s.port(), {"GET", "k"}), std::runtime_error);
    CHECK_THROWS_AS(zktest::redis_command(s.port(), {"PING"}, "wrong"), std::runtime_error);
}
