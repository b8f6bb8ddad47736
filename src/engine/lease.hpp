// A lease: one acquisition of a lock, as a guard holds it (internal). Backend-neutral: the
// ZooKeeper lock engine makes one per grant of its node (engine/lock_object.hpp), and any other
// backend that can say "held, with this token, until lost or released" makes the same guard.
#ifndef ZKCORO_SRC_ENGINE_LEASE_HPP
#define ZKCORO_SRC_ENGINE_LEASE_HPP

#include "async/op_state.hpp"

#include <zkcoro/detail/config.hpp>
#include <zkcoro/this_task.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace zkcoro {
class client;
}

namespace zkcoro::detail {

class revocation_state;

class lease {
public:
    lease(asio::any_io_executor ex, std::int64_t token, owner_id owner) noexcept
        : ex_(std::move(ex)), token_(token), owner_(owner)
    {
    }
    lease(const lease&) = delete;
    lease& operator=(const lease&) = delete;
    virtual ~lease() = default;

    // The executor the lease's signals and completions run on (the backend's connection's).
    const asio::any_io_executor& executor() const noexcept { return ex_; }
    // Strictly increasing across grants of the same lock.
    std::int64_t fencing_token() const noexcept { return token_; }
    owner_id owner() const noexcept { return owner_; }
    // What holds the lock on the server (ZooKeeper: the node's path) and the session that owns it.
    virtual const std::string& resource() const noexcept = 0;
    virtual std::int64_t session_id() const noexcept = 0;

    // Told lost, or past the hold's own loss bound (Redis: its renewal's; ZooKeeper: its lost
    // policy's), which the loss signal follows when the backend's timer runs.
    bool lost() const noexcept { return lost_.load() || past_bound(); }
    asio::cancellation_slot lost_slot() noexcept { return lost_signal_.slot(); }

    // Completes with client_errc::lock_lost once lost, or operation_aborted once released.
    void async_wait_lost(any_handler<void(error_code)> handler);

    // The revocation requests of a revocable acquisition (null when not revocable). Set by the
    // backend before the guard is made; ends (waiters woken) when the lease ends.
    const std::shared_ptr<revocation_state>& revocation() const noexcept { return revocation_; }
    void set_revocation(std::shared_ptr<revocation_state> rs) noexcept { revocation_ = std::move(rs); }

    // The ZooKeeper client whose session owns the lock node, for transactions fenced by that
    // node; null for a backend that has no such node.
    virtual client* zookeeper() noexcept { return nullptr; }
    // Past the hold's own loss bound, before the loss is reported (see lost()).
    virtual bool past_bound() const noexcept { return false; }

    // Ends one acquisition (a guard's release). Idempotent per guard: the guard calls it once.
    // Completes with success when the lock is released or was already lost; with the backend's
    // error when it could not be released (also logged and counted by the backend).
    virtual void release(any_handler<void(error_code)> handler) = 0;

protected:
    // Marks the lease lost: wakes async_wait_lost with lock_lost and emits the lost signal
    // (terminal). Call it on executor(): the slot's handlers expect to run there. False when it was
    // already lost or released.
    bool set_lost();
    // Marks the lease released: wakes async_wait_lost with operation_aborted. False when it was
    // already lost or released.
    bool set_released();

private:
    bool end(bool lost);

    asio::any_io_executor ex_;
    std::int64_t token_;
    owner_id owner_;
    std::atomic<bool> lost_{false};
    std::mutex m_;
    bool ended_ = false;  // lost or released; guarded by m_
    std::vector<std::shared_ptr<op_state<>>> lost_waiters_;  // guarded by m_
    asio::cancellation_signal lost_signal_;
    std::shared_ptr<revocation_state> revocation_;
};

}  // namespace zkcoro::detail

#endif
