// zkcoro::async_request_revoke: ask the holder of a revocable lock to let go (Curator's
// Revoker.attemptRevoke).
#ifndef ZKCORO_REVOCATION_HPP
#define ZKCORO_REVOCATION_HPP

#include <zkcoro/client.hpp>
#include <zkcoro/detail/config.hpp>

#include <string>
#include <string_view>

namespace zkcoro {

namespace detail {
ZKCORO_API void start_request_revoke(client& c, std::string node_path, any_handler<void(error_code)> handler);
}  // namespace detail

/// The bytes a revocation request writes into a lock node (Curator's REVOKE_MESSAGE).
inline constexpr std::string_view revoke_message = "__REVOKE__";

/// Asks the holder (or a waiter) of the lock node `node_path` to let go: writes "__REVOKE__" into
/// the node, any version, like Curator's Revoker.attemptRevoke. A holder that made its lock
/// revocable (zkcoro's mutex_options::revocable, Curator's makeRevocable) is told and decides;
/// any other holder is left alone (its node's data changes, nothing else). Cooperative: nothing
/// is deleted. A node that no longer exists is not an error (the holder already let go).
/// Lock nodes are listed by mutex::async_participants (the holder first).
///
/// Handler signature: void(error_code). Errors: client_errc::invalid_path before anything is
/// sent; ZooKeeper's errors (ZNOAUTH...), connection loss. Cancellation: terminal and partial
/// (the write, once sent, may still happen).
template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code)) CompletionToken = detail::default_token>
auto async_request_revoke(client& c, std::string_view node_path, CompletionToken&& token = {})
{
    return asio::async_initiate<CompletionToken, void(error_code)>(
        detail::make_initiation(c.get_executor(),
                                [&c](auto handler, std::string node) {
                                    detail::start_request_revoke(c, std::move(node), std::move(handler));
                                }),
        token, std::string(node_path));
}

}  // namespace zkcoro

#endif
