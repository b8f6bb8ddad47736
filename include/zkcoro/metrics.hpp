// What a lock object counts about itself, readable without a profiler: outcomes of acquisitions,
// losses, in-process handoffs, and a histogram of wait times.
#ifndef ZKCORO_METRICS_HPP
#define ZKCORO_METRICS_HPP

#include <zkcoro/detail/config.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace zkcoro {

/// A log-linear histogram of durations in nanoseconds: exact below 8 ns, then 8 buckets per power
/// of two, so a percentile is reported within 1/16 of the true value (the bucket's middle, kept
/// inside [min, max]). Fixed size (about 4 KiB), no allocation; record() is O(1).
///
/// \par Thread safety
/// Distinct objects: safe. Shared objects: unsafe (the owner serialises; snapshots are copies).
class ZKCORO_API duration_histogram {
public:
    /// The number of buckets: exact below 8 ns, then 8 per power of two up to 2^64 ns.
    static constexpr std::size_t bucket_count = 8 + 61 * 8;

    /// Negative durations count as zero.
    void record(std::chrono::nanoseconds d) noexcept;
    /// Adds another histogram's values to this one.
    void merge(const duration_histogram& other) noexcept;

    /// How many values were recorded.
    std::uint64_t count() const noexcept { return count_; }
    /// Zero when empty.
    std::chrono::nanoseconds min() const noexcept { return std::chrono::nanoseconds(count_ ? min_ : 0); }
    /// The largest recorded value (zero when empty).
    std::chrono::nanoseconds max() const noexcept { return std::chrono::nanoseconds(max_); }
    /// The mean of the recorded values (zero when empty).
    std::chrono::nanoseconds mean() const noexcept;
    /// The sum of the recorded values (saturates at 2^64-1 ns).
    std::chrono::nanoseconds sum() const noexcept;
    /// How many recorded values fell in `bucket` (0 for one out of range).
    std::uint64_t bucket_value(std::size_t bucket) const noexcept
    {
        return bucket < bucket_count ? buckets_[bucket] : 0;
    }
    /// Nearest rank: the smallest recorded value v with at least p% of the values <= v, to within
    /// the bucket width. p is clamped to [0, 100]; zero when empty.
    std::chrono::nanoseconds percentile(double p) const noexcept;

    /// The bucket a value falls in, and the smallest value of a bucket (pure functions, exposed
    /// for tests).
    static std::size_t bucket_of(std::uint64_t ns) noexcept;
    /// The smallest value (ns) that falls in `bucket`.
    static std::uint64_t bucket_low(std::size_t bucket) noexcept;

private:
    std::array<std::uint64_t, bucket_count> buckets_{};
    std::uint64_t count_ = 0;
    std::uint64_t sum_ = 0;  ///< saturates
    std::uint64_t min_ = 0;
    std::uint64_t max_ = 0;
};

/// The counters of one lock object (a mutex, one side of a shared_mutex, a semaphore) since it was
/// constructed. Every acquisition ends in exactly one of acquires, timeouts, cancellations, errors.
struct lock_metrics {
    std::uint64_t acquires = 0;        ///< granted (a reentrant acquisition counts too)
    std::uint64_t timeouts = 0;        ///< the timeout ran out first (try_acquire that found it held too)
    std::uint64_t cancellations = 0;   ///< cancelled through the completion handler's slot
    std::uint64_t errors = 0;          ///< any other failure: session lost, invalid path, refused...
    std::uint64_t losses = 0;          ///< held locks that were lost (the guard reported lock_lost)
    std::uint64_t local_handoffs = 0;  ///< grants passed between tasks of this process in memory
    std::uint64_t release_failures = 0;  ///< releases whose delete failed for good (also logged)
    std::uint64_t linger_grants = 0;   ///< grants of a lingering node (mutex_options::linger): no request
    std::uint64_t batch_time_ends = 0; ///< handoff batches ended by handoff_batch_time (another was queued)
    duration_histogram wait;           ///< from the acquire call to the grant, granted ones only
};

}  // namespace zkcoro

#endif
