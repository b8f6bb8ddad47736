// The one door from the library's implementation into its public classes' private parts.
// Not for users: nothing here is stable API. Each public class that the implementation must build
// or look into names detail::access as its only friend, so that no public constructor takes a
// detail:: type and no implementation class is a friend of its own. Each function is defined
// beside the class it opens (client.cpp, engine/lease.cpp, watch.cpp, recipes/mutex.cpp).
#ifndef ZKCORO_DETAIL_ACCESS_HPP
#define ZKCORO_DETAIL_ACCESS_HPP

#include <zkcoro/detail/api.hpp>
#include <zkcoro/error.hpp>
#include <zkcoro/this_task.hpp>
#include <zkcoro/types.hpp>

#include <cstdint>
#include <memory>
#include <string_view>

namespace zkcoro {

class client;
class guard;
class leadership;
class mutex;
class watch;
class lock_ref;
class redis_client;

namespace detail {

class client_impl;
class lease;
class lock_object;
struct watch_state;
class redis_impl;
struct state_listener;

struct ZKCORO_API access {
    // A second handle on a client's session that does not close it when destroyed (for the
    // lock objects and leases built on that client).
    static client share(const client& c);
    // A handle on no session (the client member of a lock object on another backend).
    static client no_client();
    // Logs through the client's sink.
    static void log(const client& c, log_level level, std::string_view message);
    static std::string holder_label(const client& c);
    static bool detect_deadlocks(const client& c);
    // How many times c's connection to a server was established (any session). Read before a
    // request: the same count when a later event arrives means that the request's reply and the
    // event came over one connection, in the server's order (a reconnection re-registers the
    // watches, and the server then fires those that changed in an order of its own).
    static std::uint64_t connections(const client& c) noexcept;
    // Tells `l` of each change of c's session state while `l` lives (see state_listener).
    static void listen_state(const client& c, std::weak_ptr<state_listener> l);
    // Why c is closed for good: client_errc::auth_failed when the server refused its credentials,
    // else client_errc::closed (close() was called). What an operation that finds the session
    // state `closed` fails with, so that the cause is not lost on the way.
    static error_code closed_reason(const client& c);

    static guard make_guard(std::shared_ptr<lease> l, owner_id owner);
    static const std::shared_ptr<lease>& lease_of(const guard& g) noexcept;
    static leadership make_leadership(std::shared_ptr<lease> l);
    static watch make_watch(std::shared_ptr<watch_state> st);
    static mutex make_mutex(std::shared_ptr<lock_object> obj);
    static const std::shared_ptr<lock_object>& object_of(const mutex& m) noexcept;
    static const std::shared_ptr<redis_impl>& redis_of(const redis_client& c) noexcept;
};

}  // namespace detail
}  // namespace zkcoro

#endif
