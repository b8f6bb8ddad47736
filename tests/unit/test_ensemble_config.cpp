// The parser of /zookeeper/config (src/driver/ensemble.hpp), which the client follows as the
// ensemble is reconfigured (issue 42): the forms ZooKeeper's reconfiguration guide allows, and
// what it refuses.
#include "driver/ensemble.hpp"

#include <doctest/doctest.h>

using zkcoro::detail::parse_ensemble_config;

TEST_CASE("a configuration as ZooKeeper 3.8 writes it")
{
    std::string why;
    auto c = parse_ensemble_config("server.1=127.0.0.1:2888:3888:participant;127.0.0.1:2181\n"
                                   "server.2=127.0.0.1:2889:3889:participant;127.0.0.1:2182\n"
                                   "server.3=127.0.0.1:2890:3890:observer;127.0.0.1:2183\n"
                                   "version=10000000a",
                                   &why);
    REQUIRE_MESSAGE(c, why);
    REQUIRE(c->members.size() == 3);
    CHECK(c->version == "10000000a");
    CHECK(c->members[0].id == 1);
    CHECK(c->members[0].client.host == "127.0.0.1");
    CHECK(c->members[0].client.port == 2181);
    CHECK(c->members[0].client.numeric);
    CHECK_FALSE(c->members[1].observer);
    CHECK(c->members[2].observer);
    CHECK(c->skipped == 0);
}

TEST_CASE("the client address: absent or a wildcard means the member's host; names and IPv6")
{
    std::string why;
    auto c = parse_ensemble_config("server.5 = 125.23.63.23:1234:1235;1236\r\n"
                                   "server.6=125.23.63.24:1234:1235:participant;0.0.0.0:1237\n"
                                   "server.7=zk7.example:1234:1235;zk7-client.example:1238\n"
                                   "server.8=[::1]:1234:1235;[::1]:1239\n"
                                   "server.9=[2001:db8::9]:1234:1235;2001:db8::9:1240\n"
                                   "server.10=10.0.0.10:1234:1235\n"  // serves no clients
                                   "group.1=5:6\nweight.5=1\n\n",
                                   &why);
    REQUIRE_MESSAGE(c, why);
    REQUIRE(c->members.size() == 5);
    CHECK(c->version.empty());
    CHECK(c->members[0].client.host == "125.23.63.23");
    CHECK(c->members[0].client.port == 1236);
    CHECK(c->members[1].client.host == "125.23.63.24");
    CHECK(c->members[2].client.host == "zk7-client.example");
    CHECK_FALSE(c->members[2].client.numeric);
    CHECK(c->members[3].client.host == "::1");
    CHECK(c->members[3].client.port == 1239);
    CHECK(c->members[4].client.host == "2001:db8::9");
    CHECK(c->members[4].client.port == 1240);
    CHECK(c->skipped == 1);
}

TEST_CASE("empty (a standalone server) and static (version=0) configurations parse")
{
    auto empty = parse_ensemble_config("", nullptr);
    REQUIRE(empty);
    CHECK(empty->members.empty());
    auto fixed = parse_ensemble_config("server.1=127.0.0.1:1:2:participant;127.0.0.1:3\nversion=0\n", nullptr);
    REQUIRE(fixed);
    CHECK(fixed->version == "0");
}

TEST_CASE("malformed server lines are refused with the line named")
{
    for (const char* bad : {"server.x=127.0.0.1:1:2;3", "server.1=127.0.0.1;2181", "server.1=127.0.0.1:1:2;0",
                            "server.1=127.0.0.1:1:2;65536", "server.1=127.0.0.1:1:2;a:b:port",
                            "server.1=bad host:1:2;2181", "server.1=[::1:1:2;2181"}) {
        std::string why;
        auto c = parse_ensemble_config(bad, &why);
        CHECK_MESSAGE(!c, bad);
        CHECK_MESSAGE(why.find(std::string(bad).substr(0, 10)) != std::string::npos, why);
    }
}
