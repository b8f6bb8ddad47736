// Fuzz target for check_config. The connect string is the input up to its last 0xFF byte (the
// whole input when there is none, so the seed corpus is plain text); the bytes after that byte
// set the other fields and describe a connect string that must be accepted.
//
// Only the syntax is checked here: resolving host names is separate. Properties:
// - the result is success, client_errc::invalid_connect_string or client_errc::invalid_argument,
//   the same with or without `why`, and `why` is set whenever there is an error;
// - an accepted connect string has, before its first '/', only non-empty comma-separated
//   entries that end in ':' and a decimal port from 1 to 65535, with no white space or control
//   character before that, and after the '/' a valid path;
// - the other fields are accepted exactly when they are in their documented ranges
//   (session_timeout in (0, 24 h], connect_timeout >= 0, max_data_size in [1, 2^31),
//   non-empty auth and ACL schemes, ACL perms in [0, 31], a password of at most 16 bytes);
// - a connect string built from well-formed parts (host names, IPv4 addresses, IPv6 addresses
//   in brackets, ports 1-65535, a valid chroot) is accepted.
#include "fuzz_check.hpp"

#include <zkcoro/client_config.hpp>
#include <zkcoro/error.hpp>
#include <zkcoro/path.hpp>

#include <fuzzer/FuzzedDataProvider.h>

#include <fmt/format.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace {

using zkcoro::client_config;
using zkcoro::client_errc;
using zkcoro::error_code;

// Runs check_config with and without `why` and checks what holds for any configuration.
error_code checked(const client_config& cfg)
{
    std::string why;
    auto ec = zkcoro::check_config(cfg, &why);
    FUZZ_CHECK(zkcoro::check_config(cfg) == ec);
    if (ec) {
        FUZZ_CHECK(ec == client_errc::invalid_connect_string || ec == client_errc::invalid_argument);
        FUZZ_CHECK(!why.empty());
        FUZZ_CHECK(!ec.message().empty());
    }
    return ec;
}

// What any accepted connect string looks like, whichever way hosts are written or resolved.
void check_accepted_syntax(std::string_view cs)
{
    FUZZ_CHECK(!cs.empty());
    auto slash = cs.find('/');
    std::string_view hosts = cs.substr(0, slash);
    if (slash != std::string_view::npos)
        FUZZ_CHECK(zkcoro::check_path(cs.substr(slash)).ok());
    FUZZ_CHECK(!hosts.empty());
    while (true) {
        auto comma = hosts.find(',');
        auto entry = hosts.substr(0, comma);
        auto colon = entry.rfind(':');
        FUZZ_CHECK(colon != std::string_view::npos && colon > 0);
        auto port = entry.substr(colon + 1);
        FUZZ_CHECK(!port.empty());
        unsigned value = 0;
        for (char c : port) {
            FUZZ_CHECK(c >= '0' && c <= '9');
            value = std::min(value * 10 + static_cast<unsigned>(c - '0'), 100000u);
        }
        FUZZ_CHECK(value >= 1 && value <= 65535);
        // No host, address or IPv6 scope can hold white space or control characters.
        for (char c : entry.substr(0, colon))
            FUZZ_CHECK(static_cast<unsigned char>(c) > 0x20 && c != 0x7f);
        if (comma == std::string_view::npos)
            break;
        hosts = hosts.substr(comma + 1);
    }
}

// A well-formed host: a name, an IPv4 address or an IPv6 address in brackets.
std::string make_host(FuzzedDataProvider& in)
{
    switch (in.ConsumeIntegralInRange(0, 3)) {
    case 0: {
        // A name: letters and digits, starting with a letter, dots between labels.
        std::string name;
        int labels = in.ConsumeIntegralInRange(1, 4);
        for (int l = 0; l < labels; ++l) {
            if (l > 0)
                name += '.';
            name += static_cast<char>('a' + in.ConsumeIntegralInRange(0, 25));
            int more = in.ConsumeIntegralInRange(0, 12);
            for (int k = 0; k < more; ++k) {
                int c = in.ConsumeIntegralInRange(0, 35);
                name += static_cast<char>(c < 26 ? 'a' + c : '0' + (c - 26));
            }
        }
        return name;
    }
    case 1:
        return fmt::format("{}.{}.{}.{}", in.ConsumeIntegral<std::uint8_t>(), in.ConsumeIntegral<std::uint8_t>(),
                           in.ConsumeIntegral<std::uint8_t>(), in.ConsumeIntegral<std::uint8_t>());
    case 2: {
        // Eight groups of hexadecimal digits.
        std::string a = "[";
        for (int g = 0; g < 8; ++g)
            a += fmt::format("{}{:x}", g ? ":" : "", in.ConsumeIntegral<std::uint16_t>());
        return a + "]";
    }
    default: {
        // A compressed form: up to three groups, "::", up to three groups.
        std::string a = "[";
        int head = in.ConsumeIntegralInRange(0, 3), tail = in.ConsumeIntegralInRange(0, 3);
        for (int g = 0; g < head; ++g)
            a += fmt::format("{}{:x}", g ? ":" : "", in.ConsumeIntegral<std::uint16_t>());
        a += "::";
        for (int g = 0; g < tail; ++g)
            a += fmt::format("{}{:x}", g ? ":" : "", in.ConsumeIntegral<std::uint16_t>());
        return a + "]";
    }
    }
}

