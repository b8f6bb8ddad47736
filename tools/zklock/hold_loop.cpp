// The hold loop (hold_loop.hpp), in its steps: the early signal, the command's start, the
// supervision of the tree (signals forwarded, the lock lost, a revocation, job control, the
// --kill-after escalation), then the release and the run's exit status.
#include "hold_loop.hpp"

#include "process_tree.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fmt/format.h>

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

namespace zklock {

using namespace std::chrono_literals;

namespace {

// Not acquired: timed out (-t), or held by another process (-n). The status of -E.
int not_acquired(const options& o)
{
    if (o.nonblock)
        tell("zklock: {} is held by another process (--nonblock)\n", escape(o.lock_path));
    else
        tell("zklock: timed out after {} s waiting for {}\n", *o.timeout_s, escape(o.lock_path));
    return o.conflict_exit_code;
}

class holding {
public:
    holding(const options& o, const std::set<int>& inherited, std::shared_ptr<run_events> events, acquired got,
            lock_backend& backend)
        : o_(o), inherited_(inherited), events_(std::move(events)), got_(std::move(got)), backend_(backend)
    {
    }

    asio::awaitable<int> run();

private:
    bool start_command(zkcoro::guard& g);
    asio::awaitable<void> supervise(zkcoro::guard& g);
    bool tree_done();
    void report_stop(int stop);
    void report_leftovers();
    asio::awaitable<std::optional<event>> next_event();
    void handle(const event& ev);
    void forward(int sig);
    void on_lost();
    void on_revoke();
    void lost_while_stopped();
    void on_escalate();
    asio::awaitable<int> finish(zkcoro::guard& g);
    asio::awaitable<void> release_saying_failure();

