// What goes through the lock object's one loop (engine/lock_loop.cpp), internal to the engine: an
// event, what the loop then does with the lock let go, and a task waiting in memory.
#ifndef ZKCORO_SRC_ENGINE_LOCK_LOOP_HPP
#define ZKCORO_SRC_ENGINE_LOCK_LOOP_HPP

#include "engine/lock_object.hpp"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zkcoro::detail {

// One thing that happened to the lock object, with what the loop reports back to its caller.
struct lock_object::event {
    enum class kind : std::uint8_t {
        acquire,        // owner asks by deadline (op, started; immediate: a downgrade's node name)
        granted,        // the backend holds ns for owner (others_queued, revocation)
        failed,         // the active task gave up on the backend
        released,       // a guard of `lease` released (release_op completes the release)
        deadline,       // the deadline timer fired
        cancelled,      // waiter id's caller cancelled
        lost,           // ns is lost
        others_queued,  // someone queued behind ns
        linger_fired,   // the linger timer fired
        end_linger,     // the lingering node goes now
    };
    explicit event(kind k) noexcept : what(k) {}

    kind what;
    owner_id owner = 0;
    waiter_id id = 0;
    steady_clock::time_point deadline{}, started{};
    std::shared_ptr<op_state<std::optional<guard>>> op;
    std::string immediate;
    std::shared_ptr<node_state> ns;
    bool others_queued = false;
    std::shared_ptr<revocation_state> revocation;
    object_lease* lease = nullptr;
    std::shared_ptr<op_state<>> release_op;

    // Reported back: acquire: refused (ec, with the cycle of a would_deadlock), granted at once
    // (lease_out), to start on the backend (start) or outside the queue (start_immediate);
    // granted: the new lease (lease_out); released: its last hold (last); lost: newly lost (last).
    error_code ec;
    std::vector<owner_id> cycle;
    std::shared_ptr<object_lease> lease_out;
    bool start = false;
    bool start_immediate = false;
    bool last = false;
};

// A task of ours waiting in memory: the handle of its caller's operation. The machine knows it by
// its id (and its owner, its deadline, its place in the FIFO).
struct lock_object::waiter {
    owner_id owner = 0;
    steady_clock::time_point deadline{}, started{};
    std::shared_ptr<op_state<std::optional<guard>>> op;
};

// What the loop does once the lock is let go.
struct lock_object::follow_up {
    std::vector<std::unique_ptr<waiter>> timed_out;  // complete with a timeout (no guard)
    std::unique_ptr<waiter> cancelled;               // complete with operation_aborted
    std::unique_ptr<waiter> granted;                 // handed the node in memory, with granted_lease
    std::shared_ptr<object_lease> granted_lease;
    std::unique_ptr<waiter> promoted;                // takes the active role: start it on the backend
    std::shared_ptr<object_lease> lost;              // its guard reports the loss
    std::shared_ptr<node_state> give_back;           // nobody of ours takes it: back to the backend
    std::shared_ptr<node_state> watch_queue;         // learn who queues behind it
};

}  // namespace zkcoro::detail

#endif