std::string make_connect_string(FuzzedDataProvider& in)
{
    std::string cs;
    int hosts = in.ConsumeIntegralInRange(1, 5);
    for (int h = 0; h < hosts; ++h) {
        if (h > 0)
            cs += ',';
        cs += make_host(in);
        cs += fmt::format(":{}", in.ConsumeIntegralInRange<unsigned>(1, 65535));
    }
    int depth = in.ConsumeIntegralInRange(0, 3);
    for (int d = 0; d < depth; ++d) {
        cs += '/';
        int len = in.ConsumeIntegralInRange(1, 8);
        for (int k = 0; k < len; ++k)
            cs += static_cast<char>('a' + in.ConsumeIntegralInRange(0, 25));
    }
    return cs;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    std::string_view input(reinterpret_cast<const char*>(data), size);
    auto split = input.rfind('\xff');
    client_config cfg;
    cfg.connect_string = std::string(input.substr(0, split));

    // The connect string alone, every other field at its default.
    auto cs_ec = checked(cfg);
    if (!cs_ec)
        check_accepted_syntax(cfg.connect_string);
    else
        FUZZ_CHECK(cs_ec == client_errc::invalid_connect_string);
    if (split == std::string_view::npos)
        return 0;

    FuzzedDataProvider in(data + split + 1, size - split - 1);
    // The other fields, each either in its range or just outside it.
    using std::chrono::milliseconds;
    bool fields_ok = true;
    auto pick = [&in](auto good, auto bad) { return in.ConsumeBool() ? good : bad; };
    auto session = pick(in.ConsumeIntegralInRange<std::int64_t>(1, 86'400'000),
                        in.ConsumeBool() ? in.ConsumeIntegralInRange<std::int64_t>(-1'000'000, 0)
                                         : in.ConsumeIntegralInRange<std::int64_t>(86'400'001, INT64_MAX / 2));
    cfg.session_timeout = milliseconds(session);
    fields_ok &= session > 0 && session <= 86'400'000;
    auto connect = in.ConsumeIntegralInRange<std::int64_t>(-1000, 1'000'000);
    cfg.connect_timeout = milliseconds(connect);
    fields_ok &= connect >= 0;
    auto max_data = pick(in.ConsumeIntegralInRange<std::size_t>(1, 0x7fffffff),
                         in.ConsumeBool() ? std::size_t{0} : in.ConsumeIntegralInRange<std::size_t>(0x80000000, SIZE_MAX));
    cfg.max_data_size = max_data;
    fields_ok &= max_data >= 1 && max_data <= 0x7fffffff;
    int auths = in.ConsumeIntegralInRange(0, 3);
    for (int k = 0; k < auths; ++k) {
        auto scheme = in.ConsumeRandomLengthString(8);
        fields_ok &= !scheme.empty();
        cfg.auth.push_back({scheme, in.ConsumeRandomLengthString(16)});
    }
    if (in.ConsumeBool()) {
        cfg.default_acl.clear();
        int entries = in.ConsumeIntegralInRange(0, 3);
        for (int k = 0; k < entries; ++k) {
            auto perms = in.ConsumeIntegralInRange<std::int32_t>(-2, 33);
            auto scheme = in.ConsumeRandomLengthString(8);
            fields_ok &= perms >= 0 && perms <= 31 && !scheme.empty();
            cfg.default_acl.push_back({perms, scheme, in.ConsumeRandomLengthString(16)});
        }
    }
    if (in.ConsumeBool()) {
        auto password = in.ConsumeRandomLengthString(20);
        fields_ok &= password.size() <= 16;
        cfg.resume_session = zkcoro::session_credentials{in.ConsumeIntegral<std::int64_t>(), password};
    }
    std::string built = make_connect_string(in);

    auto ec = checked(cfg);
    if (cs_ec)
        FUZZ_CHECK(ec);
    else if (fields_ok)
        FUZZ_CHECK(!ec);
    else
        FUZZ_CHECK(ec == client_errc::invalid_argument);

    // The well-formed connect string with the same fields: only the fields decide.
    cfg.connect_string = built;
    ec = checked(cfg);
    if (ec == client_errc::invalid_connect_string) {
        std::string why;
        zkcoro::check_config(cfg, &why);
        std::fprintf(stderr, "rejected \"%s\": %s\n", built.c_str(), why.c_str());
    }
    FUZZ_CHECK(fields_ok ? !ec : ec == client_errc::invalid_argument);
    return 0;
}
