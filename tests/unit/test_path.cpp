// Path validation by ZooKeeper's rules (pure logic, no server).
#include <zkcoro/error.hpp>
#include <zkcoro/path.hpp>

#include <doctest/doctest.h>

#include <cstdio>
#include <string>

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
             // An emoji (U+1F512): a surrogate pair in the server's UTF-16, which it refuses.
             c{"/locks/\xf0\x9f\x94\x92", 7, "character beyond U+FFFF (ZooKeeper refuses them)"},
             c{"/a/\xf0\x90\x80\x80/b", 3, "character beyond U+FFFF (ZooKeeper refuses them)"},
             c{"/\xf4\x8f\xbf\xbf", 1, "character beyond U+FFFF (ZooKeeper refuses them)"},
             c{"/\xef\xbf\xbf", 1, "reserved character"},
             c{"/\xef\xa3\xbf", 1, "reserved character"},
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

namespace {

std::string utf8(char32_t cp)
{
    std::string s;
    if (cp < 0x80) {
        s += static_cast<char>(cp);
    } else if (cp < 0x800) {
        s += static_cast<char>(0xC0 | (cp >> 6));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        s += static_cast<char>(0xE0 | (cp >> 12));
        s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        s += static_cast<char>(0xF0 | (cp >> 18));
        s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return s;
}

// The character rule of ZooKeeper's PathUtils.validatePath, on Java's UTF-16 code units.
bool java_accepts(char32_t cp)
{
    std::u16string units;
    if (cp < 0x10000) {
        units += static_cast<char16_t>(cp);
    } else {
        units += static_cast<char16_t>(0xD800 + ((cp - 0x10000) >> 10));
        units += static_cast<char16_t>(0xDC00 + ((cp - 0x10000) & 0x3FF));
    }
    for (char16_t c : units)
        if (c == 0 || (c > 0 && c <= 0x1F) || (c >= 0x7F && c <= 0x9F) || (c >= 0xD800 && c <= 0xF8FF) ||
            (c >= 0xFFF0))
            return false;
    return true;
}

}  // namespace

// Every code point, against the server's own rule: what the client passes, the server takes.
TEST_CASE("every character: accepted exactly when ZooKeeper's validatePath accepts it")
{
    std::size_t mismatches = 0;
    for (char32_t cp = 1; cp <= 0x10FFFF; ++cp) {
        if (cp == '/' || (cp >= 0xD800 && cp <= 0xDFFF))
            continue;  // the separator; surrogates have no UTF-8 form (refused as invalid UTF-8)
        const std::string path = "/a" + utf8(cp) + "b";
        if (check_path(path).ok() != java_accepts(cp) && ++mismatches <= 5) {
            char what[64];
            std::snprintf(what, sizeof what, "U+%04X: the client %s it, the server does not",
                          static_cast<unsigned>(cp), check_path(path).ok() ? "accepts" : "refuses");
            FAIL_CHECK(what);
        }
    }
    CHECK(mismatches == 0);
    // Surrogates written as UTF-8 (CESU-8) are not UTF-8: refused.
    CHECK_FALSE(check_path("/\xed\xb0\x80").ok());
}

TEST_CASE("join, parent and name")
{
    CHECK(zkcoro::join_path("/", "a") == "/a");
    CHECK(zkcoro::join_path("/x", "a") == "/x/a");
    CHECK(zkcoro::parent_path("/a/b") == "/a");
    CHECK(zkcoro::parent_path("/a") == "/");
    CHECK(zkcoro::node_name("/a/b") == "b");
}

// Paths long enough for the eight-bytes-at-a-time check of printable ASCII: every single byte at
// every offset of a word, judged as the character-by-character rule judges it.
TEST_CASE("every byte at every offset of a long path")
{
    const std::string base = "/locks/orders-0123456789abcdef";
    std::size_t mismatches = 0;
    for (int b = 1; b < 256; ++b) {
        if (b == '/')
            continue;
        for (std::size_t at = 1; at < base.size(); ++at) {
            std::string path = base;
            path[at] = static_cast<char>(b);
            const auto p = check_path(path);
            const char* expected = b >= 0x20 && b < 0x7F ? nullptr
                                   : b < 0x80            ? "control character"
                                                         : "invalid UTF-8";
            const bool right = expected ? (!p.ok() && p.reason == expected && p.position == at) : p.ok();
            if (!right && ++mismatches <= 5)
                FAIL_CHECK("byte " << b << " at " << at << ": " << (p.ok() ? "accepted" : std::string(p.reason)));
        }
    }
    CHECK(mismatches == 0);
    // The structure of a long printable path: empty names, dots, a sequential tail.
    CHECK(check_path("/locks/orders//x-0123456789").position == 14);
    CHECK(check_path("/locks/orders/../0123456789").reason == "'..' is not a valid node name");
    CHECK(check_path("/locks/orders/./x0123456789").position == 14);
    CHECK(check_path("/locks/orders/0123456789/", true).ok());
    CHECK(check_path("/locks/orders/0123456789/").reason == "trailing '/'");
}
