// The rules that decide who holds, without a server: Curator's sort orders, the mutex, read,
// write and lease rules, foreign children, and what a listing reports as holders.
#include "zookeeper/diagnostics.hpp"
#include "zookeeper/lock_queue.hpp"
#include "engine/rules.hpp"

#include <zkcoro/error.hpp>
#include <zkcoro/queue_order.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <algorithm>
#include <random>

#include <set>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

using namespace zkcoro;
using namespace zkcoro::detail;
using names = std::vector<std::string>;

namespace {

// The node names of Curator's recipes, with a made-up UUID part.
std::string lock_node(int seq, char id = 'a') { return std::string("_c_") + id + "-lock-" + std::to_string(1000000000 + seq).substr(0, 10); }
std::string read_node(int seq) { return "_c_r-__READ__" + std::to_string(1000000000 + seq); }
std::string write_node(int seq) { return "_c_w-__WRIT__" + std::to_string(1000000000 + seq); }
std::string lease_node(int seq) { return "_c_l-lease-" + std::to_string(1000000000 + seq); }

const std::vector<std::string> rw_markers{std::string(read_marker), std::string(write_marker)};
const std::vector<std::string> lock_markers{std::string(lock_marker)};

}  // namespace

// Curator's sort rule: text after the last "lock-"; names without it sort by the whole name.
TEST_CASE("sequence sort")
{
    names n{"_c_bbb-lock-0000000003", "_c_aaa-lock-0000000001", "foreign", "_c_ccc-lock-0000000002",
            "x-lock-lock-0000000000"};
    sort_by_sequence(n, "lock-");
    CHECK(n == names{"x-lock-lock-0000000000", "_c_aaa-lock-0000000001", "_c_ccc-lock-0000000002",
                     "_c_bbb-lock-0000000003", "foreign"});
    CHECK(sequence_key("_c_a-lock-0000000042", "lock-") == "0000000042");
    CHECK(sequence_key("plain", "lock-") == "plain");
}

// The sorts find each name's key once; the order is the comparator's of Curator's rule, stable,
// over listings with repeated keys, foreign names and names with the marker twice.
TEST_CASE("sequence and read-write sorts agree with the rule's comparator on large listings")
{
    std::mt19937 rng(36);
    for (int round = 0; round < 20; ++round) {
        names n, rw;
        for (int i = 0; i < 1500; ++i) {
            const auto seq = fmt::format("{:010}", rng() % 700);  // repeated keys
            switch (rng() % 4) {
            case 0: n.push_back(fmt::format("_c_{}-lock-{}", i, seq)); break;
            case 1: n.push_back(fmt::format("x-lock-{}-lock-{}", i, seq)); break;
            case 2: n.push_back(fmt::format("foreign-{}", rng() % 50)); break;
            default: n.push_back(fmt::format("_c_{}-lock-{}", rng() % 3, seq)); break;
            }
            rw.push_back(fmt::format("_c_{}-{}{}", i, rng() % 2 ? "__READ__" : "__WRIT__", seq));
        }
        auto expected = n;
        std::stable_sort(expected.begin(), expected.end(), [](const std::string& a, const std::string& b) {
            return sequence_key(a, "lock-") < sequence_key(b, "lock-");
        });
        sort_by_sequence(n, "lock-");
        REQUIRE(n == expected);
        auto key = [](const std::string& s) { return std::string_view(s).substr(s.size() - 10); };
        auto rw_expected = rw;
        std::stable_sort(rw_expected.begin(), rw_expected.end(), [&](const std::string& a, const std::string& b) {
            if (key(a) != key(b))
                return key(a) < key(b);
            return is_write_node(a) && !is_write_node(b);
        });
        sort_read_write(rw);
        REQUIRE(rw == rw_expected);
    }
}

TEST_CASE("read-write sort: one sequence space, a write node before a read node of the same sequence")
{
    // A downgrade's read node carries the write node's sequence.
    const std::string downgrade = "_c_x-__READ__" + std::to_string(1000000002);
    names n{read_node(3), downgrade, write_node(2), read_node(1)};
    sort_read_write(n);
    CHECK(n == names{read_node(1), write_node(2), downgrade, read_node(3)});
    // A foreign name sorts by its whole text.
    names f{read_node(1), "0"};
    sort_read_write(f);
    CHECK(f == names{"0", read_node(1)});
}

// Queue order: sequence after the marker; a write node before a read node of the same sequence.
TEST_CASE("read-write sort order (Curator's names)")
{
    names n{"_c_a-__READ__0000000003", "_c_b-__WRIT__0000000001",
                                   "_c_c-__READ__0000000001", "_c_d-__READ__0000000000"};
    sort_read_write(n);
    CHECK(n == names{"_c_d-__READ__0000000000", "_c_b-__WRIT__0000000001",
                                            "_c_c-__READ__0000000001", "_c_a-__READ__0000000003"});
}

TEST_CASE("mutex rule: the first holds, each waiter watches the one just before it")
{
    names q{lock_node(1), lock_node(2), lock_node(3)};
    CHECK(mutex_rule(q, 0) == queue_decision{true, 0, false, false});
    // Behind the holder: its deletion grants with no re-read.
    CHECK(mutex_rule(q, 1) == queue_decision{false, 0, true, false});
    // Further back: watch the predecessor only (no herd), and re-read when it goes.
    CHECK(mutex_rule(q, 2) == queue_decision{false, 1, false, false});
}

