#include "zookeeper/diagnostics.hpp"

#include <zkcoro/detail/access.hpp>

#include <boost/asio/error.hpp>
#include <boost/system/system_error.hpp>

#include <fmt/format.h>

namespace zkcoro::detail {

std::string_view advice(const error_code& ec) noexcept
{
    if (ec == zk_errc::no_auth)
        return "the lock path's ACL refuses this client: add credentials (client_config::auth) or change the ACL";
    if (ec == zk_errc::no_children_for_ephemerals)
        return "a parent of the lock path is an ephemeral node: use a path under persistent nodes";
    if (ec == zk_errc::invalid_acl)
        return "client_config::default_acl is not valid for this server: check its schemes and ids";
    if (ec == client_errc::invalid_path)
        return "fix the lock path: check_path() names the offending position";
    if (ec == client_errc::invalid_argument)
        return "an argument is out of its documented range (see the client's log for which)";
    if (ec == client_errc::upgrade_not_supported)
        return "release the read lock before asking for the write lock";
    if (ec == client_errc::closed)
        return "the client was closed: make a new client to go on";
    if (ec == client_errc::auth_failed || ec == zk_errc::auth_failed)
        return "the server refused the credentials (client_config::auth) and the client closed: fix them, then make a "
               "new client";
    if (ec == client_errc::session_expired)
        return "the session ended while waiting; the client is making a new one: retry the acquisition";
    if (is_retriable(ec))
        return "no server answered in time: check that the ensemble is up and reachable, then retry";
    if (is_session_lost(ec))
        return "the session is gone: retry on the client's next session";
    return "see the error's message";
}

std::string failure_context(const client& zk, std::string_view operation, std::string_view path, const error_code& ec)
{
    auto server = zk.connected_server();
    return fmt::format("{} {} (session 0x{:x}, server {}): {}", operation, path,
                       static_cast<std::uint64_t>(zk.session().id), server.empty() ? "none connected" : server,
                       advice(ec));
}

std::string describe_failure(const client& zk, std::string_view operation, std::string_view path, const error_code& ec)
{
    return failure_context(zk, operation, path, ec) + ": " + ec.message();
}

void log_failure(const client& zk, std::string_view operation, std::string_view path, const error_code& ec)
{
    access::log(zk, log_level::warn, describe_failure(zk, operation, path, ec));
}

void throw_failure(const client& zk, std::string_view operation, std::string_view path, const error_code& ec)
{
    throw boost::system::system_error(ec, failure_context(zk, operation, path, ec));
}

}  // namespace zkcoro::detail
