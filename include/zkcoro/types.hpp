// Plain value types shared by the client's operations.
#ifndef ZKCORO_TYPES_HPP
#define ZKCORO_TYPES_HPP

#include <zkcoro/detail/api.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zkcoro {

/// The metadata ZooKeeper keeps for every node (its Stat structure), copied out of the reply.
struct node_stat {
    std::int64_t czxid = 0;           ///< transaction that created the node (globally increasing)
    std::int64_t mzxid = 0;           ///< transaction that last modified the data
    std::int64_t ctime = 0;           ///< creation time, ms since the epoch (server clock)
    std::int64_t mtime = 0;           ///< last modification time, ms since the epoch
    std::int32_t version = 0;         ///< data version
    std::int32_t cversion = 0;        ///< children version
    std::int32_t aversion = 0;        ///< ACL version
    std::int64_t ephemeral_owner = 0; ///< session id of the owner of an ephemeral node, else 0
    std::int32_t data_length = 0;  ///< length of the data in bytes
    std::int32_t num_children = 0;  ///< number of children
    std::int64_t pzxid = 0;           ///< transaction that last changed the children
    bool operator==(const node_stat&) const = default;  ///< Member-wise equality.
};

enum class create_mode {
    persistent,
    ephemeral,
    persistent_sequential,
    ephemeral_sequential,
    container,  ///< removed by the server once its last child is gone (ZooKeeper 3.5+)
};

/// True for the modes whose node dies with the session or gets a server-chosen name: a create
/// in such a mode that completes after its caller gave up must be undone.
constexpr bool needs_cleanup_if_abandoned(create_mode m) noexcept
{
    return m == create_mode::ephemeral || m == create_mode::ephemeral_sequential ||
           m == create_mode::persistent_sequential;
}

constexpr bool is_sequential(create_mode m) noexcept
{
    return m == create_mode::persistent_sequential || m == create_mode::ephemeral_sequential;
}

// Permission bits of an ACL entry (ZooKeeper's ZOO_PERM_*).
namespace perm {
inline constexpr std::int32_t read = 1, write = 2, create = 4, remove = 8, admin = 16, all = 31;
}

/// One ACL entry: who (scheme + id) may do what (perms).
struct acl_entry {
    std::int32_t perms = perm::all;  ///< what the entry allows: a combination of the perm:: bits
    std::string scheme = "world";  ///< the authentication scheme: "world", "auth", "digest", "ip", ...
    std::string id = "anyone";  ///< the identity within the scheme ("anyone" for world, "user:base64(sha1)" for digest)
    bool operator==(const acl_entry&) const = default;  ///< Member-wise equality.
};
using acl = std::vector<acl_entry>;

/// world:anyone may do everything (ZooKeeper's ZOO_OPEN_ACL_UNSAFE): the default.
inline acl open_acl_unsafe() { return {acl_entry{}}; }
/// Only the authenticated creator may do anything (ZOO_CREATOR_ALL_ACL); needs digest auth.
inline acl creator_all_acl() { return {acl_entry{perm::all, "auth", ""}}; }

/// What a watch reports when it fires.
enum class watch_event_type {
    created,          ///< the node was created (exists watch on a missing node)
    deleted,          ///< the node was deleted
    data_changed,     ///< the node's data changed
    children_changed, ///< a child was added or removed
};

/// What a one-shot watch reports when it fires.
struct watch_event {
    watch_event_type type{};  ///< what happened
    std::string path;  ///< the watched path, relative to the chroot
};

ZKCORO_API std::string_view to_string(watch_event_type t) noexcept;

/// Observable states of a client's session.
enum class session_state {
    connecting,  ///< no session yet (first connect, or a new session after expiry)
    connected,   ///< session established and connection up
    suspended,   ///< connection lost; the session may still be alive on the server
    expired,     ///< the server expired the session; a new one is being established
    closed,      ///< close() was called, or authentication failed: nothing more will happen
};

ZKCORO_API std::string_view to_string(session_state s) noexcept;

/// Severity of a log line (the C library's own lines are mapped onto these).
enum class log_level { error = 0, warn = 1, info = 2, debug = 3 };

ZKCORO_API std::string_view to_string(log_level l) noexcept;

}  // namespace zkcoro

#endif
