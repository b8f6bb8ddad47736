// Path validation by ZooKeeper's rules (pure logic, no server).
#include <zkcoro/error.hpp>
#include <zkcoro/path.hpp>

#include <doctest/doctest.h>

using zkcoro::check_path;
using zkcoro::client_errc;

TEST_CASE("valid paths pass")
{
    for (auto p : {"/", "/a", "/a/b", "/locks/orders", "/a.b", "/a..b", "/zk\xc3\xa9"})
        CHECK_MESSAGE(check_path(p).ok(), p);
    CHECK(check_path("/locks/", true).ok());  // sequential: the server appends the number
}

// Each broken rule is reported with its position and a reason.
TEST_CASE("invalid paths name the rule and the position")
{
    struct c {
        const char* path;
        std::size_t pos;
        const char* reason;
    };
    for (auto [path, pos, reason] : {
             c{"", 0, "empty path"},
             c{"a/b", 0, "path must start with '/'"},
             c{"/a/", 2, "trailing '/'"},
             c{"/a//b", 3, "empty node name"},
             c{"/a/./b", 3, "'.' is not a valid node name"},
             c{"/a/..", 3, "'..' is not a valid node name"},
             c{"/a\x01", 2, "control character"},
             c{"/a\xc2\x85", 2, "control character"},
             c{"/\xef\xbf\xb0", 1, "reserved character"},
             c{"/\xed\xa0\x80", 1, "reserved character"},
             c{"/\xff", 1, "invalid UTF-8"},
         }) {
        auto p = check_path(path);
        CHECK_MESSAGE(p.ec == client_errc::invalid_path, path);
        CHECK_MESSAGE(p.position == pos, path);
        CHECK_MESSAGE(p.reason == reason, path);
    }
    std::string nul("/a\0b", 4);
    CHECK(check_path(nul).reason == "NUL character");
    CHECK(check_path("/a//b").describe("/a//b") == "invalid path \"/a//b\": empty node name at position 3");
}

TEST_CASE("join, parent and name")
{
    CHECK(zkcoro::join_path("/", "a") == "/a");
    CHECK(zkcoro::join_path("/x", "a") == "/x/a");
    CHECK(zkcoro::parent_path("/a/b") == "/a");
    CHECK(zkcoro::parent_path("/a") == "/");
    CHECK(zkcoro::node_name("/a/b") == "b");
}
