// In-process deadlock detection, the pure part: tasks, holds and waits; cycles found exactly.
#include "engine/wait_graph.hpp"

#include <doctest/doctest.h>

using namespace zkcoro;
using namespace zkcoro::detail;

namespace {
int la, lb, lc;  // three lock objects' addresses
const void* A = &la;
const void* B = &lb;
const void* C = &lc;
}  // namespace

TEST_CASE("two tasks on two locks in opposite orders: the second wait would deadlock")
{
    task_wait_graph g;
    g.held(1, A);
    g.held(2, B);
    CHECK(g.cycle_if_waiting(1, B).empty());  // 2 holds B but waits for nothing
    g.waiting(1, B);
    CHECK(g.cycle_if_waiting(2, A) == std::vector<owner_id>{2, 1});
    // The negative control: one order. 2 waits for A while holding nothing.
    task_wait_graph h;
    h.held(1, A);
    h.held(1, B);
    CHECK(h.cycle_if_waiting(2, A).empty());
}

TEST_CASE("three tasks in a ring; released holds and ended waits break it; reentrancy is no cycle")
{
    task_wait_graph g;
    g.held(1, A);
    g.held(2, B);
    g.held(3, C);
    g.waiting(1, B);
    g.waiting(2, C);
    CHECK(g.cycle_if_waiting(3, A) == std::vector<owner_id>{3, 1, 2});
    g.stopped_waiting(2);
    CHECK(g.cycle_if_waiting(3, A).empty());
    g.waiting(2, C);
    g.held(3, C);  // reentrant: two holds
    g.released(3, C);
    CHECK(!g.cycle_if_waiting(3, A).empty());
    g.released(3, C);
    CHECK(g.cycle_if_waiting(3, A).empty());
    // A task asking again for a lock it holds is reentrancy, granted by the lock, not a cycle.
    CHECK(g.cycle_if_waiting(1, A).empty());
}

TEST_CASE("shared holders: any holder on the way to a cycle counts")
{
    task_wait_graph g;
    g.held(1, A);
    g.held(2, A);  // two readers of A
    g.held(3, B);
    g.waiting(2, B);
    CHECK(g.cycle_if_waiting(3, A) == std::vector<owner_id>{3, 2});
    CHECK(g.cycle_if_waiting(4, A).empty());
}

TEST_CASE("wait_unless_cycle records a wait only when it closes no cycle")
{
    task_wait_graph g;
    g.held(1, A);
    g.held(2, B);
    CHECK(g.wait_unless_cycle(1, B).empty());  // recorded: 1 waits for B
    CHECK(g.wait_unless_cycle(2, A) == std::vector<owner_id>{2, 1});
    // 2's wait was refused, not recorded: 1 asking again for A's holder's lock finds no cycle.
    g.stopped_waiting(1);
    CHECK(g.cycle_if_waiting(1, B).empty());
    CHECK(g.cycle_if_waiting(3, A).empty());
}
