// The default node data of zkcoro's locks: formatted, parsed back, foreign data refused.
#include <zkcoro/holder_data.hpp>

#include <doctest/doctest.h>

#include <unistd.h>

using namespace zkcoro;

TEST_CASE("holder data: format and parse round trip, escapes, this process")
{
    holder_info h{"db-1.example", 4242, "nightly", ""};
    CHECK(format_holder_data(h) == "host=db-1.example pid=4242 program=nightly");
    CHECK(parse_holder_data(format_holder_data(h)) == h);
    holder_info odd{"h", 1, "my prog=1%", "job \"x\"\n"};
    CHECK(format_holder_data(odd) == "host=h pid=1 program=my%20prog%3D1%25 label=job%20%22x%22%0A");
    CHECK(parse_holder_data(format_holder_data(odd)) == odd);
    auto me = this_process("a label");
    CHECK(me.pid == ::getpid());
    CHECK(me.program == "unit_tests");  // this program (tests/meson.build)
    CHECK(!me.host.empty());
    CHECK(parse_holder_data(format_holder_data(me)) == me);
    // Unknown fields are skipped (fields may be added).
    auto later = parse_holder_data("host=h pid=7 program=p thread=3 label=l");
    REQUIRE(later);
    CHECK(later->label == "l");
}

TEST_CASE("holder data: what is not in the format is told apart")
{
    CHECK(!parse_holder_data("10.0.0.7"));              // Curator's default: the IP address
    CHECK(!parse_holder_data("db-1:4242"));             // zkcoro's former default
    CHECK(!parse_holder_data(""));
    CHECK(!parse_holder_data("host=h"));                // no pid
    CHECK(!parse_holder_data("host=h pid=x"));
    CHECK(!parse_holder_data("host=h pid=-3"));
    CHECK(!parse_holder_data("host=h pid=3 program=%4"));   // a cut escape
    CHECK(!parse_holder_data("host=h pid=3 program=%zz"));
    CHECK(!parse_holder_data("host=h  pid=3"));         // an empty field
}
