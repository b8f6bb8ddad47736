// Exact in-process deadlock detection, the pure part (internal): which task of this process
// holds which lock object and which task waits for which. A task that would wait for a lock whose
// holder task waits, directly or through others, for a lock that the first task holds, would wait
// forever: an acquisition can fail with a would-deadlock error instead of hanging.
// The engine records into process_wait_graph() for the locks of clients with
// client_config::detect_deadlocks (engine/lock_object.cpp); tests/unit/test_wait_graph.cpp checks
// the graph itself.
#ifndef ZKCORO_SRC_ENGINE_WAIT_GRAPH_HPP
#define ZKCORO_SRC_ENGINE_WAIT_GRAPH_HPP

#include <zkcoro/this_task.hpp>

#include <map>
#include <mutex>
#include <set>
#include <vector>

namespace zkcoro::detail {

class task_wait_graph {
public:
    using lock_id = const void*;  // a lock object's address

    // `owner` holds `lock` (once more: reentrant holds are counted).
    void held(owner_id owner, lock_id lock);
    // `owner` let go of one hold of `lock`.
    void released(owner_id owner, lock_id lock);
    // `owner` waits for `lock` (a task waits for one lock at a time), or no longer does.
    void waiting(owner_id owner, lock_id lock);
    void stopped_waiting(owner_id owner);

    // Whether `owner` waiting for `lock` would close a cycle: a holder of `lock` is `owner`
    // itself (not counting a reentrant hold, which the caller grants at once), or waits for a lock
    // whose holder ... holds, in the end, something `owner` holds. The tasks on the cycle,
    // `owner` first, or empty when none.
    std::vector<owner_id> cycle_if_waiting(owner_id owner, lock_id lock) const;

    // cycle_if_waiting and waiting in one step (two tasks on two threads cannot both pass the
    // check and close a cycle together): records the wait only when it closes no cycle, and
    // returns the cycle otherwise.
    std::vector<owner_id> wait_unless_cycle(owner_id owner, lock_id lock);

private:
    std::vector<owner_id> cycle_locked(owner_id owner, lock_id lock) const;

    mutable std::mutex m_;
    std::map<lock_id, std::map<owner_id, int>> holders_;
    std::map<owner_id, lock_id> waits_;
};

// The one graph of this process: a task may hold a lock through one client and wait through
// another, so the graph spans every client that detects deadlocks.
task_wait_graph& process_wait_graph();

}  // namespace zkcoro::detail

#endif
