// A fencing-token store for the fault suite: a resource that refuses writes carrying a token
// lower than the highest it has accepted, the way a database or a storage service should use
// the tokens that lock guards hand out.
//
// The store is one text file, shared by every holder process of a scenario (zkcoro holders and
// zklock commands call write_token() directly; Curator holders run the fault-fence tool). Each
// write takes flock(2) LOCK_EX on the file, reads it, decides, and appends one line
//   <id> <token> accepted|rejected <monotonic_ns>
// so the file is both the store and its audit log. A store opened with check = false accepts
// everything: it is the negative control, where a stale write gets through.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zkfault {

enum class write_outcome { accepted, rejected };

// Writes `token` on behalf of `id` (no whitespace). With check, a token lower than the highest
// accepted one is rejected; an equal one is accepted. Throws std::runtime_error on I/O failure.
write_outcome write_token(const std::string& store, const std::string& id, std::int64_t token, bool check);

struct store_audit {
    std::size_t accepted = 0;
    std::size_t rejected = 0;
    // Accepted writes whose token is lower than one accepted before them: stale writes that got
    // through. Zero for a checked store by construction; the control store shows what the check
    // prevents.
    std::size_t stale_accepted = 0;
    std::int64_t highest = 0;
    std::vector<std::string> stale_lines;  // the offending lines, for the report
};

// Reads a store file written by write_token(); a missing file is an empty store.
store_audit audit_store(const std::string& store);

}  // namespace zkfault
