// The lock object's decisions as a state machine with no I/O (issue 21): fed with what happens to
// a lock object (an acquisition asked for, the backend's grant or failure, a release, a deadline,
// a cancellation, a loss, someone queueing behind our node, the linger window's end), it says what
// the caller must do (grant at once, wait in memory, queue on the backend, hand over in memory,
// promote a waiter, give the node back, complete waiters, arm a timer). The clock is a parameter.
//
// It owns reentrancy (per-owner hold counts), the "active" role (the one task of ours on the
// backend's queue, or holding its node), the FIFO of local waiters behind it (by id; entries that
// gave up are removed lazily), their deadlines (one timer: the earliest), the batch bound of
// in-process handoffs, and lingering. Its timers are armed only while needed: the deadline
// timer while a waiter waits (cancelled when the last one leaves, re-armed only to a deadline
// still pending), the linger timer while a node of ours lingers or is held again from lingering
// (cancelled when the node goes). Unit-tested without a server (tests/unit/test_lock_machine.cpp)
// and fuzzed (tests/fuzz/fuzz_lock_machine.cpp).
#ifndef ZKCORO_SRC_ENGINE_LOCK_MACHINE_HPP
#define ZKCORO_SRC_ENGINE_LOCK_MACHINE_HPP

#include "async/recycling_map.hpp"

#include <zkcoro/detail/api.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace zkcoro::detail {

using waiter_id = std::uint64_t;  // the caller's name for a local waiter; never 0
using machine_owner = std::uintptr_t;  // owner_id (this_task.hpp)

struct lock_machine_config {
    bool reentrant = true;       // per-owner hold counts (mutexes), or one hold per acquisition
    bool local_handoff = true;   // tasks of ours wait in memory behind the active one
    int max_handoffs = 63;       // in-process handoffs of one node (fencing: czxid * 64 + n)
    std::chrono::nanoseconds handoff_batch_time{0};  // batch ends by time once others queue (0: never)
    std::chrono::nanoseconds linger{0};              // keep the node after the last release (0: never)
};

// What the caller must do after an event. `what` is the main decision; the timers and the waiters
// completed with a timeout come with it.
struct lock_action {
    enum class kind : std::uint8_t {
        none,             // nothing (a release that was not the last, an unknown waiter, ...)
        reenter,          // granted at once: the owner already holds (its count grew)
        grant_lingering,  // granted at once with the lingering node, no request
        wait,             // waits in memory behind the active task
        start_active,     // queue on the backend (this acquisition takes the active role)
        grant,            // hand the node over in memory to `waiter`
        promote,          // `waiter` takes the active role: start it on the backend
        give_back,        // nobody of ours takes the node: give it back to the backend
        linger,           // nobody of ours takes the node: keep it (lingering) until `arm_linger`
        cancelled,        // `waiter` gave up: complete it with operation_aborted
    };
    using time_point = std::chrono::steady_clock::time_point;

    kind what = kind::none;
    waiter_id waiter = 0;       // grant, promote, cancelled
    machine_owner owner = 0;    // grant, promote: the waiter's owner
    bool give_back = false;             // with promote after a release: the node goes back too
    bool batch_time_ended = false;      // promote after a release: the batch ended by time
    bool end_linger = false;            // give the lingering node back now (someone queued, or its window ended)
    bool watch_queue = false;           // granted with waiters behind: learn whether others queue
    std::optional<time_point> arm_deadline;  // (re)arm the deadline timer at this moment
    std::optional<time_point> arm_linger;    // arm the linger timer at this moment
    // Cancel the timer: no waiter needs it any more (the last one left), or no node lingers nor
    // can linger again before a new grant. A timer is never left pending for nobody (issue 40).
    bool disarm_deadline = false;
    bool disarm_linger = false;
    std::vector<waiter_id> timed_out;        // complete these waiters with a timeout (no guard)
};

class ZKCORO_API lock_machine {
public:
    using time_point = std::chrono::steady_clock::time_point;
    static constexpr time_point never = time_point::max();

    explicit lock_machine(lock_machine_config cfg = {}) : cfg_(cfg) {}