    const options& o_;
    const std::set<int>& inherited_;
    std::shared_ptr<run_events> events_;
    acquired got_;
    lock_backend& backend_;
    // A release is retried (through a failover) until the lease could have ended on its own.
    std::chrono::milliseconds release_limit_{};
    std::string cmd_name_;
    process_tree tree_;
    spawn_result child_;
    bool was_lost_ = false;
    bool killing_ = false;  // SIGKILL sent: send it to every descendant that shows up
    bool reported_stop_ = false;
    bool reported_leftovers_ = false;
    clock::time_point escalate_at_ = clock::time_point::max();
    int escalate_after_ = 0;  // the signal sent before the SIGKILL of --kill-after
};

asio::awaitable<int> holding::run()
{
    if (got_.guards.empty())
        co_return not_acquired(o_);
    zkcoro::guard& g = got_.guards.front();
    release_limit_ = std::max<std::chrono::milliseconds>(3s, backend_.lease());
    // A signal that came as the lock was granted: still before the command.
    if (const int early = first_queued_signal(*events_); early != 0) {
        say(o_, fmt::format("{} as the lock was acquired: giving up", signal_name(early)));
        co_await release_saying_failure();
        co_return 128 + early;
    }
    say(o_, fmt::format("acquired {} (node {}, fencing token {})", escape(o_.lock_path), escape(g.node_path()),
                        g.fencing_token()));

    // 3. Run the command in the guardian's process group. SIGCHLD is watched before the fork so
    // that no exit is missed.
    cmd_name_ = escape(o_.command[0]);
    if (!start_command(g)) {
        tell("zklock: cannot start {}: {}\n", cmd_name_, std::strerror(child_.error));
        tree_.end_guardian();
        co_await release_saying_failure();
        co_return exit_code::cannot_exec;
    }
    say(o_, fmt::format("started {} (pid {}, process group {})", cmd_name_, child_.pid, tree_.guardian));
    pump_while_held(events_, g, o_.revocable);
    co_await supervise(g);
    tree_.end_guardian();
    events_->stops.cancel();
    events_->sigs.cancel();  // a signal from here on is queued, unhandled: the release and close are bounded
    co_return co_await finish(g);
}

// The guardian, then the command in its process group, zklock a subreaper first (so that the
// whole tree is its to wait for). False if the command could not be started (child_.error).
bool holding::start_command(zkcoro::guard& g)
{
    if (!become_subreaper())
        say(o_, fmt::format("cannot become a subreaper ({}): only the command itself is waited for",
                            std::strerror(errno)));
    // Should zklock die (even of SIGKILL), the guardian's SIGKILL must come before the lease can end
    // on the server (2/3 of it after our last heartbeat or renewal, at the earliest), whatever
    // --kill-after says.
    tree_.guardian = spawn_guardian(lost_signal(o_), std::min(o_.kill_after, guardian_kill_bound(backend_.lease())));
    if (tree_.guardian > 0)
        child_ = spawn_command(o_.command, backend_.command_environment(g), inherited_, tree_.guardian);
    else
        child_ = {-1, -tree_.guardian};
    if (child_.pid < 0)
        return false;
    tree_.command = child_.pid;
    return true;
}

// Until the command's whole tree has exited: one event at a time. A stop (job control) is awaited
// here, its result in a variable: with g++ 12.2, a member coroutine whose body was only
// `if (!co_await pause_whole(...)) {...}` crashed at its first resumption (SIGSEGV, or SIGILL
// through a switch: the frame resumed past an await it had not reached; zklock_safety's Ctrl-Z
// cases). The cause: g++ 12.2 stores such a condition's value over the coroutine frame's resume
// pointer (docs/building.md, "Compilers"; tests/traps/check_coawait_conditions.py).
asio::awaitable<void> holding::supervise(zkcoro::guard& g)
{
    while (!tree_done()) {
        const auto ev = co_await next_event();
        if (!ev || (ev->kind == event_kind::lost && was_lost_))
            continue;
        if (ev->kind != event_kind::stop) {
            handle(*ev);
            continue;
        }
        const bool held = co_await pause_whole(o_, tree_, g, backend_, ev->sig, was_lost_);
        if (!held)
            lost_while_stopped();
    }
}

// Reaps what exited and says what the tree does; true once all of it has exited.
bool holding::tree_done()
{
    // (A SIGSTOP is zklock's own pause of the whole job, or someone's deliberate stop: not reported.)
    if (const int stop = tree_.reap(); stop != 0 && stop != SIGSTOP && !reported_stop_)
        report_stop(stop);
    if (killing_)
        tree_.signal(SIGKILL);
    if (tree_.done())
        return true;
    if (tree_.command_done && !reported_leftovers_)
        report_leftovers();
    return false;
}

void holding::report_stop(int stop)
{
    reported_stop_ = true;
    tell(
               "zklock: {} was stopped by {}{}; the lock stays held. A signal to zklock (Ctrl-C, "
               "timeout(1), kill) is forwarded, followed by SIGCONT\n",
               cmd_name_, signal_name(stop),
               stop == SIGTTIN || stop == SIGTTOU
                   ? " (it used the terminal, but runs in a process group of its own: give it no terminal "
                     "input, e.g. </dev/null)"
                   : "");
}

void holding::report_leftovers()
{
    reported_leftovers_ = true;
    const auto left = tree_.children();
    say(o_, fmt::format("{} exited with {}; the lock stays held until the {} process(es) it left behind "
                        "exit (pid {})",
                        cmd_name_, exit_code_of(tree_.command_status), left.size(), fmt::join(left, ", ")));
}

// The next event: the queue's first, or the escalation once its time has come; nullopt when woken
// with nothing to do.
asio::awaitable<std::optional<event>> holding::next_event()
{
    auto& queue = events_->queue;
    if (queue.empty() && clock::now() < escalate_at_) {
        events_->wake.expires_at(escalate_at_);
        co_await events_->wake.async_wait(asio::as_tuple(asio::use_awaitable));  // expired, or a push
    }
    if (!queue.empty()) {
        const event ev = queue.front();
        queue.pop_front();
        co_return ev;
    }
    if (clock::now() < escalate_at_)
        co_return std::nullopt;
    co_return event{event_kind::escalate};
}

// Every event but job control's stops (pause_whole, a coroutine: the job's pause asks the server).
void holding::handle(const event& ev)
{
    switch (ev.kind) {
    case event_kind::signal:
        forward(ev.sig);
        break;
    case event_kind::lost:
        on_lost();
        break;
    case event_kind::revoke:
        on_revoke();
        break;
    case event_kind::stop:  // supervise(): pause_whole
        break;
    case event_kind::escalate:
        on_escalate();
        break;
    case event_kind::child:  // reaped by tree_done()
        break;
    }
}

void holding::forward(int sig)
{
    say(o_, fmt::format("forwarding {} to the command's process tree (group {})", signal_name(sig), tree_.guardian));
    tree_.signal(sig);
    if (tree_.any_stopped())
        tree_.signal(SIGCONT);  // a stopped process gets it only once continued
}

void holding::on_lost()
{
    was_lost_ = true;
    const int sig = lost_signal(o_);
    tell("zklock: lock on {} lost ({}): {}\n", escape(o_.lock_path), backend_.lost_why(),
               sig == 0 ? std::string("leaving the command running (--on-lost ignore)")
                        : fmt::format("sending {} to the command's process tree", signal_name(sig)));
    if (sig != 0) {
        tree_.signal(sig);
        if (tree_.any_stopped())
            tree_.signal(SIGCONT);
        if (sig == SIGKILL)
            killing_ = true;
        else if (o_.kill_after > std::chrono::milliseconds::zero())
            escalate_at_ = clock::now() + o_.kill_after;
        escalate_after_ = sig;
    }
}

void holding::on_revoke()
{
    tell("zklock: revocation of {} requested: {}\n", escape(o_.lock_path),
               o_.revoke_term ? "sending SIGTERM to the command's process tree; the lock is released when it "
                                "has exited"
                              : std::string_view("leaving the command running (--on-revoke ignore)"));
    if (o_.revoke_term && !was_lost_) {
        tree_.signal(SIGTERM);
        if (tree_.any_stopped())
            tree_.signal(SIGCONT);
        if (o_.kill_after > std::chrono::milliseconds::zero())
            escalate_at_ = clock::now() + o_.kill_after;
        escalate_after_ = SIGTERM;
    }
}

// The lock was lost while zklock was stopped (pause_whole): the tree must not run again, not even
// to handle a SIGTERM.
void holding::lost_while_stopped()
{
    was_lost_ = true;
    if (lost_signal(o_) != 0)
        killing_ = true;
    else
        tree_.signal(SIGCONT);
}

void holding::on_escalate()
{
    escalate_at_ = clock::time_point::max();
    tell("zklock: the command's process tree still runs {} s after {}: sending SIGKILL (--kill-after)\n",
               std::chrono::duration<double>(o_.kill_after).count(), signal_name(escalate_after_));
    killing_ = true;
}

// 4. The whole tree has exited: release, and the run's status (the command's own, or what went
// wrong: the command could not run, the lock was lost, the release failed).
asio::awaitable<int> holding::finish(zkcoro::guard& g)
{
    if (child_.error != 0) {
        tell("zklock: cannot run {}: {}\n", cmd_name_, std::strerror(child_.error));
        co_await release_saying_failure();
        co_return child_.error == ENOENT ? exit_code::not_found : exit_code::cannot_exec;
    }
    const int child_rc = exit_code_of(tree_.command_status);
    was_lost_ = was_lost_ || g.lost();
    say(o_, fmt::format("{} exited with {}{}", cmd_name_, child_rc, was_lost_ ? " after the lock was lost" : ""));

    // Release: delete the node(s) now; the session close that follows would remove them too, but a
    // failed delete means something is wrong (permissions, the server) and is reported.
    const std::string failed = co_await backend_.release_all(got_.guards, release_limit_);
    was_lost_ = was_lost_ || g.lost();
    if (was_lost_) {
        tell("zklock: exit {}: the lock on {} was lost while {} ran (its own status: {})\n",
                   o_.lost_exit_code, escape(o_.lock_path), cmd_name_, child_rc);
        co_return o_.lost_exit_code;
    }
    if (!failed.empty()) {
        tell("zklock: cannot release {}: {} ({} exited with {}; {})\n", escape(o_.lock_path), failed,
                   cmd_name_, child_rc, backend_.unreleased());
        co_return exit_code::refused;
    }
    co_return child_rc;
}

// A release when the command did not run (a signal came first, it could not be started or run):
// a failure is said, and the run's status stands.
asio::awaitable<void> holding::release_saying_failure()
{
    // (Two statements: g++ 12 miscompiles a coroutine whose body is one conditional with a co_await;
    // see supervise.)
    const std::string failed = co_await backend_.release_all(got_.guards, release_limit_);
    if (!failed.empty())
        tell("zklock: cannot release {}: {}\n", escape(o_.lock_path), failed);
}

}  // namespace

asio::awaitable<int> run_holding(const options& o, const std::set<int>& inherited, std::shared_ptr<run_events> events,
                                 acquired got, lock_backend& backend)
{
    holding h(o, inherited, std::move(events), std::move(got), backend);
    co_return co_await h.run();
}

}  // namespace zklock
