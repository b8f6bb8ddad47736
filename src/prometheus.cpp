// lock_metrics as Prometheus text (include/zkcoro/prometheus.hpp).
#include <zkcoro/prometheus.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <utility>

namespace zkcoro {

namespace {

// Bucket bounds of the wait histogram, in seconds.
constexpr std::array<double, 18> bounds{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                        0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30,    60};

bool valid_name(std::string_view n)
{
    if (n.empty())
        return false;
    for (std::size_t i = 0; i < n.size(); ++i) {
        const char c = n[i];
        const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
        if (!alpha && !(i > 0 && c >= '0' && c <= '9'))
            return false;
    }
    return true;
}

// The length of the well-formed UTF-8 sequence at the start of `v` (RFC 3629: no overlong form,
// no surrogate, nothing above U+10FFFF), 0 when there is none.
std::size_t utf8_length(std::string_view v) noexcept
{
    const auto b = [&](std::size_t i) { return static_cast<unsigned char>(v[i]); };
    const unsigned char c = b(0);
    std::size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        lo = c == 0xE0 ? 0xA0 : 0x80;
        hi = c == 0xED ? 0x9F : 0xBF;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        lo = c == 0xF0 ? 0x90 : 0x80;
        hi = c == 0xF4 ? 0x8F : 0xBF;
    } else {
        return 0;
    }
    if (v.size() < n || b(1) < lo || b(1) > hi)
        return 0;
    for (std::size_t i = 2; i < n; ++i)
        if (b(i) < 0x80 || b(i) > 0xBF)
            return 0;
    return n;
}

// A label value in the text format: \\, \" and \n escaped; a byte that is not part of valid
// UTF-8 (a binary Redis key, a path's raw bytes) written as the text \xHH, since the format has no
// escape for it and one invalid byte makes a scraper (promtool) reject the whole exposition.
std::string escape_label(std::string_view v)
{
    std::string out;
    out.reserve(v.size());
    while (!v.empty()) {
        const char c = v.front();
        const std::size_t n = utf8_length(v);
        if (n == 0)
            out += fmt::format("\\\\x{:02X}", static_cast<unsigned char>(c));
        else if (c == '\\')
            out += "\\\\";
        else if (c == '"')
            out += "\\\"";
        else if (c == '\n')
            out += "\\n";
        else
            out.append(v.substr(0, n));
        v.remove_prefix(n == 0 ? 1 : n);
    }
    return out;
}

void add(lock_metrics& to, const lock_metrics& m)
{
    to.acquires += m.acquires;
    to.timeouts += m.timeouts;
    to.cancellations += m.cancellations;
    to.errors += m.errors;
    to.losses += m.losses;
    to.local_handoffs += m.local_handoffs;
    to.release_failures += m.release_failures;
    to.linger_grants += m.linger_grants;
    to.batch_time_ends += m.batch_time_ends;
    to.wait.merge(m.wait);
}

struct counter {
    std::string_view name;
    std::string_view help;
    std::uint64_t lock_metrics::*field;
};
constexpr std::array<counter, 9> counters{{
    {"acquires", "Acquisitions granted (a reentrant one counts too).", &lock_metrics::acquires},
    {"timeouts", "Acquisitions whose timeout ran out first.", &lock_metrics::timeouts},
    {"cancellations", "Acquisitions cancelled by the caller.", &lock_metrics::cancellations},
    {"errors", "Acquisitions that failed otherwise (session lost, refused...).", &lock_metrics::errors},
    {"losses", "Held locks that were lost.", &lock_metrics::losses},
    {"local_handoffs", "Grants passed between tasks of this process in memory.", &lock_metrics::local_handoffs},
    {"release_failures", "Releases whose delete failed for good.", &lock_metrics::release_failures},
    {"linger_grants", "Grants of a lingering node, with no request.", &lock_metrics::linger_grants},
    {"batch_time_ends", "Handoff batches ended by handoff_batch_time.", &lock_metrics::batch_time_ends},
}};

}  // namespace

std::string to_prometheus(const std::vector<metrics_sample>& samples, std::string_view prefix)
{
    const std::string p = valid_name(prefix) ? std::string(prefix) : std::string("zkcoro_lock");
    std::map<std::pair<std::string, std::string>, lock_metrics> merged;
    for (const auto& s : samples)
        add(merged[{s.path, s.recipe}], s.metrics);
    std::map<std::pair<std::string, std::string>, std::string> labels;
    for (const auto& [key, _] : merged)
        labels[key] = fmt::format("path=\"{}\",recipe=\"{}\"", escape_label(key.first), escape_label(key.second));

    std::string out;
    for (const auto& c : counters) {
        out += fmt::format("# HELP {}_{}_total {}\n# TYPE {}_{}_total counter\n", p, c.name, c.help, p, c.name);
        for (const auto& [key, m] : merged)
            out += fmt::format("{}_{}_total{{{}}} {}\n", p, c.name, labels[key], m.*(c.field));
    }
    out += fmt::format("# HELP {}_wait_seconds Time from the acquire call to the grant, granted acquisitions.\n"
                       "# TYPE {}_wait_seconds histogram\n",
                       p, p);
    for (const auto& [key, m] : merged) {
        const auto& h = m.wait;
        std::size_t bucket = 0;
        std::uint64_t cumulative = 0;
        for (double b : bounds) {
            const auto bound_ns = static_cast<std::uint64_t>(b * 1e9 + 0.5);
            while (bucket < duration_histogram::bucket_count && duration_histogram::bucket_low(bucket) <= bound_ns)
                cumulative += h.bucket_value(bucket++);
            out += fmt::format("{}_wait_seconds_bucket{{{},le=\"{}\"}} {}\n", p, labels[key], b, cumulative);
        }
        out += fmt::format("{}_wait_seconds_bucket{{{},le=\"+Inf\"}} {}\n", p, labels[key], h.count());
        out += fmt::format("{}_wait_seconds_sum{{{}}} {}\n", p, labels[key],
                           static_cast<double>(h.sum().count()) / 1e9);
        out += fmt::format("{}_wait_seconds_count{{{}}} {}\n", p, labels[key], h.count());
    }
    return out;
}

}  // namespace zkcoro
