// Interval checker for lock-interop tests: reads the hold logs written by CuratorHolder (and by
// zkcoro's own holders) and verifies that the logged holds respect the lock's exclusion rules.
//
// Log format, one hold per line:   <id> <mode> <enter_ns> <exit_ns>
//   id:    non-empty, no whitespace
//   mode:  X (mutex), R (read lock), W (write lock), S (one semaphore lease)
//   times: CLOCK_MONOTONIC nanoseconds (Java System.nanoTime(), std::chrono::steady_clock),
//          enter_ns <= exit_ns. All files must come from one host (one clock).
// Blank lines and lines starting with '#' are ignored.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace zktest {

struct hold {
    std::string id;
    char mode;  // 'X', 'R', 'W' or 'S'
    std::int64_t enter_ns, exit_ns;
};

// Reads every file in order. Throws std::runtime_error naming "file:line" on a malformed line,
// and naming the file when it cannot be opened or read.
std::vector<hold> read_holds(const std::vector<std::string>& files);

struct check_report {
    bool ok;                                    // no violations
    std::vector<std::string> violations;        // human-readable, one per conflict
    std::map<std::string, std::size_t> per_id;  // holds per id
    std::size_t max_concurrency;                // most holds (any mode) active at one instant
};

// Rules: 'X' and 'W' exclude everyone; 'R' may overlap 'R'; 'S' may overlap 'S' with at most
// `max_leases` at once (and nothing else). Intervals are half-open in effect: two holds overlap
// only if their intersection has positive length, so exit == enter is fine and a zero-length
// hold conflicts with nothing. Each conflicting pair is reported once, naming both holders and
// the overlap in µs; an over-subscribed semaphore is reported once per excess entrant.
check_report check_holds(std::vector<hold> holds, int max_leases = 1);

}  // namespace zktest
