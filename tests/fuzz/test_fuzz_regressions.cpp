// Regression tests for what the fuzzers of this directory found (pure logic, no server). Each
// input is also in the seed corpus of its fuzz target, so scripts/fuzz.sh replays it too.
#include <zkcoro/client_config.hpp>
#include <zkcoro/error.hpp>

#include <doctest/doctest.h>

#include <string>

using namespace std::string_literals;
using zkcoro::client_errc;

namespace {

zkcoro::error_code check_connect_string(std::string cs, std::string& why)
{
    zkcoro::client_config cfg;
    cfg.connect_string = std::move(cs);
    return zkcoro::check_config(cfg, &why);
}

}  // namespace

// A bracketed IPv6 address with white space, control characters or raw bytes after '%' (the
// scope) is rejected, as white space in any host is: the text after '%' must not be passed on
// unchecked. Found by fuzz_config (tests/fuzz/corpus/config/regression_ipv6_scope_*).
TEST_CASE("IPv6 scope with white space or raw bytes is rejected")
{
    for (std::string cs : {std::string("[::1%e x]:2181"),
                           std::string("[0::1%e \xb5\xb5\xb5\xb5\xb5\xb5\xb5\xb5\xb5\xb5\xb5\xb5\xb5\xb5\xb5\xb5\xb5\xb5]:2191"),
                           std::string("[::1%\t]:2181"), std::string("[::1%\n]:2181"), std::string("[::1%\x01]:2181")}) {
        std::string why;
        auto ec = check_connect_string(cs, why);
        CHECK_MESSAGE(ec == client_errc::invalid_connect_string, cs);
        CHECK_MESSAGE(!why.empty(), cs);
    }
}

// A NUL byte inside the brackets does not cut the address short: "[::1\0junk]" is not "[::1]".
// Found by fuzz_config (tests/fuzz/corpus/config/regression_ipv6_embedded_nul).
TEST_CASE("IPv6 address with an embedded NUL is rejected")
{
    for (std::string cs : {"[::1\0 junk]:2181"s, "[::1\0junk]:2181"s, "[fe80::1\0\0%eth0]:2181"s}) {
        std::string why;
        auto ec = check_connect_string(cs, why);
        CHECK_MESSAGE(ec == client_errc::invalid_connect_string, why);
        CHECK(!why.empty());
    }
}
