// The pure part of the tree scan: recipes from names, queues ordered and decided by the lock's
// own rule, the wait-for graph and its cycles.
#include "recipes/scan_rules.hpp"

#include <zkcoro/holder_data.hpp>
#include <zkcoro/scan.hpp>

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace zkcoro;
using namespace zkcoro::detail;

namespace {

participant node(std::string name, std::int64_t session, std::string data = "")
{
    participant p;
    p.path = "/x/" + name;
    p.name = std::move(name);
    p.session_id = session;
    p.data = std::move(data);
    return p;
}

std::vector<std::string> names_of(const std::vector<participant>& v)
{
    std::vector<std::string> out;
    for (const auto& p : v)
        out.push_back(p.name);
    return out;
}

lock_info lock(std::string path, lock_kind k, std::vector<participant> holders, std::vector<participant> waiters)
{
    return lock_info{std::move(path), k, std::move(holders), std::move(waiters)};
}

}  // namespace

TEST_CASE("recipes are recognised from the children's names")
{
    CHECK(kind_of({"_c_1-lock-0000000001", "_c_2-lock-0000000002"}) == dir_kind::mutex);
    CHECK(kind_of({"_c_1-__READ__0000000001", "_c_2-lock-0000000002"}) == dir_kind::read_write);
    CHECK(kind_of({"_c_1-latch-0000000001"}) == dir_kind::leader_latch);
    CHECK(kind_of({"_c_1-lease-0000000001"}) == dir_kind::leases);
    CHECK(kind_of({"leases", "locks"}) == dir_kind::none);
    CHECK(kind_of({}) == dir_kind::none);
    CHECK(is_lock_node_name("_c_1-lock-0000000001"));
    CHECK(is_lock_node_name("x-__WRIT__0000000001"));
    CHECK(!is_lock_node_name("locks"));
    CHECK(!is_lock_node_name("leases"));
    // Issue 32 item 9: a name that merely contains a marker is a plain node (status -r / took
    // the root for a mutex because of a child named "zklock-test-1").
    CHECK(!is_lock_node_name("zklock-test-1"));
    CHECK(!is_lock_node_name("my-lock-files"));
    CHECK(!is_lock_node_name("lock-"));
    CHECK(kind_of({"zklock-test-1", "zookeeper"}) == dir_kind::none);
    CHECK(queue_members(dir_kind::mutex, {"_c_a-lock-0000000001", "zz-lock-x"}) ==
          std::vector<std::string>{"_c_a-lock-0000000001"});
}

TEST_CASE("a mutex queue: Curator's order by sequence, the first holds, a foreign node blocks")
{
    std::vector<participant> h, w;
    order_queue(dir_kind::mutex,
                {node("_c_b-lock-0000000003", 3), node("_c_a-lock-0000000001", 1), node("_c_c-lock-0000000002", 2)}, h, w);
    CHECK(names_of(h) == std::vector<std::string>{"_c_a-lock-0000000001"});
    CHECK(h[0].holds);
    CHECK(names_of(w) == std::vector<std::string>{"_c_c-lock-0000000002", "_c_b-lock-0000000003"});

    // "0" sorts before every sequence (Curator compares whole names when the marker is absent).
    h.clear();
    w.clear();
    order_queue(dir_kind::mutex, {node("_c_a-lock-0000000001", 1), node("0", 0)}, h, w);
    CHECK(h.empty());
    REQUIRE(w.size() == 2);
    CHECK(w[0].mode == lock_mode::foreign);
}

TEST_CASE("a read-write queue: readers before the first writer hold")
{
    std::vector<participant> h, w;
    order_queue(dir_kind::read_write,
                {node("_c_r-__READ__0000000001", 1), node("_c_s-__READ__0000000002", 2),
                 node("_c_w-__WRIT__0000000003", 3), node("_c_t-__READ__0000000004", 4)},
                h, w);
    CHECK(names_of(h) == std::vector<std::string>{"_c_r-__READ__0000000001", "_c_s-__READ__0000000002"});
    CHECK(names_of(w) == std::vector<std::string>{"_c_w-__WRIT__0000000003", "_c_t-__READ__0000000004"});
    CHECK(w[0].mode == lock_mode::write);
    CHECK(w[1].mode == lock_mode::read);
}

TEST_CASE("leases all count as held; latches: the first leads")
{
    std::vector<participant> h, w;
    order_queue(dir_kind::leases, {node("_c_b-lease-0000000002", 2), node("_c_a-lease-0000000001", 1)}, h, w);
    CHECK(names_of(h) == std::vector<std::string>{"_c_a-lease-0000000001", "_c_b-lease-0000000002"});
    CHECK(w.empty());
    h.clear();
    order_queue(dir_kind::leader_latch, {node("_c_b-latch-0000000002", 2), node("_c_a-latch-0000000001", 1)}, h, w);
    CHECK(names_of(h) == std::vector<std::string>{"_c_a-latch-0000000001"});
    CHECK(names_of(w) == std::vector<std::string>{"_c_b-latch-0000000002"});
}

