// `zklock LOCKPATH -- COMMAND` (run_lock): the words its parts share. The parts, one file each:
//   bootstrap.cpp          the one bootstrap of every backend (run_lock), and the run's steps:
//                          connect, acquire, then the hold loop
//   lock_backend.hpp/.cpp  what a run needs of its backend, and what both backends share
//                          (release, the command's environment)
//   zookeeper_backend.cpp  the ZooKeeper backend (the acquisition shows the queue while it waits)
//   redis_backend.cpp      the Redis backend (redis:// and redis+sentinel://)
//   connection.cpp         the ZooKeeper client's configuration and the connect messages (also
//                          used by status and revoke)
//   event_pump.hpp/.cpp    what the hold loop waits for: signals, the lock lost, a revocation
//   process_tree.hpp/.cpp  the command's process tree and its guardian
//   job_control.cpp        Ctrl-Z: the whole job stops, and the lock is checked once continued
//   hold_loop.hpp/.cpp     while the lock is held: start the command, supervise it, release
#ifndef ZKCORO_TOOLS_ZKLOCK_RUN_HPP
#define ZKCORO_TOOLS_ZKLOCK_RUN_HPP

#include "zklock.hpp"

#include <zkcoro/guard.hpp>

#include <fmt/format.h>

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace zklock {

using clock = std::chrono::steady_clock;

inline std::string signal_name(int sig)
{
    const char* abbrev = ::sigabbrev_np(sig);
    return abbrev != nullptr ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", sig);
}

// The signal --on-lost sends to the command's process tree (0: none).
inline int lost_signal(const options& o)
{
    return o.lost_action == on_lost::kill ? SIGKILL : o.lost_action == on_lost::term ? SIGTERM : 0;
}

// What an acquisition gives.
struct acquired {
    std::vector<zkcoro::guard> guards;  // empty: timed out / would block
    zkcoro::error_code ec;
    std::string what;
};

}  // namespace zklock

#endif
