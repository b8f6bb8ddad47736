// Revocation (internal): Curator's makeRevocable/Revoker protocol. A revocable acquisition
// watches its own node's data from the moment the node exists (so a request can come while it
// still queues); data equal to "__REVOKE__" is a request to let go. Only the holder deletes its
// node: revocation is cooperative. The state is backend-neutral; the watch is ZooKeeper's (zookeeper/lock.hpp).
#ifndef ZKCORO_SRC_ENGINE_REVOCATION_HPP
#define ZKCORO_SRC_ENGINE_REVOCATION_HPP

#include "async/op_state.hpp"

#include <zkcoro/error.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace zkcoro::detail {

// One revocable acquisition: made before its node is created, shared by the watch on the node
// and, once granted, by the lease.
class revocation_state {
public:
    explicit revocation_state(asio::any_io_executor ex) : ex_(std::move(ex)) {}

    bool requested() const noexcept { return requested_.load(); }
    bool ended() const noexcept { return ended_.load(); }
    // Receives terminal cancellation when a revocation is requested (emitted on the executor).
    asio::cancellation_slot slot() noexcept { return signal_.slot(); }

    // Completes with success once a revocation is requested (at once if it was), or with `ec`
    // of end() when the acquisition ends first.
    void async_wait(any_handler<void(error_code)> handler);
    // A request arrived: wakes the waiters and emits the signal. Call it on the executor.
    void request();
    // The acquisition ended (released: operation_aborted; lost: lock_lost). Waiters get `ec`.
    void end(error_code ec);

private:
    asio::any_io_executor ex_;
    std::atomic<bool> requested_{false};
    std::atomic<bool> ended_{false};
    std::mutex m_;
    error_code end_ec_;                                 // guarded by m_
    std::vector<std::shared_ptr<op_state<>>> waiters_;  // guarded by m_
    asio::cancellation_signal signal_;
};

// The bytes of a revocation request (Curator's LockInternals.REVOKE_MESSAGE).
inline constexpr std::string_view revoke_message = "__REVOKE__";

}  // namespace zkcoro::detail

#endif
