// lock_metrics as Prometheus text: counters, cumulative buckets, labels escaped, samples of one
// lock summed. (The scrape through HTTP and promtool: examples/09_metrics_endpoint.)
#include <zkcoro/prometheus.hpp>

#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

using namespace zkcoro;
using namespace std::chrono_literals;

namespace {
bool has_line(const std::string& text, const std::string& line)
{
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);)
        if (l == line)
            return true;
    return false;
}
}  // namespace

TEST_CASE("counters and the wait histogram, one label set per lock")
{
    metrics_sample a{"/locks/a", "mutex", {}};
    a.metrics.acquires = 3;
    a.metrics.timeouts = 1;
    a.metrics.wait.record(50us);    // <= 0.1 ms
    a.metrics.wait.record(2ms);     // <= 2.5 ms
    a.metrics.wait.record(2s);      // <= 2.5 s
    metrics_sample a2{"/locks/a", "mutex", {}};  // a second object on the same lock: summed
    a2.metrics.acquires = 2;
    a2.metrics.wait.record(90s);    // only +Inf
    metrics_sample b{"/locks/\"b\"\\\n", "read", {}};
    const auto text = to_prometheus({a, b, a2});
    CHECK(has_line(text, "# TYPE zkcoro_lock_acquires_total counter"));
    CHECK(has_line(text, "zkcoro_lock_acquires_total{path=\"/locks/a\",recipe=\"mutex\"} 5"));
    CHECK(has_line(text, "zkcoro_lock_timeouts_total{path=\"/locks/a\",recipe=\"mutex\"} 1"));
    CHECK(has_line(text, "zkcoro_lock_acquires_total{path=\"/locks/\\\"b\\\"\\\\\\n\",recipe=\"read\"} 0"));
    CHECK(has_line(text, "# TYPE zkcoro_lock_wait_seconds histogram"));
    CHECK(has_line(text, "zkcoro_lock_wait_seconds_bucket{path=\"/locks/a\",recipe=\"mutex\",le=\"0.0001\"} 1"));
    CHECK(has_line(text, "zkcoro_lock_wait_seconds_bucket{path=\"/locks/a\",recipe=\"mutex\",le=\"0.001\"} 1"));
    CHECK(has_line(text, "zkcoro_lock_wait_seconds_bucket{path=\"/locks/a\",recipe=\"mutex\",le=\"0.0025\"} 2"));
    CHECK(has_line(text, "zkcoro_lock_wait_seconds_bucket{path=\"/locks/a\",recipe=\"mutex\",le=\"2.5\"} 3"));
    CHECK(has_line(text, "zkcoro_lock_wait_seconds_bucket{path=\"/locks/a\",recipe=\"mutex\",le=\"60\"} 3"));
    CHECK(has_line(text, "zkcoro_lock_wait_seconds_bucket{path=\"/locks/a\",recipe=\"mutex\",le=\"+Inf\"} 4"));
    CHECK(has_line(text, "zkcoro_lock_wait_seconds_count{path=\"/locks/a\",recipe=\"mutex\"} 4"));
    CHECK(has_line(text, "zkcoro_lock_wait_seconds_sum{path=\"/locks/a\",recipe=\"mutex\"} 92.00205"));
    // Every family's HELP and TYPE once.
    std::size_t types = 0;
    for (std::size_t at = 0; (at = text.find("# TYPE ", at)) != std::string::npos; ++at)
        ++types;
    CHECK(types == 10);
}

TEST_CASE("prefix: a valid name is used, an invalid one falls back; no samples: only HELP and TYPE")
{
    CHECK(to_prometheus({{"/x", "mutex", {}}}, "app_locks").find("app_locks_acquires_total{") != std::string::npos);
    CHECK(to_prometheus({{"/x", "mutex", {}}}, "9bad name").find("\nzkcoro_lock_acquires_total{") != std::string::npos);
    const auto empty = to_prometheus({});
    CHECK(empty.find('{') == std::string::npos);
    CHECK(empty.find("# TYPE zkcoro_lock_wait_seconds histogram") != std::string::npos);
}

// Issue 32 item 13: a label value with bytes that are not UTF-8 (a binary Redis key) made the
// whole exposition invalid (promtool rejects it). Such a byte is written as the text \xHH; valid
// UTF-8 (é, an emoji) passes unchanged.
TEST_CASE("label values are valid UTF-8: a byte that is not is written as \\xHH")
{
    metrics_sample bin{std::string("key-\xff\xc3(\xe2\x82", 9), "redis-mutex", {}};
    metrics_sample ok{"/locks/caf\xc3\xa9-\xf0\x9f\x94\x92", "mutex", {}};
    metrics_sample overlong{std::string("\xc0\xaf\xed\xa0\x80", 5), "mutex", {}};  // overlong '/', a surrogate
    const auto text = to_prometheus({bin, ok, overlong});
    CHECK(has_line(text, "zkcoro_lock_acquires_total{path=\"key-\\\\xFF\\\\xC3(\\\\xE2\\\\x82\",recipe=\"redis-mutex\"} 0"));
    CHECK(has_line(text, "zkcoro_lock_acquires_total{path=\"/locks/caf\xc3\xa9-\xf0\x9f\x94\x92\",recipe=\"mutex\"} 0"));
    CHECK(has_line(text, "zkcoro_lock_acquires_total{path=\"\\\\xC0\\\\xAF\\\\xED\\\\xA0\\\\x80\",recipe=\"mutex\"} 0"));
    CHECK_MESSAGE(text.find('\xff') == std::string::npos, "a raw 0xFF byte in the exposition");
}
