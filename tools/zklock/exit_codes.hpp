// zklock's exit statuses: the codes, the table that the man page, README.md and --help list, and
// the one mapping from error codes and exceptions to them (run on both backends, status, revoke,
// status -r). The test zklock_exit_table holds the documents against this table.
#ifndef ZKCORO_TOOLS_ZKLOCK_EXIT_CODES_HPP
#define ZKCORO_TOOLS_ZKLOCK_EXIT_CODES_HPP

#include <zkcoro/error.hpp>

#include <exception>
#include <string>
#include <string_view>

namespace zklock {

// Exit codes (sysexits.h values where one fits).
namespace exit_code {
inline constexpr int usage = 64;        // EX_USAGE: bad options or arguments
inline constexpr int unavailable = 69;  // EX_UNAVAILABLE: could not connect, or the session ended before the lock was held
inline constexpr int lost = 70;         // EX_SOFTWARE: the lock was lost while the command ran (default of --lost-exit-code)
inline constexpr int tempfail = 75;     // EX_TEMPFAIL: timed out (-t) or the lock is held (-n)
inline constexpr int refused = 76;      // EX_PROTOCOL: the server (ZooKeeper or Redis) refused an operation (e.g. no permission)
inline constexpr int cannot_exec = 126; // the command was found but could not be run
inline constexpr int not_found = 127;   // the command was not found
}  // namespace exit_code

// The numbered rows of the EXIT STATUS table (man page, README.md, --help): each code and its
// sysexits.h name (empty: none). Besides these: the command's own status, and 128+N for a signal.
struct exit_row {
    int code;
    std::string_view name;
};

inline constexpr exit_row exit_table[] = {
    {exit_code::usage, "EX_USAGE"},      {exit_code::unavailable, "EX_UNAVAILABLE"}, {exit_code::lost, "EX_SOFTWARE"},
    {exit_code::tempfail, "EX_TEMPFAIL"}, {exit_code::refused, "EX_PROTOCOL"},       {exit_code::cannot_exec, ""},
    {exit_code::not_found, ""},
};

// A failed connection, on either backend: a bad connect string or URL 64, anything else 69
// (nothing listening, a name that does not resolve, refused credentials, no master found).
int exit_for_connect(const zkcoro::error_code& ec);

// A failed operation (acquire, list, scan, revoke), on either backend: bad input 64; the server
// unreachable, the session or connection ended, or the server cannot take writes for now (Redis
// READONLY or OOM: zkcoro::classify() calls them retriable) 69; the server refused 76.
int exit_for_error(const zkcoro::error_code& ec);

// An exception out of a run (run's bootstrap on either backend, status, revoke): a
// boost::system::system_error by its code (exit_for_error), anything else 76. `what` gets the
// exception's text.
int exit_for_exception(const std::exception_ptr& e, std::string& what);

}  // namespace zklock

#endif
