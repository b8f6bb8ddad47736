// While the lock is held: the command runs in its own process group, zklock watches the lock and
// the command's process tree, forwards signals, and releases once the whole tree has exited.
#ifndef ZKCORO_TOOLS_ZKLOCK_HOLD_LOOP_HPP
#define ZKCORO_TOOLS_ZKLOCK_HOLD_LOOP_HPP

#include "event_pump.hpp"
#include "lock_backend.hpp"

#include <boost/asio/awaitable.hpp>

#include <memory>
#include <set>

namespace zklock {

// After the acquisition: when not acquired (timed out, would block), says so; else runs the
// command, holds the lock until its whole tree has exited, and releases. The run's exit status.
asio::awaitable<int> run_holding(const options& o, const std::set<int>& inherited, std::shared_ptr<run_events> events,
                                 acquired got, lock_backend& backend);

}  // namespace zklock

#endif