TEST_CASE("wait-for graph: waiter session -> holder session; no self, foreign, persistent or latch edge")
{
    auto foreign = node("0", 9);
    foreign.mode = lock_mode::foreign;
    std::vector<lock_info> locks{
        lock("/a", lock_kind::mutex, {node("ha", 1, "one")}, {node("wa", 2, "two"), node("wa2", 1), foreign}),
        lock("/p", lock_kind::mutex, {node("hp", 0)}, {node("wp", 2)}),
        lock("/l", lock_kind::leader_latch, {node("hl", 1)}, {node("wl", 2)}),
    };
    auto edges = wait_for_graph(locks);
    REQUIRE(edges.size() == 1);
    CHECK(edges[0].waiter_session == 2);
    CHECK(edges[0].holder_session == 1);
    CHECK(edges[0].lock == "/a");
    CHECK(edges[0].waiter_data == "two");
    CHECK(edges[0].holder_data == "one");
    CHECK(find_cycles(edges).empty());
}

TEST_CASE("cycles: two sessions on two locks, three on three, and none in one order")
{
    std::vector<lock_info> two{
        lock("/b", lock_kind::mutex, {node("hb", 2)}, {node("wb", 1)}),
        lock("/a", lock_kind::mutex, {node("ha", 1)}, {node("wa", 2)}),
        lock("/c", lock_kind::mutex, {node("hc", 7)}, {node("wc", 8)}),  // not in the cycle
    };
    auto cycles = find_cycles(wait_for_graph(two));
    REQUIRE(cycles.size() == 1);
    CHECK(cycles[0].sessions == std::vector<std::int64_t>{1, 2});
    REQUIRE(cycles[0].edges.size() == 2);
    CHECK(cycles[0].edges[0].lock == "/a");
    CHECK(cycles[0].edges[1].lock == "/b");

    std::vector<lock_info> three{
        lock("/a", lock_kind::mutex, {node("h", 1)}, {node("w", 2)}),
        lock("/b", lock_kind::read_write, {node("h", 2)}, {node("w", 3)}),
        lock("/c", lock_kind::semaphore, {node("h", 3)}, {node("w", 1)}),
    };
    cycles = find_cycles(wait_for_graph(three));
    REQUIRE(cycles.size() == 1);
    CHECK(cycles[0].sessions == std::vector<std::int64_t>{1, 2, 3});
    CHECK(cycles[0].edges.size() == 3);

    std::vector<lock_info> ordered{
        lock("/a", lock_kind::mutex, {node("h", 1)}, {node("w", 2)}),
        lock("/b", lock_kind::mutex, {node("h", 1)}, {node("w", 2)}),
    };
    CHECK(find_cycles(wait_for_graph(ordered)).empty());
    CHECK(find_cycles({}).empty());
    CHECK(to_string(lock_kind::read_write) == "read-write");
}

// Issue 32 item 9: a plain child that sorts after every lock node (a subdirectory "t1" holding
// another lock, a node made by hand) is no participant; one that sorts before a lock node takes
// its place (it blocks); a semaphore's leases directory keeps every child.
TEST_CASE("queue members: lock nodes, and foreign children only where they sort before one")
{
    CHECK(queue_members(dir_kind::mutex, {"t1", "_c_a-lock-0000000001"}) == std::vector<std::string>{"_c_a-lock-0000000001"});
    CHECK(queue_members(dir_kind::mutex, {"_c_a-lock-0000000002", "0", "zz"}) ==
          std::vector<std::string>{"0", "_c_a-lock-0000000002"});
    std::vector<std::string> many{"_c_a-lock-0000000001"};
    for (int i = 0; i < 20000; ++i)
        many.push_back("child" + std::to_string(i));
    CHECK(queue_members(dir_kind::mutex, many).size() == 1);
    CHECK(queue_members(dir_kind::read_write, {"x", "_c_a-__WRIT__0000000001", "_c_b-__READ__0000000002"}).size() == 2);
    CHECK(queue_members(dir_kind::leases, {"x", "_c_a-lease-0000000001"}).size() == 2);
    CHECK(queue_members(dir_kind::none, {"x"}).empty());
}

// Issue 32 item 12: an inner zklock's node names its parent session; the parent waits too.
TEST_CASE("a waiter's parent session waits for the holder too: nested locks in two orders are a cycle")
{
    holder_info inner1 = this_process("inner");
    inner1.parent_session = 0x10;
    auto text = format_holder_data(inner1);
    CHECK(text.find(" parent=0x10") != std::string::npos);
    auto back = parse_holder_data(text);
    REQUIRE(back);
    CHECK(back->parent_session == 0x10);
    CHECK(parse_holder_data("host=h pid=1 parent=zz")->parent_session == 0);  // skipped, not fatal
    holder_info inner2 = this_process("inner");
    inner2.parent_session = 0x20;
    // 0x10 holds /A, its child 0x11 waits on /B; 0x20 holds /B, its child 0x21 waits on /A.
    auto locks = std::vector<lock_info>{
        lock("/A", lock_kind::mutex, {node("_c_1-lock-0000000001", 0x10)},
             {node("_c_2-lock-0000000002", 0x21, format_holder_data(inner2))}),
        lock("/B", lock_kind::mutex, {node("_c_3-lock-0000000001", 0x20)},
             {node("_c_4-lock-0000000002", 0x11, format_holder_data(inner1))})};
    auto cycles = find_cycles(wait_for_graph(locks));
    REQUIRE(cycles.size() == 1);
    CHECK(cycles[0].sessions == std::vector<std::int64_t>{0x10, 0x20});
}
