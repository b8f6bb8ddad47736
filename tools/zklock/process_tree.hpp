// The command's process tree and its guardian (spawn_guardian, child.cpp), and job control:
// Ctrl-Z stops the whole job, and zklock checks the lock once continued (job_control.cpp).
#ifndef ZKCORO_TOOLS_ZKLOCK_PROCESS_TREE_HPP
#define ZKCORO_TOOLS_ZKLOCK_PROCESS_TREE_HPP

#include "run.hpp"

#include <boost/asio/awaitable.hpp>

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <vector>

namespace zklock {

class lock_backend;

// The command's process tree: the guardian (leader of the command's process group, see
// spawn_guardian), the command, and every descendant, which zklock (a subreaper) inherits when
// its parent dies. zklock waits until all of them have exited, as flock(1) holds its lock while
// any process that inherited the lock's descriptor lives.
struct process_tree {
    pid_t guardian = -1;  // also the process group's id
    bool guardian_reaped = false;
    pid_t command = -1;
    bool command_done = false;
    int command_status = 0;
    std::size_t reaped_others = 0;

    // Reaps every child that exited; returns the signal that stopped the command (0: none).
    int reap();

    // Live descendants that are zklock's children (the guardian excepted). Without the kernel's
    // children list, only the command is known.
    std::vector<pid_t> children() const;

    bool done() const { return command_done && children().empty(); }

    // True if a process of the command's group, or a child of zklock, is stopped (state T): a
    // signal sent to it stays pending until SIGCONT. Scans /proc; zklock does this only when it
    // forwards a signal.
    bool any_stopped() const;

    // Sends `sig` to the command's process group, and to every child of zklock outside it
    // (descendants that called setsid() and whose parent has exited).
    void signal(int sig) const;

    // Ends the guardian (nothing left to guard) and reaps it.
    void end_guardian();
};

// The exit status of a process by its wait status: its own, or 128+N for a signal.
int exit_code_of(int status);

// The guardian's SIGKILL after zklock's death: within a third of the lease, so that it lands
// before the lease can end on the server (2/3 of it after our last heartbeat or renewal).
std::chrono::milliseconds guardian_kill_bound(std::chrono::milliseconds lease);

// Ctrl-Z (SIGTSTP), or a background zklock that touched the terminal (SIGTTIN, SIGTTOU): the
// whole job pauses, the command's tree first, then zklock. Once continued (fg, bg, SIGCONT),
// zklock checks the lock before the tree runs again. Returns false when the lock was lost: the
// tree is still stopped then, and the caller ends it.
asio::awaitable<bool> pause_whole(const options& o, process_tree& tree, zkcoro::guard& g, lock_backend& backend,
                                  int sig, bool was_lost);

}  // namespace zklock

#endif
