// A reference model of detail::lock_machine (a mutex: reentrant, local handoff), written plainly
// from lock_machine.hpp's comments: a vector for the FIFO, no lazy removal, no heap. A script of
// steps drives the machine and the model together; after each step the machine's action must be
// the model's, and the invariants hold:
// - at most one owner holds (count > 0), and the machine's counts are the model's;
// - grants and promotions go to the first waiter still waiting (FIFO);
// - no waiter is completed twice (granted, promoted, timed out or cancelled);
// - at most max_handoffs handoffs per node, none once the batch time is over and others queue;
// - never lingering while others queue; a timer is armed no later than the earliest deadline;
// - no timer pending for nobody (issue 40): no deadline timer once no waiter waits, none re-armed
//   but to the earliest deadline still pending, no linger timer once the node is gone.
// Used by tests/fuzz/fuzz_lock_machine.cpp (bytes) and tests/unit/test_lock_machine.cpp (seeds).
#ifndef ZKCORO_TESTS_FUZZ_LOCK_MACHINE_MODEL_HPP
#define ZKCORO_TESTS_FUZZ_LOCK_MACHINE_MODEL_HPP

#include "engine/lock_machine.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <vector>

namespace lock_machine_model {

using namespace std::chrono_literals;
using zkcoro::detail::lock_action;
using zkcoro::detail::lock_machine;
using zkcoro::detail::lock_machine_config;
using kind = lock_action::kind;
using time_point = lock_machine::time_point;

// Reports a property that does not hold; the caller aborts (fuzz) or fails the test (unit).
using failure = const char*;

class driver {
public:
    explicit driver(lock_machine_config cfg) : m_(cfg), cfg_(cfg) {}

    // One step, chosen by `op` (low bits) and `arg` (the rest). Returns null or the failure.
    failure step(std::uint8_t op, std::uint8_t arg)
    {
        switch (op % 8) {
        case 0: return acquire(static_cast<std::uintptr_t>(1 + arg % 5), arg / 5);
        case 1: return backend(true, (arg & 1) != 0);
        case 2: return backend(false, false);
        case 3: return release();
        case 4: return time_passes(std::chrono::milliseconds(arg % 64));
        case 5: return cancel(arg);
        case 6: return lose();
        default: return queued();
        }
    }

    const lock_machine& machine() const noexcept { return m_; }
    std::size_t grants() const noexcept { return grants_; }
    std::size_t timeouts() const noexcept { return timeouts_; }

private:
    struct waiter {
        std::uint64_t id;
        std::uintptr_t owner;
        time_point deadline;
    };

    bool busy(std::uintptr_t owner) const
    {
        return pending_ == owner ||
               std::any_of(fifo_.begin(), fifo_.end(), [owner](const waiter& w) { return w.owner == owner; });
    }
    failure complete(std::uint64_t id)
    {
        if (!done_.insert(id).second)
            return "a waiter completed twice";
        return nullptr;
    }
    failure check(const lock_action& a)
    {
        if (a.disarm_deadline)
            armed_ = lock_machine::never;
        if (a.disarm_linger)
            linger_armed_ = lock_machine::never;
        if (a.arm_deadline)
            armed_ = *a.arm_deadline;
        if (a.arm_linger)
            linger_armed_ = *a.arm_linger;
        for (auto& [o, c] : counts_)
            if (m_.hold_count(o) != c)
                return "hold counts differ from the model's";
        std::size_t holders = 0;
        for (std::uintptr_t o = 1; o <= 5; ++o)
            holders += m_.hold_count(o) > 0;
        if (holders > 1)
            return "two owners hold at once";
        if (m_.active() != active_)
            return "the active role differs from the model's";
        if (m_.waiting() != fifo_.size())
            return "the number of waiters differs from the model's";
        if (m_.handoffs() > cfg_.max_handoffs)
            return "more handoffs than the batch bound";
        if (m_.lingering() && m_.node_others_queued())
            return "lingering while others queue";
        if (m_.lingering() != lingering_)
            return "lingering differs from the model's";
        for (const auto& w : fifo_)
            if (w.deadline < armed_)
                return "no timer armed for a waiter's deadline";
        if (lingering_ && linger_armed_ == lock_machine::never)
            return "lingering with no linger timer";
        if (fifo_.empty() && armed_ != lock_machine::never)
            return "a deadline timer left armed with no waiter";
        if (!node_.has && linger_armed_ != lock_machine::never)
            return "a linger timer left armed with no node";
        if (m_.deadline_timer_at() != armed_ || m_.linger_timer_armed() != (linger_armed_ != lock_machine::never))
            return "the machine's timers differ from those its actions armed";
        return nullptr;
    }

