#pragma once
// Upper limits on how long something may take, in the tests. The sanitizer build (scripts/test.sh's
// second run, -Db_sanitize=address,undefined: tests/meson.build defines ZKTEST_SANITIZED, and gcc
// defines __SANITIZE_ADDRESS__ under AddressSanitizer) runs the code 2-3 times slower, on 2 cores
// shared with other builds, so a limit that holds with room in the plain build is multiplied by
// timing_slack there. Only liveness limits ("done within ...") are relaxed: lower bounds ("waited
// at least ...") and limits that tell two behaviours apart keep their value (their comments say
// why).
namespace zktest {
#if defined(ZKTEST_SANITIZED) || defined(__SANITIZE_ADDRESS__)
inline constexpr int timing_slack = 3;
#else
inline constexpr int timing_slack = 1;
#endif

template <class Duration>
constexpr Duration relaxed(Duration d)
{
    return d * timing_slack;
}
constexpr double relaxed(double seconds)
{
    return seconds * timing_slack;
}
}  // namespace zktest
