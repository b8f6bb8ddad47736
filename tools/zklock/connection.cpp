// The ZooKeeper client's configuration of a run, status and revoke (make_config), and the messages
// they share: a failed connect, ZooKeeper's ZNOAUTH, the connect string as messages show it.
#include "zklock.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

namespace zklock {

using namespace std::chrono_literals;

namespace {

constexpr int zk_noauth = -102;  // ZooKeeper's ZNOAUTH

}  // namespace

zkcoro::client_config make_config(const options& o)
{
    zkcoro::client_config cfg;
    cfg.connect_string = o.connect;
    cfg.session_timeout = o.session_timeout;
    cfg.connect_timeout = 10s;
    cfg.auth = o.auth;
    if (o.acl == acl_kind::creator)
        cfg.default_acl = zkcoro::creator_all_acl();
    // Issue 39: -t bounds the whole wait, the first connection included, and an ensemble that
    // comes back within it is waited for (was: 10 s at most, whatever -t said); at least 1 s.
    // Without -t, 10 s; -n tries once: 2 s at most.
    if (o.timeout_s) {
        const auto t = std::chrono::milliseconds(static_cast<long long>(*o.timeout_s * 1000.0));
        cfg.connect_timeout = std::max<std::chrono::milliseconds>(t, 1s);
    }
    if (o.nonblock)
        cfg.connect_timeout = 2s;
    if (o.verbose) {
        cfg.log_threshold = zkcoro::log_level::info;
        cfg.log = [](zkcoro::log_level l, std::string_view m) {
            tell("zklock: [{}] {}\n", zkcoro::to_string(l), escape(m));
        };
    }
    return cfg;
}

// What to tell a user whose request ZooKeeper refused with ZNOAUTH.
std::string noauth_hint(const options& o)
{
    if (o.auth.empty())
        return fmt::format("the ACL of {} (or of a parent) refuses unauthenticated clients: pass credentials "
                           "with --auth-file FILE or ZK_AUTH=digest:USER:PASSWORD",
                           escape(o.lock_path));
    return fmt::format("the ACL of {} (or of a parent) does not allow the credentials given (scheme {}): "
                       "check them, or the node's ACL",
                       escape(o.lock_path), o.auth.front().scheme);
}

bool is_noauth(const zkcoro::error_code& ec)
{
    return ec.value() == zk_noauth && ec.category() == zkcoro::zookeeper_category();
}

std::string shown_connect(std::string_view connect)
{
#ifdef ZKLOCK_REDIS
    return escape(zkcoro::redact_url(connect));
#else
    // No redact_url without the Redis backend, and no password belongs in a ZooKeeper connect
    // string (credentials go in --auth-file or $ZK_AUTH): what may hold one is not shown.
    return connect.find('@') == std::string_view::npos ? escape(connect) : std::string("(not shown: it has an '@')");
#endif
}

std::string connect_failure(const options& o, const zkcoro::error_code& ec)
{
    if (ec == zkcoro::client_errc::name_resolution_failed)
        return fmt::format("cannot resolve the host name(s) of {} '{}': {}", o.connect_origin, shown_connect(o.connect),
                           ec.message());
    if (ec == zkcoro::client_errc::chroot_not_found) {
        const auto slash = o.connect.find('/');
        const std::string chroot = slash == std::string::npos ? std::string() : o.connect.substr(slash);
        return fmt::format("the chroot {} of {} '{}' does not exist on the server: create it, or remove it from "
                           "the connect string",
                           escape(chroot), o.connect_origin, shown_connect(o.connect));
    }
    if (ec == zkcoro::client_errc::connect_timeout)
        return fmt::format("cannot connect to ZooKeeper at {} ({}): no session within {} s; is a server running "
                           "there and reachable?",
                           shown_connect(o.connect), o.connect_origin,
                           std::chrono::duration_cast<std::chrono::seconds>(make_config(o).connect_timeout).count());
    if (ec == zkcoro::client_errc::auth_failed)
        return fmt::format("ZooKeeper at {} rejected the credentials from {} (scheme '{}'): check them (digest "
                           "credentials are digest:USER:PASSWORD), and that the server knows the scheme",
                           shown_connect(o.connect), o.auth_origin, o.auth.empty() ? "" : escape(o.auth.front().scheme));
    return fmt::format("cannot connect to ZooKeeper at {} ({}): {}", shown_connect(o.connect), o.connect_origin, ec.message());
}

}  // namespace zklock
