// zklock's exit-status table (tools/zklock/exit_codes.hpp): prints its rows ("CODE NAME", one a
// line) for check_exit_table.py, which holds the man page, README.md and --help against them.
// First it checks the mapping itself: the same failure gives the same exit status on ZooKeeper
// and on Redis, and each is a row of the table; on a disagreement it says which and exits 1.
#include "exit_codes.hpp"

#include <zkcoro/client.hpp>
#ifdef ZKLOCK_REDIS
#include <zkcoro/redis.hpp>
#endif

#include <boost/system/system_error.hpp>

#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>

namespace {

int failures = 0;

bool in_table(int code)
{
    for (const auto& row : zklock::exit_table)
        if (row.code == code)
            return true;
    return false;
}

void expect(const char* what, int got, int want)
{
    if (got != want || !in_table(got)) {
        std::fprintf(stderr, "FAIL: %s: exit %d, expected %d (a row of the table)\n", what, got, want);
        ++failures;
    }
}

int of_exception(const std::exception_ptr& e)
{
    std::string what;
    const int rc = zklock::exit_for_exception(e, what);
    if (what.empty()) {
        std::fprintf(stderr, "FAIL: exit_for_exception gave no text\n");
        ++failures;
    }
    return rc;
}

}  // namespace

int main()
{
    using zkcoro::client_errc;
    using zkcoro::zk_errc;
    namespace ec = zklock::exit_code;
    // Failures the backends share (ZooKeeper's code, then Redis').
    expect("ZooKeeper: bad connect string", zklock::exit_for_connect(client_errc::invalid_connect_string), ec::usage);
    expect("ZooKeeper: nothing listening", zklock::exit_for_connect(client_errc::connect_timeout), ec::unavailable);
    expect("ZooKeeper: credentials refused", zklock::exit_for_connect(client_errc::auth_failed), ec::unavailable);
    expect("ZooKeeper: bad path", zklock::exit_for_error(client_errc::invalid_path), ec::usage);
    expect("ZooKeeper: session expired", zklock::exit_for_error(client_errc::session_expired), ec::unavailable);
    expect("ZooKeeper: connection lost", zklock::exit_for_error(zk_errc::connection_loss), ec::unavailable);
    expect("ZooKeeper: no permission", zklock::exit_for_error(zk_errc::no_auth), ec::refused);
    expect("ZooKeeper: internal error", zklock::exit_for_error(client_errc::internal_error), ec::refused);
#ifdef ZKLOCK_REDIS
    using zkcoro::redis_errc;
    expect("Redis: bad URL", zklock::exit_for_connect(redis_errc::bad_url), ec::usage);
    expect("Redis: nothing listening", zklock::exit_for_connect(redis_errc::connect_failed), ec::unavailable);
    expect("Redis: credentials refused", zklock::exit_for_connect(redis_errc::auth_failed), ec::unavailable);
    expect("Redis: no master found", zklock::exit_for_connect(redis_errc::unknown_master), ec::unavailable);
    expect("Redis: bad key", zklock::exit_for_error(redis_errc::bad_key), ec::usage);
    expect("Redis: bad TTL", zklock::exit_for_error(redis_errc::bad_ttl), ec::usage);
    expect("Redis: semaphore leases mismatch", zklock::exit_for_error(redis_errc::leases_mismatch), ec::usage);
    expect("Redis: connection lost", zklock::exit_for_error(redis_errc::connection_lost), ec::unavailable);
    expect("Redis: READONLY", zklock::exit_for_error(redis_errc::read_only), ec::unavailable);
    expect("Redis: NOPERM", zklock::exit_for_error(redis_errc::no_permission), ec::refused);
    expect("Redis: WRONGTYPE", zklock::exit_for_error(redis_errc::wrong_type), ec::refused);
#endif
    // Exceptions out of a run: by their code, or 76 for any other.
    expect("system_error(session expired)",
           of_exception(std::make_exception_ptr(boost::system::system_error(client_errc::session_expired))),
           ec::unavailable);
    expect("system_error(no permission)",
           of_exception(std::make_exception_ptr(boost::system::system_error(zk_errc::no_auth))), ec::refused);
    expect("runtime_error", of_exception(std::make_exception_ptr(std::runtime_error("boom"))), ec::refused);
    expect("an int thrown", of_exception(std::make_exception_ptr(42)), ec::refused);
    if (failures > 0)
        return 1;
    for (const auto& row : zklock::exit_table)
        std::printf("%d %.*s\n", row.code, static_cast<int>(row.name.size()), row.name.data());
    return 0;
}