TEST_CASE("read rule: no writer ahead means hold; else watch the first writer ahead")
{
    names q{read_node(1), read_node(2), write_node(3), read_node(4), write_node(5), read_node(6)};
    CHECK(read_rule(q, 0).holds);
    CHECK(read_rule(q, 1).holds);
    auto d = read_rule(q, 3);
    CHECK_FALSE(d.holds);
    CHECK(d.watch_index == 2);
    CHECK(d.deletion_grants);  // the only writer ahead: its deletion grants
    auto d2 = read_rule(q, 5);
    CHECK_FALSE(d2.holds);
    CHECK(d2.watch_index == 2);
    CHECK_FALSE(d2.deletion_grants);  // two writers ahead
}

TEST_CASE("write rule: first holds; a predecessor's deletion never grants by itself")
{
    names q{read_node(1), write_node(2)};
    CHECK(write_rule(q, 0).holds);
    auto d = write_rule(q, 1);
    CHECK_FALSE(d.holds);
    CHECK(d.watch_index == 0);
    // A downgrade may insert a read node at an older sequence: always re-read.
    CHECK_FALSE(d.deletion_grants);
}

TEST_CASE("read_write_rule dispatches on each node's own side")
{
    names q{read_node(1), write_node(2), read_node(3)};
    CHECK(read_write_rule(q, 0).holds);
    CHECK_FALSE(read_write_rule(q, 1).holds);  // a writer behind a reader
    CHECK_FALSE(read_write_rule(q, 2).holds);  // a reader behind a writer
}

TEST_CASE("lease rule: hold while the leases are within max, else wait on the children")
{
    names q{lease_node(1), lease_node(2), lease_node(3)};
    CHECK(lease_rule(q, 2, 3).holds);
    auto d = lease_rule(q, 2, 2);
    CHECK_FALSE(d.holds);
    CHECK(d.watch_children);
    CHECK_FALSE(lease_rule(q, 0, 0).holds);
    CHECK_FALSE(lease_rule(q, 0, -5).holds);  // a negative count is no room
    // In a listing, the first max_leases hold.
    CHECK(lease_holds(q, 0, 2));
    CHECK(lease_holds(q, 1, 2));
    CHECK_FALSE(lease_holds(q, 2, 2));
    CHECK_FALSE(lease_holds(q, 7, 10));  // out of range
}

TEST_CASE("foreign children: take their place in the order, never hold")
{
    CHECK(is_foreign("0", lock_markers));
    CHECK(is_foreign("leader", lock_markers));
    CHECK_FALSE(is_foreign(lock_node(1), lock_markers));
    CHECK(is_foreign(lock_node(1), rw_markers));  // a mutex node under a read-write lock
    CHECK(mode_of(lock_node(1), lock_markers) == lock_mode::exclusive);
    CHECK(mode_of(read_node(1), rw_markers) == lock_mode::read);
    CHECK(mode_of(write_node(1), rw_markers) == lock_mode::write);
    CHECK(mode_of(lease_node(1), {std::string(lease_marker)}) == lock_mode::lease);
    CHECK(mode_of("0", rw_markers) == lock_mode::foreign);

    // A foreign node that sorts first blocks the mutex: nobody holds.
    names q{"0", lock_node(1)};
    sort_by_sequence(q, lock_marker);
    REQUIRE(q.front() == "0");
    CHECK_FALSE(holds_at(q, 0, mutex_rule, lock_markers));
    CHECK_FALSE(holds_at(q, 1, mutex_rule, lock_markers));
    CHECK(mutex_rule(q, 1).watch_index == 0);  // and our waiter watches it
    // Readers pass a foreign node (it is no writer); it still holds nothing.
    names r{"0", read_node(1)};
    sort_read_write(r);
    CHECK_FALSE(holds_at(r, 0, read_write_rule, rw_markers));
    CHECK(holds_at(r, 1, read_write_rule, rw_markers));
}

TEST_CASE("position_of: our node in a listing, or nothing when the session lost it")
{
    names q{lock_node(1), lock_node(2)};
    CHECK(position_of(q, lock_node(2)) == 1u);
    CHECK_FALSE(position_of(q, lock_node(3)).has_value());
    CHECK_FALSE(position_of({}, lock_node(3)).has_value());
}

TEST_CASE("diagnostics: every failure says what to do")
{
    CHECK(std::string(advice(zk_errc::no_auth)).find("client_config::auth") != std::string::npos);
    CHECK(std::string(advice(zk_errc::connection_loss)).find("ensemble") != std::string::npos);
    CHECK(std::string(advice(client_errc::invalid_path)).find("check_path") != std::string::npos);
    CHECK(std::string(advice(client_errc::upgrade_not_supported)).find("release the read lock") != std::string::npos);
    CHECK_FALSE(std::string(advice(zk_errc::bad_version)).empty());
}

// Protected names (_c_<uuid>-) tell one participant's node from another's: they never repeat
// within a process, nor between a process and a child it forks (whose generator would otherwise
// go on from the parent's state).
TEST_CASE("protected prefixes are unique, across a fork too")
{
    std::set<std::string> seen;
    for (int i = 0; i < 1000; ++i) {
        auto p = protected_prefix();
        CHECK(p.size() == 3 + 36 + 1);
        CHECK(p.starts_with("_c_"));
        CHECK(p.ends_with("-"));
        CHECK(seen.insert(p).second);
    }
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        auto p = protected_prefix();
        auto n = ::write(fds[1], p.data(), p.size());
        ::_exit(n == static_cast<ssize_t>(p.size()) ? 0 : 1);
    }
    ::close(fds[1]);
    auto ours = protected_prefix();
    std::string theirs(64, '\0');
    auto n = ::read(fds[0], theirs.data(), theirs.size());
    ::close(fds[0]);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status));
    REQUIRE(n > 0);
    theirs.resize(static_cast<std::size_t>(n));
    CHECK(theirs.size() == ours.size());
    CHECK(theirs != ours);
    CHECK(seen.count(theirs) == 0);
}
