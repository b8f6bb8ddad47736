// The mapping from error codes and exceptions to zklock's exit statuses (exit_codes.hpp).
#include "exit_codes.hpp"

#include <zkcoro/client.hpp>
#ifdef ZKLOCK_REDIS
#include <zkcoro/redis.hpp>
#endif

#include <boost/system/system_error.hpp>

namespace zklock {

int exit_for_connect(const zkcoro::error_code& ec)
{
    if (ec == zkcoro::client_errc::invalid_connect_string || ec == zkcoro::client_errc::invalid_argument)
        return exit_code::usage;
#ifdef ZKLOCK_REDIS
    if (ec == zkcoro::redis_errc::bad_url)
        return exit_code::usage;
#endif
    return exit_code::unavailable;
}

int exit_for_error(const zkcoro::error_code& ec)
{
    using zkcoro::client_errc;
    if (ec == client_errc::invalid_path || ec == client_errc::invalid_argument)
        return exit_code::usage;
#ifdef ZKLOCK_REDIS
    // A semaphore's --semaphore N other than its holders' (the count is the user's to fix).
    if (ec == zkcoro::redis_errc::bad_key || ec == zkcoro::redis_errc::bad_ttl || ec == zkcoro::redis_errc::bad_url ||
        ec == zkcoro::redis_errc::bad_leases || ec == zkcoro::redis_errc::leases_mismatch)
        return exit_code::usage;
#endif
    if (zkcoro::is_session_lost(ec) || zkcoro::is_retriable(ec))
        return exit_code::unavailable;
    return exit_code::refused;
}

int exit_for_exception(const std::exception_ptr& e, std::string& what)
{
    try {
        std::rethrow_exception(e);
    } catch (const boost::system::system_error& x) {
        what = x.what();
        return exit_for_error(x.code());
    } catch (const std::exception& x) {
        what = x.what();
        return exit_code::refused;
    } catch (...) {
        what = "unknown exception";
        return exit_code::refused;
    }
}

}  // namespace zklock
