// doctest's main for the unit and integration test programs, plus one rule: when every case that
// ran passed but some were skipped (ZKTEST_SKIP_CASE, skipped_cases.hpp), exit 77, which Meson
// reports as SKIP, instead of a plain pass.
#define DOCTEST_CONFIG_IMPLEMENT
#include "skipped_cases.hpp"

#include <cstdio>

int main(int argc, char** argv)
{
    doctest::Context context(argc, argv);
    const int rc = context.run();
    if (context.shouldExit() || rc != 0)
        return rc;
    if (const int n = zktest::skipped_cases.load(); n > 0) {
        std::fprintf(stderr, "%d case(s) or part(s) of cases skipped (see SKIPPED: above): exit 77 (skip)\n", n);
        return 77;
    }
    return 0;
}
