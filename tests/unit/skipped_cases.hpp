#pragma once
// Cases that cannot run here (root-only ones when not root) are reported, not passed: a case calls
// ZKTEST_SKIP_CASE("reason") and returns. doctest would count the case as passed, so the test
// program's main (doctest_main.cpp) exits 77 instead of 0 when every case that ran passed but one
// or more were skipped: Meson reports the program as SKIP (its log lists what ran and what was
// skipped), and scripts/test.sh refuses a run with skips unless ZKCORO_ALLOW_SKIPS=1.
#include <doctest/doctest.h>

#include <atomic>

namespace zktest {
// The number of ZKTEST_SKIP_CASE calls in this program (one per skipped case or part of a case).
inline std::atomic<int> skipped_cases{0};
}  // namespace zktest

#define ZKTEST_SKIP_CASE(reason)                   \
    do {                                           \
        MESSAGE("SKIPPED: " << (reason));          \
        ++::zktest::skipped_cases;                 \
    } while (false)