    failure acquire(std::uintptr_t owner, unsigned d)
    {
        if (busy(owner))
            return nullptr;  // a task asks once at a time
        time_point deadline = d % 4 == 0 ? lock_machine::never : now_ + std::chrono::milliseconds(d * 3);
        const std::uint64_t id = ++next_id_;
        auto a = m_.acquire(owner, id, deadline, now_, true);
        kind want;
        if (counts_[owner] > 0) {
            want = kind::reenter;
            ++counts_[owner];
        } else if (!active_ && lingering_ && !node_.others && node_.handoffs < cfg_.max_handoffs) {
            want = kind::grant_lingering;
            lingering_ = false;
            ++node_.handoffs;
            active_ = true;
            counts_[owner] = 1;
            holder_ = owner;
        } else if (active_) {
            want = kind::wait;
            fifo_.push_back({id, owner, deadline});
        } else {
            want = kind::start_active;
            active_ = true;
            pending_ = owner;
        }
        if (a.what != want)
            return "acquire: another decision than the model's";
        return check(a);
    }

    failure backend(bool grant, bool others)
    {
        if (pending_ == 0)
            return nullptr;
        auto owner = pending_;
        pending_ = 0;
        if (grant) {
            auto a = m_.granted(owner, now_, others);
            if (lingering_ != a.end_linger)
                return "granted: a lingering node not ended";
            lingering_ = false;
            node_ = node{true, 0, now_, others};
            counts_[owner] = 1;
            holder_ = owner;
            return check(a);
        }
        auto a = m_.failed();
        if (auto f = promote(a))
            return f;
        return check(a);
    }

    // The first waiter takes the active role, or nobody does.
    failure promote(const lock_action& a)
    {
        if (fifo_.empty()) {
            active_ = false;
            return a.what == kind::none || a.what == kind::give_back || a.what == kind::linger ? nullptr
                                                                                                : "promoted nobody";
        }
        if (a.what != kind::promote || a.waiter != fifo_.front().id || a.owner != fifo_.front().owner)
            return "not the first waiter promoted (FIFO)";
        pending_ = fifo_.front().owner;
        fifo_.erase(fifo_.begin());
        return complete(a.waiter);
    }

    failure release()
    {
        if (holder_ == 0)
            return nullptr;
        auto owner = holder_;
        auto a = m_.released(owner, now_);
        if (--counts_[owner] > 0)
            return a.what == kind::none ? check(a) : "a reentrant release decided something";
        holder_ = 0;
        const bool over = cfg_.handoff_batch_time.count() > 0 && node_.others &&
                          now_ - node_.granted_at >= cfg_.handoff_batch_time;
        if (node_.handoffs < cfg_.max_handoffs && !over && !fifo_.empty()) {
            if (a.what != kind::grant || a.waiter != fifo_.front().id)
                return "release: not a handoff to the first waiter";
            ++node_.handoffs;
            holder_ = fifo_.front().owner;
            counts_[holder_] = 1;
            fifo_.erase(fifo_.begin());
            ++grants_;
            if (auto f = complete(a.waiter))
                return f;
            return check(a);
        }
        if (!fifo_.empty()) {
            if (!a.give_back || a.batch_time_ended != over)
                return "release: a promotion without giving the node back";
            node_.has = false;
            if (auto f = promote(a))
                return f;
            return check(a);
        }
        active_ = false;
        if (cfg_.linger.count() > 0 && !node_.others && node_.handoffs < cfg_.max_handoffs) {
            if (a.what != kind::linger)
                return "release: no linger";
            lingering_ = true;
            linger_until_ = now_ + cfg_.linger;
            return check(a);
        }
        node_.has = false;
        if (a.what != kind::give_back || !a.give_back)
            return "release: the node not given back";
        return check(a);
    }

