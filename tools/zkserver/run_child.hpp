// Runs a launcher's command (internal to the test and benchmark tools).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace zktest {

// Runs `cmd` (searched on PATH) with this process's environment, forwards SIGINT, SIGTERM and
// SIGHUP to it (a terminal's Ctrl-C, which reaches it directly, is not sent twice), and returns
// its exit code: 128+N if it died from signal N, 127 if it could not be run (`program` names the
// launcher in that message).
int run_child(const std::vector<std::string>& cmd, std::string_view program);

}  // namespace zktest
