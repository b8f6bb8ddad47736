// lock_metrics in the Prometheus text exposition format (version 0.0.4), for an application to
// serve on its own /metrics endpoint: the library renders text and starts no server.
#ifndef ZKCORO_PROMETHEUS_HPP
#define ZKCORO_PROMETHEUS_HPP

#include <zkcoro/detail/api.hpp>
#include <zkcoro/metrics.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace zkcoro {

/// One lock object's metrics and the labels they are exposed under.
struct metrics_sample {
    std::string path;    ///< label "path": the lock path
    std::string recipe;  ///< label "recipe": e.g. "mutex", "read", "write", "semaphore"
    lock_metrics metrics;  ///< the counters and histograms
};

/// Renders the samples as Prometheus text: for each counter of lock_metrics a counter family
/// <prefix>_<name>_total (acquires, timeouts, cancellations, errors, losses, local_handoffs,
/// release_failures, linger_grants, batch_time_ends), and the wait histogram as the histogram
/// family <prefix>_wait_seconds with cumulative buckets at 0.1 ms, 0.25 ms ... 60 s and +Inf,
/// _sum and _count. Samples with the same path and recipe (several objects on one lock) are
/// summed. Label values are escaped (backslash, double quote, newline; a byte that is not part
/// of valid UTF-8, e.g. of a binary Redis key, as the text \\xHH). A bucket counts the
/// values at most its bound to within the histogram's resolution (1/8 of a power of two): a
/// value in the histogram bucket that straddles the bound counts below it.
/// `prefix` must be a valid metric name ([a-zA-Z_:][a-zA-Z0-9_:]*); otherwise "zkcoro_lock".
ZKCORO_API std::string to_prometheus(const std::vector<metrics_sample>& samples,
                                     std::string_view prefix = "zkcoro_lock");

/// The content type to serve it with.
inline constexpr std::string_view prometheus_content_type = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace zkcoro

#endif