    failure time_passes(std::chrono::milliseconds by)
    {
        now_ += by;
        if (now_ >= armed_) {
            armed_ = lock_machine::never;
            auto a = m_.deadline_fired(now_);
            std::set<std::uint64_t> want;
            for (auto it = fifo_.begin(); it != fifo_.end();) {
                if (it->deadline <= now_) {
                    want.insert(it->id);
                    it = fifo_.erase(it);
                } else {
                    ++it;
                }
            }
            if (std::set<std::uint64_t>(a.timed_out.begin(), a.timed_out.end()) != want ||
                a.timed_out.size() != want.size())
                return "deadline: other waiters timed out than the model's";
            for (auto id : a.timed_out)
                if (auto f = complete(id))
                    return f;
            timeouts_ += want.size();
            time_point next = lock_machine::never;
            for (const auto& w : fifo_)
                next = std::min(next, w.deadline);
            if (a.arm_deadline.value_or(lock_machine::never) != next)
                return "deadline: the timer not re-armed to the earliest deadline still pending";
            if (auto f = check(a))
                return f;
        }
        if (now_ >= linger_armed_) {
            linger_armed_ = lock_machine::never;
            auto a = m_.linger_fired(now_);
            const bool ends = lingering_ && now_ >= linger_until_;
            if (a.end_linger != ends)
                return "linger timer: the end differs from the model's";
            if (ends) {
                lingering_ = false;
                node_.has = false;
            }
            return check(a);
        }
        return nullptr;
    }

    failure cancel(std::uint8_t arg)
    {
        if (next_id_ == 0)
            return nullptr;
        std::uint64_t id = 1 + arg % next_id_;
        auto it = std::find_if(fifo_.begin(), fifo_.end(), [id](const waiter& w) { return w.id == id; });
        auto a = m_.cancelled(id);
        if (it == fifo_.end())
            return a.what == kind::none ? check(a) : "cancelled a waiter that was not waiting";
        fifo_.erase(it);
        if (a.what != kind::cancelled || a.waiter != id)
            return "cancel: the waiter not cancelled";
        if (auto f = complete(id))
            return f;
        return check(a);
    }

    failure lose()
    {
        if (holder_ == 0 && !lingering_)
            return nullptr;
        auto owner = holder_;
        auto a = m_.lost(owner);
        node_.has = false;
        if (owner == 0) {
            lingering_ = false;
            return a.what == kind::none ? check(a) : "a lingering node's loss decided something";
        }
        counts_[owner] = 0;
        holder_ = 0;
        if (auto f = promote(a))
            return f;
        return check(a);
    }

    failure queued()
    {
        auto a = m_.others_queued();
        if (node_.has)
            node_.others = true;
        if (a.end_linger != lingering_)
            return "someone queued: lingering not ended";
        if (lingering_) {
            lingering_ = false;
            node_.has = false;
        }
        return check(a);
    }

    struct node {
        bool has = false;
        int handoffs = 0;
        time_point granted_at{};
        bool others = false;
    };

    lock_machine m_;
    lock_machine_config cfg_;
    time_point now_ = time_point{} + std::chrono::hours(1);
    time_point armed_ = lock_machine::never;
    time_point linger_armed_ = lock_machine::never;
    time_point linger_until_{};
    std::uint64_t next_id_ = 0;
    std::vector<waiter> fifo_;
    std::set<std::uint64_t> done_;
    std::map<std::uintptr_t, std::size_t> counts_;
    std::uintptr_t holder_ = 0;
    std::uintptr_t pending_ = 0;  // the active task, queued on the backend
    bool active_ = false;
    bool lingering_ = false;
    node node_;
    std::size_t grants_ = 0;
    std::size_t timeouts_ = 0;
};

// A configuration from one byte: batch bound small or the default, batch time, linger.
inline lock_machine_config config_from(std::uint8_t b)
{
    lock_machine_config c;
    c.max_handoffs = (b & 1) != 0 ? 3 : 63;
    c.handoff_batch_time = (b & 2) != 0 ? std::chrono::milliseconds(20) : std::chrono::nanoseconds(0);
    c.linger = (b & 4) != 0 ? std::chrono::milliseconds(30) : std::chrono::nanoseconds(0);
    return c;
}

}  // namespace lock_machine_model

#endif
