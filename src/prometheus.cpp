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

std::string escape_label(std::string_view v)
{
    std::string out;
    out.reserve(v.size());
    for (char c : v) {
        if (c == '\\')
            out += "\\\\";
        else if (c == '"')
            out += "\\\"";
        else if (c == '\n')
            out += "\\n";
        else
            out += c;
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
