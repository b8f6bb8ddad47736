// Child processes of the fault suite: started with fork+exec, ended by PID only, waited for with
// a bound. Every child gets PR_SET_PDEATHSIG(SIGKILL), so it dies if the suite dies; the suite's
// signal path also kills the registered PIDs (kill_registered()).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace zkfault {

// Starts argv[0] (looked up in PATH before the fork) with stdin from /dev/null, stdout and stderr appended to
// the given files ("" for /dev/null), extra "NAME=VALUE" entries added to the environment, an
// empty signal mask and default signal dispositions. Registers the PID. Throws on failure.
pid_t spawn(const std::vector<std::string>& argv, const std::string& out_file, const std::string& err_file,
            const std::vector<std::string>& extra_env = {});

// Waits at most `timeout` for the child to exit; reaps it and returns its status as a shell
// reports it (exit code, or 128+N for signal N). nullopt when it is still running.
std::optional<int> wait_exit(pid_t pid, std::chrono::milliseconds timeout);

// Ends a child: SIGTERM and SIGCONT, at most `grace` for it to exit, then SIGKILL; reaps it and
// returns its status.
int end_process(pid_t pid, std::chrono::milliseconds grace);

// The process state letter from /proc/PID/stat ('T' when stopped), 0 if unknown.
char process_state(pid_t pid);

// SIGKILL (and SIGCONT) to every registered child that has not been reaped. Async-signal-safe.
void kill_registered() noexcept;

}  // namespace zkfault
