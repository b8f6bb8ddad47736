// doctest's main for the unit and integration test programs, plus two rules: a run whose filters
// select no case fails (a test that runs some files' cases of a program, tests/meson.build, must
// not pass by running nothing); when every case that ran passed but some were skipped
// (ZKTEST_SKIP_CASE, skipped_cases.hpp), exit 77, which Meson reports as SKIP, instead of a plain
// pass.
#define DOCTEST_CONFIG_IMPLEMENT
#include "skipped_cases.hpp"

#include <cstdio>

namespace {

// A listener that keeps how many cases the run's filters selected.
struct selected_cases : doctest::IReporter {
    static inline bool ended = false;
    static inline unsigned count = 0;

    explicit selected_cases(const doctest::ContextOptions&) {}
    void report_query(const doctest::QueryData&) override {}
    void test_run_start() override {}
    void test_run_end(const doctest::TestRunStats& stats) override
    {
        ended = true;
        count = stats.numTestCasesPassingFilters;
    }
    void test_case_start(const doctest::TestCaseData&) override {}
    void test_case_reenter(const doctest::TestCaseData&) override {}
    void test_case_end(const doctest::CurrentTestCaseStats&) override {}
    void test_case_exception(const doctest::TestCaseException&) override {}
    void subcase_start(const doctest::SubcaseSignature&) override {}
    void subcase_end() override {}
    void log_assert(const doctest::AssertData&) override {}
    void log_message(const doctest::MessageData&) override {}
    void test_case_skipped(const doctest::TestCaseData&) override {}
};
DOCTEST_REGISTER_LISTENER("zktest_selected_cases", 1, selected_cases);

}  // namespace

int main(int argc, char** argv)
{
    doctest::Context context(argc, argv);
    const int rc = context.run();
    if (context.shouldExit() || rc != 0)
        return rc;
    if (selected_cases::ended && selected_cases::count == 0) {
        std::fprintf(stderr, "no test case selected by the filters given (--source-file, --test-case, ...): "
                             "a run that runs nothing fails\n");
        return 1;
    }
    if (const int n = zktest::skipped_cases.load(); n > 0) {
        std::fprintf(stderr, "%d case(s) or part(s) of cases skipped (see SKIPPED: above): exit 77 (skip)\n", n);
        return 77;
    }
    return 0;
}
