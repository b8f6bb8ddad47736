// zkcoro::leader_latch: leader election on Curator's LeaderLatch layout.
#ifndef ZKCORO_LEADER_LATCH_HPP
#define ZKCORO_LEADER_LATCH_HPP

#include <zkcoro/client.hpp>
#include <zkcoro/detail/config.hpp>
#include <zkcoro/lock_options.hpp>
#include <zkcoro/queue_order.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zkcoro {

namespace detail {
struct access;
class lease;
struct latch_state;
ZKCORO_API void async_wait_lost_impl(std::shared_ptr<lease> l, any_handler<void(error_code)> handler);
ZKCORO_API void fenced_multi_impl(std::shared_ptr<lease> l, std::vector<multi_op> ops,
                                  any_handler<void(error_code, std::vector<multi_result>)> handler);
}  // namespace detail

/// Options of a leader_latch.
struct leader_latch_options {
    /// The participant id, stored as the latch node's data (Curator's LeaderLatch id, UTF-8).
    std::string id;
    /// When leadership counts as lost, as for a guard (see lost_policy).
    lost_policy policy = lost_policy::deadline;
    std::chrono::milliseconds safety_margin{0};  ///< For lost_policy::deadline: how long before the possible expiry leadership counts as lost.
};

/// One term of leadership, as a lease: the same lost signal and fencing as a guard. A view: it
/// does not end the term when destroyed (leader_latch::close does).
///
/// \par Thread safety
/// Distinct objects: safe. Shared objects: unsafe; lost(), fencing_token(), node_path() and
/// session_id() may be called from any thread.
class ZKCORO_API leadership {
public:
    /// The executor of the latch's client.
    using executor_type = asio::any_io_executor;

    leadership() = default;

    /// True for a term (false for a default-constructed one).
    bool valid() const noexcept { return lease_ != nullptr; }
    /// valid().
    explicit operator bool() const noexcept { return valid(); }

    /// The latch node's czxid x 64: strictly increasing across terms of this election.
    std::int64_t fencing_token() const noexcept;
    /// Our latch node, e.g. "/election/_c_<uuid>-latch-0000000007".
    const std::string& node_path() const noexcept;
    /// The session that owns our latch node.
    std::int64_t session_id() const noexcept;
    /// The executor of the latch's client.
    executor_type get_executor() const noexcept;

    /// True once this term is over: leadership lost (lost_policy) or the latch closed.
    bool lost() const noexcept;
    /// Receives terminal cancellation when leadership is lost (emitted on the client's executor):
    /// bind the leader's work to it, as with guard::lost_slot().
    asio::cancellation_slot lost_slot() noexcept;

    /// Completes with client_errc::lock_lost when leadership is lost, with operation_aborted when
    /// the latch is closed first. Handler signature: void(error_code). Cancellation: terminal,
    /// partial.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code)) CompletionToken = detail::default_token>
    auto async_wait_lost(CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code)>(
            detail::make_initiation(get_executor(),
                                    [l = lease_](auto handler) { detail::async_wait_lost_impl(l, std::move(handler)); }),
            token);
    }

    /// A transaction that commits only while this term's latch node exists (see guard::async_multi).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::vector<multi_result>))
                  CompletionToken = detail::default_token>
    auto async_multi(std::vector<multi_op> ops, CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code, std::vector<multi_result>)>(
            detail::make_initiation(get_executor(),
                                    [l = lease_](auto handler, std::vector<multi_op> o) {
                                        detail::fenced_multi_impl(l, std::move(o), std::move(handler));
                                    }),
            token, std::move(ops));
    }

private:
    friend struct detail::access;
    explicit leadership(std::shared_ptr<detail::lease> l) noexcept : lease_(std::move(l)) {}
    std::shared_ptr<detail::lease> lease_;
};

