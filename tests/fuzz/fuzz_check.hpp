// A check for fuzz targets: when a property does not hold, say which one and abort, so that
// libFuzzer records the input as a crash.
#ifndef ZKCORO_TESTS_FUZZ_CHECK_HPP
#define ZKCORO_TESTS_FUZZ_CHECK_HPP

#include <cstdio>
#include <cstdlib>

// Unlike assert(), this stays active whatever NDEBUG says.
#define FUZZ_CHECK(cond)                                                                     \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            std::fprintf(stderr, "%s:%d: property does not hold: %s\n", __FILE__, __LINE__, #cond); \
            std::abort();                                                                    \
        }                                                                                    \
    } while (false)

#endif