    // `owner` asks for the lock by `deadline`; `id` names it if it waits in memory.
    // `linger_usable`: the lingering node may be granted (our session is the node's and connected).
    lock_action acquire(machine_owner owner, waiter_id id, time_point deadline, time_point now,
                        bool linger_usable = true);
    // The backend granted the active task (owner) a new node. `others_queued`: its listing showed
    // another participant behind it.
    lock_action granted(machine_owner owner, time_point now, bool others_queued);
    // The active task failed, timed out or gave up on the backend: the role goes on.
    lock_action failed();
    // `owner` released one hold. The last one hands the node on, lingers, or gives it back.
    lock_action released(machine_owner owner, time_point now);
    // The deadline timer fired.
    lock_action deadline_fired(time_point now);
    // Waiter `id` was cancelled.
    lock_action cancelled(waiter_id id);
    // The node is lost; `holder` held it (0: nobody, it lingered). The holder no longer holds and
    // the next waiter queues anew. A lost hold is not released afterwards (released() is only for
    // holds not lost).
    lock_action lost(machine_owner holder);
    // Someone queued behind our node (or may have).
    lock_action others_queued();
    // The linger timer fired.
    lock_action linger_fired(time_point now);
    // The lingering node goes now (its mutex is destroyed).
    lock_action end_linger();

    // Observers.
    std::size_t hold_count(machine_owner owner) const noexcept;
    bool active() const noexcept { return active_; }
    bool lingering() const noexcept { return lingering_; }
    bool has_node() const noexcept { return node_; }
    bool node_others_queued() const noexcept { return others_queued_; }
    int handoffs() const noexcept { return handoffs_; }
    std::size_t waiting() const noexcept { return waiting_; }
    bool is_waiting(waiter_id id) const noexcept { return find_waiting(id) != nullptr; }
    // When the deadline timer is armed to fire (never: not armed), and whether the linger timer is.
    time_point deadline_timer_at() const noexcept { return timer_at_; }
    bool linger_timer_armed() const noexcept { return linger_armed_; }
    time_point linger_until() const noexcept { return linger_until_; }
    std::size_t queue_entries() const noexcept { return queue_.size(); }
    std::size_t deadline_entries() const noexcept { return deadlines_.size(); }
    const lock_machine_config& config() const noexcept { return cfg_; }

private:
    // A waiter in the local FIFO: 16 bytes, no node of its own (a waiting task's memory is the
    // bench's scale figure). Owner 0 (never a task's: the object refuses it) marks one that gave
    // up, removed lazily.
    struct queued {
        waiter_id id;
        machine_owner owner;
    };
    struct deadline_entry {
        time_point at;
        waiter_id id;
        bool operator<(const deadline_entry& o) const noexcept { return at > o.at; }  // min-heap
    };

    void erase_hold(machine_owner owner);
    bool pop_waiting(waiter_id& id, machine_owner& owner);
    const queued* find_waiting(waiter_id id) const noexcept;
    void promote_next(lock_action& a);
    void abandon(waiter_id id);
    void add_deadline(waiter_id id, time_point at, lock_action& a);
    void rearm(lock_action& a);
    void left(lock_action& a);
    void node_gone(lock_action& a);
    bool batch_time_over(time_point now) const noexcept;

    lock_machine_config cfg_;
    recycling_map<machine_owner, std::size_t> holds_;
    bool active_ = false;
    std::deque<queued> queue_;   // in the order of the ids, which the caller gives increasing
    std::size_t abandoned_ = 0;  // entries of queue_ no longer waiting (removed lazily)
    std::size_t waiting_ = 0;    // entries of queue_ still waiting
    std::vector<deadline_entry> deadlines_;
    time_point timer_at_ = never;
    // The node of the handoff (local_handoff): granted by the backend, handed on in memory.
    bool node_ = false;  // false again once it goes (given back, handed on with a promotion, lost)
    int handoffs_ = 0;
    time_point granted_at_{};
    bool others_queued_ = false;
    bool lingering_ = false;
    time_point linger_until_{};
    bool linger_armed_ = false;
};

}  // namespace zkcoro::detail

#endif
