#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "interval_checker.hpp"

using zktest::check_holds;
using zktest::hold;
using zktest::read_holds;

namespace {

bool mentions(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

std::filesystem::path temp_file(const std::string& name, const std::string& content) {
    const auto p = std::filesystem::temp_directory_path() /
                   ("interval_checker_" + std::to_string(::getpid()) + "_" + name);
    std::ofstream(p) << content;
    return p;
}

}  // namespace

TEST_CASE("disjoint mutex holds are fine") {
    const auto rep = check_holds({{"a", 'X', 0, 100}, {"b", 'X', 200, 300}, {"a", 'X', 400, 500}});
    CHECK(rep.ok);
    CHECK(rep.violations.empty());
    CHECK(rep.per_id.at("a") == 2);
    CHECK(rep.per_id.at("b") == 1);
    CHECK(rep.max_concurrency == 1);
}

TEST_CASE("overlapping mutex holds are flagged with both holders and the overlap") {
    const auto rep = check_holds({{"b", 'X', 1'500, 5'000}, {"a", 'X', 0, 3'000}});
    REQUIRE_FALSE(rep.ok);
    REQUIRE(rep.violations.size() == 1);
    const auto& v = rep.violations[0];
    CHECK(mentions(v, "a X [0, 3000]"));
    CHECK(mentions(v, "b X [1500, 5000]"));
    CHECK(mentions(v, "1.500 µs"));
    CHECK(rep.max_concurrency == 2);
}

TEST_CASE("readers may overlap readers") {
    const auto rep = check_holds({{"a", 'R', 0, 1000}, {"b", 'R', 100, 900}, {"c", 'R', 500, 1500}});
    CHECK(rep.ok);
    CHECK(rep.max_concurrency == 3);
}

TEST_CASE("a writer overlapping a reader is flagged") {
    const auto rep = check_holds({{"r", 'R', 0, 1000}, {"w", 'W', 999, 2000}});
    REQUIRE_FALSE(rep.ok);
    REQUIRE(rep.violations.size() == 1);
    CHECK(mentions(rep.violations[0], "r R"));
    CHECK(mentions(rep.violations[0], "w W"));
    CHECK(mentions(rep.violations[0], "0.001 µs"));
}

TEST_CASE("writer and mutex exclude everyone, including themselves") {
    CHECK_FALSE(check_holds({{"a", 'W', 0, 10}, {"b", 'W', 5, 15}}).ok);
    CHECK_FALSE(check_holds({{"a", 'X', 0, 10}, {"b", 'R', 5, 15}}).ok);
    CHECK_FALSE(check_holds({{"a", 'S', 0, 10}, {"b", 'R', 5, 15}}, 3).ok);
    CHECK_FALSE(check_holds({{"a", 'X', 0, 10}, {"a", 'X', 5, 15}}).ok);
}

TEST_CASE("semaphore with 3 leases: 3 at once ok, 4 flagged") {
    std::vector<hold> three{{"a", 'S', 0, 100}, {"b", 'S', 10, 110}, {"c", 'S', 20, 120}};
    const auto ok = check_holds(three, 3);
    CHECK(ok.ok);
    CHECK(ok.max_concurrency == 3);

    auto four = three;
    four.push_back({"d", 'S', 50, 60});
    const auto bad = check_holds(four, 3);
    REQUIRE_FALSE(bad.ok);
    REQUIRE(bad.violations.size() == 1);
    CHECK(mentions(bad.violations[0], "4 leases held at once (max 3)"));
    CHECK(mentions(bad.violations[0], "d S [50, 60]"));
    CHECK(mentions(bad.violations[0], "0.010 µs"));
    CHECK(bad.max_concurrency == 4);

    // Four holds, but never more than three at one instant.
    const auto staggered = check_holds({{"a", 'S', 0, 100}, {"b", 'S', 10, 110}, {"c", 'S', 20, 120}, {"d", 'S', 100, 200}}, 3);
    CHECK(staggered.ok);

    // Default max_leases is 1.
    CHECK_FALSE(check_holds({{"a", 'S', 0, 10}, {"b", 'S', 5, 15}}).ok);
}

TEST_CASE("touching endpoints do not overlap") {
    CHECK(check_holds({{"a", 'X', 0, 100}, {"b", 'X', 100, 200}, {"c", 'W', 200, 300}}).ok);
    CHECK(check_holds({{"a", 'X', 0, 100}, {"b", 'X', 50, 50}}).ok);  // zero-length hold
    CHECK(check_holds({{"a", 'S', 0, 100}, {"b", 'S', 0, 100}, {"c", 'S', 100, 200}}, 2).ok);
}

TEST_CASE("read_holds parses files and reports malformed lines as file:line") {
    const auto good = temp_file("good.log", "a X 1 2\n\n# comment\nb R 3 4\r\n  c  W  5 6 \n");
    const auto holds = read_holds({good.string()});
    REQUIRE(holds.size() == 3);
    CHECK(holds[0].id == "a");
    CHECK(holds[1].mode == 'R');
    CHECK(holds[1].exit_ns == 4);
    CHECK(holds[2].enter_ns == 5);

    const std::vector<std::pair<std::string, std::string>> bad_lines{
        {"fields", "a X 1\n"},
        {"mode", "a Q 1 2\n"},
        {"number", "a X 1 2x\n"},
        {"order", "a X 5 4\n"},
        {"extra", "a X 1 2 3\n"},
    };
    for (const auto& entry : bad_lines) {
        const std::string& tag = entry.first;
        const std::string& line = entry.second;
        CAPTURE(tag);
        const auto bad = temp_file("bad_" + tag + ".log", "ok X 1 2\nok X 3 4\n" + line);
        try {
            read_holds({good.string(), bad.string()});
            FAIL("no exception");
        } catch (const std::runtime_error& e) {
            CHECK(mentions(e.what(), bad.string() + ":3:"));
        }
        std::filesystem::remove(bad);
    }
    std::filesystem::remove(good);

    CHECK_THROWS_AS(read_holds({"/nonexistent/interval_checker.log"}), std::runtime_error);
}
