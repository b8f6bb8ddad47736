#include "interval_checker.hpp"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <tuple>

#include <fmt/format.h>

namespace zktest {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'; }

std::vector<std::string_view> split_fields(std::string_view line) {
    std::vector<std::string_view> out;
    std::size_t i = 0;
    while (i < line.size()) {
        while (i < line.size() && is_space(line[i])) ++i;
        if (i == line.size()) break;
        std::size_t j = i;
        while (j < line.size() && !is_space(line[j])) ++j;
        out.push_back(line.substr(i, j - i));
        i = j;
    }
    return out;
}

bool parse_i64(std::string_view s, std::int64_t& v) {
    const char* first = s.data();
    const char* last = s.data() + s.size();
    auto [ptr, ec] = std::from_chars(first, last, v);
    return ec == std::errc{} && ptr == last;
}

[[noreturn]] void malformed(const std::string& file, std::size_t lineno, std::string_view why,
                            std::string_view line) {
    constexpr std::size_t max_shown = 120;
    std::string shown(line.substr(0, max_shown));
    if (line.size() > max_shown) shown += "...";
    throw std::runtime_error(fmt::format("{}:{}: malformed hold line ({}): '{}'", file, lineno, why, shown));
}

std::string describe(const hold& h) {
    return fmt::format("{} {} [{}, {}]", h.id, h.mode, h.enter_ns, h.exit_ns);
}

std::string micros(std::int64_t ns) { return fmt::format("{}.{:03} µs", ns / 1000, ns % 1000); }

bool compatible(char a, char b) { return (a == 'R' && b == 'R') || (a == 'S' && b == 'S'); }

}  // namespace

std::vector<hold> read_holds(const std::vector<std::string>& files) {
    std::vector<hold> holds;
    for (const auto& file : files) {
        std::ifstream in(file);
        if (!in) throw std::runtime_error(fmt::format("{}: cannot open hold log", file));
        std::string line;
        std::size_t lineno = 0;
        while (std::getline(in, line)) {
            ++lineno;
            const auto fields = split_fields(line);
            if (fields.empty() || fields[0].front() == '#') continue;
            if (fields.size() != 4) {
                malformed(file, lineno, fmt::format("expected 4 fields '<id> <mode> <enter_ns> <exit_ns>', got {}", fields.size()), line);
            }
            if (fields[1].size() != 1 || std::string_view("XRWS").find(fields[1][0]) == std::string_view::npos) {
                malformed(file, lineno, fmt::format("mode must be X, R, W or S, not '{}'", fields[1]), line);
            }
            hold h{std::string(fields[0]), fields[1][0], 0, 0};
            if (!parse_i64(fields[2], h.enter_ns)) malformed(file, lineno, "enter_ns is not an integer", line);
            if (!parse_i64(fields[3], h.exit_ns)) malformed(file, lineno, "exit_ns is not an integer", line);
            if (h.exit_ns < h.enter_ns) malformed(file, lineno, "exit_ns before enter_ns", line);
            holds.push_back(std::move(h));
        }
        if (in.bad()) throw std::runtime_error(fmt::format("{}: read error", file));
    }
    return holds;
}

check_report check_holds(std::vector<hold> holds, int max_leases) {
    check_report rep{true, {}, {}, 0};
    const std::size_t lease_limit = max_leases < 1 ? 1 : static_cast<std::size_t>(max_leases);

    std::sort(holds.begin(), holds.end(), [](const hold& a, const hold& b) {
        return std::tie(a.enter_ns, a.exit_ns, a.id, a.mode) < std::tie(b.enter_ns, b.exit_ns, b.id, b.mode);
    });

    // Sweep by enter time. `active` holds the indexes of earlier holds still running at the
    // current enter time (exit strictly later), so each of them shares the instant just after
    // `enter` with the new hold if the new hold has positive length.
    std::vector<std::size_t> active;
    for (std::size_t i = 0; i < holds.size(); ++i) {
        const hold& h = holds[i];
        ++rep.per_id[h.id];
        std::erase_if(active, [&](std::size_t k) { return holds[k].exit_ns <= h.enter_ns; });
        if (h.exit_ns == h.enter_ns) continue;  // zero-length: overlaps nothing
        rep.max_concurrency = std::max(rep.max_concurrency, active.size() + 1);

        std::vector<std::size_t> sem_group;
        for (std::size_t k : active) {
            const hold& o = holds[k];
            if (h.mode == 'S' && o.mode == 'S') sem_group.push_back(k);
            if (compatible(h.mode, o.mode)) continue;
            const std::int64_t overlap = std::min(h.exit_ns, o.exit_ns) - h.enter_ns;  // o.enter <= h.enter
            rep.violations.push_back(fmt::format("{} overlaps {} by {}", describe(o), describe(h), micros(overlap)));
        }
        if (h.mode == 'S' && sem_group.size() + 1 > lease_limit) {
            std::int64_t common_end = h.exit_ns;
            std::string who;
            for (std::size_t k : sem_group) {
                common_end = std::min(common_end, holds[k].exit_ns);
                who += describe(holds[k]);
                who += ", ";
            }
            who += describe(h);
            rep.violations.push_back(fmt::format("semaphore over-subscribed: {} leases held at once (max {}) for {}: {}",
                                                 sem_group.size() + 1, lease_limit, micros(common_end - h.enter_ns), who));
        }
        active.push_back(i);
    }
    rep.ok = rep.violations.empty();
    return rep;
}

}  // namespace zktest
