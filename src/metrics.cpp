#include <zkcoro/metrics.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace zkcoro {

namespace {
constexpr int sub_bits = 3;  // 8 buckets per power of two
constexpr std::uint64_t sub_count = std::uint64_t{1} << sub_bits;
}  // namespace

std::size_t duration_histogram::bucket_of(std::uint64_t ns) noexcept
{
    if (ns < sub_count)
        return static_cast<std::size_t>(ns);
    int e = std::bit_width(ns) - 1;  // 3..63
    std::uint64_t sub = (ns >> (e - sub_bits)) - sub_count;
    return static_cast<std::size_t>(sub_count + static_cast<std::uint64_t>(e - sub_bits) * sub_count + sub);
}

std::uint64_t duration_histogram::bucket_low(std::size_t bucket) noexcept
{
    if (bucket < sub_count)
        return bucket;
    std::uint64_t i = bucket - sub_count;
    int e = static_cast<int>(i / sub_count) + sub_bits;
    std::uint64_t sub = i % sub_count;
    return (sub_count + sub) << (e - sub_bits);
}

void duration_histogram::record(std::chrono::nanoseconds d) noexcept
{
    std::uint64_t v = d.count() > 0 ? static_cast<std::uint64_t>(d.count()) : 0;
    ++buckets_[bucket_of(v)];
    min_ = count_ == 0 ? v : std::min(min_, v);
    max_ = std::max(max_, v);
    ++count_;
    sum_ = sum_ > std::numeric_limits<std::uint64_t>::max() - v ? std::numeric_limits<std::uint64_t>::max() : sum_ + v;
}

void duration_histogram::merge(const duration_histogram& o) noexcept
{
    if (o.count_ == 0)
        return;
    for (std::size_t i = 0; i < bucket_count; ++i)
        buckets_[i] += o.buckets_[i];
    min_ = count_ == 0 ? o.min_ : std::min(min_, o.min_);
    max_ = std::max(max_, o.max_);
    count_ += o.count_;
    sum_ = sum_ > std::numeric_limits<std::uint64_t>::max() - o.sum_ ? std::numeric_limits<std::uint64_t>::max()
                                                                    : sum_ + o.sum_;
}

std::chrono::nanoseconds duration_histogram::mean() const noexcept
{
    if (count_ == 0)
        return std::chrono::nanoseconds(0);
    return std::chrono::nanoseconds(static_cast<std::int64_t>(std::min<std::uint64_t>(
        sum_ / count_, static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))));
}

std::chrono::nanoseconds duration_histogram::sum() const noexcept
{
    return std::chrono::nanoseconds(static_cast<std::int64_t>(
        std::min<std::uint64_t>(sum_, static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))));
}

std::chrono::nanoseconds duration_histogram::percentile(double p) const noexcept
{
    if (count_ == 0)
        return std::chrono::nanoseconds(0);
    if (!(p > 0))  // also NaN
        return min();
    p = std::min(p, 100.0);
    auto rank = static_cast<std::uint64_t>(std::ceil(p / 100.0 * static_cast<double>(count_)));
    rank = std::clamp<std::uint64_t>(rank, 1, count_);
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < bucket_count; ++i) {
        seen += buckets_[i];
        if (seen >= rank) {
            std::uint64_t low = bucket_low(i);
            std::uint64_t width = i + 1 < bucket_count ? bucket_low(i + 1) - low : low;
            std::uint64_t mid = low + width / 2;
            if (width == 1)
                mid = low;
            mid = std::clamp(mid, min_, max_);
            return std::chrono::nanoseconds(static_cast<std::int64_t>(
                std::min<std::uint64_t>(mid, static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))));
        }
    }
    return max();
}

}  // namespace zkcoro
