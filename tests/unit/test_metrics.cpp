// duration_histogram: bucket boundaries, percentiles within the promised error, merge.
#include <zkcoro/metrics.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

using zkcoro::duration_histogram;
using std::chrono::nanoseconds;

TEST_CASE("buckets are contiguous, ordered and cover every value")
{
    for (std::size_t b = 0; b + 1 < duration_histogram::bucket_count; ++b) {
        auto low = duration_histogram::bucket_low(b);
        auto next = duration_histogram::bucket_low(b + 1);
        REQUIRE(next > low);
        CHECK(duration_histogram::bucket_of(low) == b);
        CHECK(duration_histogram::bucket_of(next - 1) == b);
        // Width at most 1/8 of the bucket's lower bound (exact below 8).
        if (low >= 8)
            CHECK((next - low) * 8 <= low);
    }
    CHECK(duration_histogram::bucket_of(0) == 0);
    CHECK(duration_histogram::bucket_of(std::numeric_limits<std::uint64_t>::max()) ==
          duration_histogram::bucket_count - 1);
}

TEST_CASE("an empty histogram reports zeros")
{
    duration_histogram h;
    CHECK(h.count() == 0);
    CHECK(h.percentile(50) == nanoseconds(0));
    CHECK(h.mean() == nanoseconds(0));
    CHECK(h.min() == nanoseconds(0));
    CHECK(h.max() == nanoseconds(0));
}

TEST_CASE("small values are exact; negative durations count as zero")
{
    duration_histogram h;
    h.record(nanoseconds(-5));
    h.record(nanoseconds(3));
    h.record(nanoseconds(7));
    CHECK(h.count() == 3);
    CHECK(h.min() == nanoseconds(0));
    CHECK(h.percentile(50) == nanoseconds(3));
    CHECK(h.percentile(100) == nanoseconds(7));
    CHECK(h.mean() == nanoseconds(3));
}

TEST_CASE("percentiles stay within 1/16 of nearest rank on a spread of values")
{
    std::mt19937_64 rng(42);
    std::lognormal_distribution<double> dist(13.0, 1.5);  // around 0.4 ms, wide
    duration_histogram h;
    std::vector<std::int64_t> values;
    for (int i = 0; i < 20000; ++i) {
        auto v = static_cast<std::int64_t>(dist(rng));
        values.push_back(v);
        h.record(nanoseconds(v));
    }
    std::sort(values.begin(), values.end());
    for (double p : {1.0, 50.0, 90.0, 99.0, 99.9, 100.0}) {
        auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
        double exact = static_cast<double>(values[rank - 1]);
        double got = static_cast<double>(h.percentile(p).count());
        INFO("p" << p << " exact " << exact << " got " << got);
        CHECK(std::abs(got - exact) <= exact / 16.0 + 1);
    }
    CHECK(h.max().count() == values.back());
    CHECK(h.min().count() == values.front());
}

TEST_CASE("merge adds counts and keeps min and max")
{
    duration_histogram a, b;
    a.record(nanoseconds(1000));
    b.record(nanoseconds(10));
    b.record(nanoseconds(1'000'000));
    a.merge(b);
    CHECK(a.count() == 3);
    CHECK(a.min() == nanoseconds(10));
    CHECK(a.max() == nanoseconds(1'000'000));
    CHECK(a.percentile(50).count() >= 1000 - 1000 / 16);
    CHECK(a.percentile(50).count() <= 1000 + 1000 / 16);
}

TEST_CASE("huge values saturate the sum instead of wrapping")
{
    duration_histogram h;
    h.record(nanoseconds(std::numeric_limits<std::int64_t>::max()));
    h.record(nanoseconds(std::numeric_limits<std::int64_t>::max()));
    h.record(nanoseconds(std::numeric_limits<std::int64_t>::max()));
    CHECK(h.mean().count() > 0);
    CHECK(h.percentile(50).count() > 0);
}