/// A participant in a leader election shared with Curator's LeaderLatch on the same path:
/// protected ephemeral-sequential nodes `<path>/_c_<uuid>-latch-<seq>` holding the participant
/// id; the first in order leads; each other node watches its predecessor.
///
/// The latch joins the election at start() (or the first await_leadership) and stays in it until
/// close(): after a lost term (the session expired, the node was deleted) it queues again with a
/// new node, like Curator's latch after a reconnection. Losing leadership is seen through the
/// term's lost signal (leadership::async_wait_lost), regaining it through await_leadership;
/// terms() counts the terms so far.
///
/// The client must outlive the latch. Destroying the latch closes it in the background.
///
/// \par Thread safety
/// Distinct objects: safe. Shared objects: safe (the latch's state is kept on a strand).
class ZKCORO_API leader_latch {
public:
    /// A latch at `path` (the election's node); nothing is sent until start.
    leader_latch(client& c, std::string path, leader_latch_options opts = {});
    leader_latch(const leader_latch&) = delete;
    leader_latch& operator=(const leader_latch&) = delete;
    ~leader_latch();

    /// The election's path.
    const std::string& path() const noexcept;
    /// Our participant id (leader_latch_options::id).
    const std::string& id() const noexcept;
    /// The executor of the client.
    client::executor_type get_executor() const noexcept;

    /// Joins the election (idempotent). Nothing to wait for: await_leadership tells the outcome.
    void start();
    /// True while this participant leads (the current term is not lost).
    bool is_leader() const noexcept;
    /// How many times this participant has become leader.
    std::uint64_t terms() const noexcept;

    /// Waits until this participant leads (starting the latch if needed), at most `timeout`:
    /// the current term, or an empty optional when the time ran out. Throws system_error with
    /// client_errc::closed when the latch is closed while waiting (or was), or its client;
    /// auth_failed when the server refused the client's credentials; invalid_path.
    asio::awaitable<std::optional<leadership>> await_leadership(
        std::chrono::steady_clock::duration timeout = std::chrono::steady_clock::duration::max());

    /// The operation behind await_leadership, for any completion token.
    /// Handler signature: void(error_code, std::optional<leadership>).
    /// Cancellation: terminal, partial (stops waiting; the latch stays in the election).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::optional<leadership>))
                  CompletionToken = detail::default_token>
    auto async_await_leadership(std::chrono::steady_clock::duration timeout, CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code, std::optional<leadership>)>(
            detail::make_initiation(get_executor(),
                                    [this](auto handler, std::chrono::steady_clock::duration t) {
                                        start_await(t, std::move(handler));
                                    }),
            token, timeout);
    }

    /// The election's participants in order, the leader first (participant::data is each one's id,
    /// participant::holds marks the leader), Curator's participants included.
    /// Handler signature: void(error_code, std::vector<participant>).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::vector<participant>))
                  CompletionToken = detail::default_token>
    auto async_participants(CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code, std::vector<participant>)>(
            detail::make_initiation(get_executor(), [this](auto handler) { start_participants(std::move(handler)); }),
            token);
    }

    /// Leaves the election: ends the current term (its lost signal is not emitted: the term
    /// completes async_wait_lost with operation_aborted), deletes our node, and completes waiting
    /// await_leadership calls with client_errc::closed. Completes when the latch has left the
    /// election: a leader's node is deleted by then; the node of a latch that still queued is
    /// deleted right after, in the background. Idempotent. Handler signature: void(error_code).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code)) CompletionToken = detail::default_token>
    auto async_close(CompletionToken&& token = {})
    {
        return asio::async_initiate<CompletionToken, void(error_code)>(
            detail::make_initiation(get_executor(), [this](auto handler) { start_close(std::move(handler)); }), token);
    }
    /// async_close in the background.
    void close();

private:
    void start_await(std::chrono::steady_clock::duration t,
                     detail::any_handler<void(error_code, std::optional<leadership>)> handler);
    void start_participants(detail::any_handler<void(error_code, std::vector<participant>)> handler);
    void start_close(detail::any_handler<void(error_code)> handler);

    std::shared_ptr<detail::latch_state> state_;
};

}  // namespace zkcoro

#endif
