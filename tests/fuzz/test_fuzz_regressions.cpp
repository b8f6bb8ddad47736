// Regression tests for what the fuzzers of this directory found (pure logic, no server). Each
// input is also in the seed corpus of its fuzz target, so scripts/fuzz.sh replays it too.
#include <zkcoro/client_config.hpp>
#include <zkcoro/error.hpp>

#include <doctest/doctest.h>

#include <string>

using zkcoro::client_errc;

namespace {

zkcoro::error_code check_connect_string(std::string cs, std::string& why)
{
    zkcoro::client_config cfg;
    cfg.connect_string = std::move(cs);
    return zkcoro::check_config(cfg, &why);
}

}  // namespace

// A bracketed IPv6 address with white space or raw bytes after '%' (the scope) is rejected, as
// white space in any host is: the text after '%' must not be passed on unchecked. Found by
// fuzz_config (tests/fuzz/corpus/config/regression_ipv6_scope_*).
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
