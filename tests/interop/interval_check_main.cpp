// interval-check [--max-leases N] [--expect-ids a,b,c] [--max-print N] FILE...
//
// Checks hold logs (see interval_checker.hpp) for exclusion violations.
// Exit 0: no violation, at least one hold, and every --expect-ids id held at least once.
// Exit 1: violations or missing ids (printed). Exit 2: bad usage, unreadable or malformed log.
#include <charconv>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "interval_checker.hpp"

namespace {

constexpr std::string_view usage =
    "usage: interval-check [--max-leases N] [--expect-ids a,b,c] [--max-print N] FILE...\n";

bool parse_int(std::string_view s, long long& v) {
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc{} && ptr == s.data() + s.size();
}

std::vector<std::string> split_commas(std::string_view s) {
    std::vector<std::string> out;
    while (!s.empty()) {
        const auto comma = s.find(',');
        const auto part = s.substr(0, comma);
        if (!part.empty()) out.emplace_back(part);
        if (comma == std::string_view::npos) break;
        s.remove_prefix(comma + 1);
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    long long max_leases = 1;
    long long max_print = 50;
    std::vector<std::string> expect_ids;
    std::vector<std::string> files;

    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        auto value = [&](std::string_view name) -> std::string_view {
            if (i + 1 >= argc) {
                fmt::print(stderr, "interval-check: {} needs a value\n{}", name, usage);
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--max-leases" || a == "--max-print") {
            long long& target = a == "--max-leases" ? max_leases : max_print;
            const auto v = value(a);
            if (!parse_int(v, target) || target < (a == "--max-leases" ? 1 : 0) || target > 1'000'000) {
                fmt::print(stderr, "interval-check: bad value for {}: '{}'\n{}", a, v, usage);
                return 2;
            }
        } else if (a == "--expect-ids") {
            expect_ids = split_commas(value(a));
        } else if (a == "-h" || a == "--help") {
            fmt::print("{}", usage);
            return 0;
        } else if (a == "--") {
            for (++i; i < argc; ++i) files.emplace_back(argv[i]);
        } else if (a.starts_with("-") && a.size() > 1) {
            fmt::print(stderr, "interval-check: unknown option '{}'\n{}", a, usage);
            return 2;
        } else {
            files.emplace_back(a);
        }
    }
    if (files.empty()) {
        fmt::print(stderr, "interval-check: no hold log given\n{}", usage);
        return 2;
    }

    std::vector<zktest::hold> holds;
    try {
        holds = zktest::read_holds(files);
    } catch (const std::exception& e) {
        fmt::print(stderr, "interval-check: {}\n", e.what());
        return 2;
    }
    const std::size_t total = holds.size();
    const auto rep = zktest::check_holds(std::move(holds), static_cast<int>(max_leases));

    bool ok = rep.ok;
    fmt::print("holds={} max_concurrency={} max_leases={}\n", total, rep.max_concurrency, max_leases);
    for (const auto& [id, n] : rep.per_id) fmt::print("  {}: {}\n", id, n);
    if (total == 0) {
        fmt::print("FAIL: no holds recorded\n");
        ok = false;
    }
    for (const auto& id : expect_ids) {
        if (!rep.per_id.contains(id)) {
            fmt::print("FAIL: expected id '{}' never acquired\n", id);
            ok = false;
        }
    }
    const auto shown = std::min<std::size_t>(rep.violations.size(), static_cast<std::size_t>(max_print));
    for (std::size_t k = 0; k < shown; ++k) fmt::print("VIOLATION: {}\n", rep.violations[k]);
    if (rep.violations.size() > shown) fmt::print("... and {} more violation(s)\n", rep.violations.size() - shown);
    fmt::print("{}: {} violation(s)\n", ok ? "OK" : "FAIL", rep.violations.size());
    return ok ? 0 : 1;
}
