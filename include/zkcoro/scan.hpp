// A whole tree of locks at a glance: every lock under a path, of every recipe (Curator's nodes
// too), with its holders and waiters by the rule the lock itself decides with; and the wait-for
// graph between sessions, whose cycles are deadlock candidates.
#ifndef ZKCORO_SCAN_HPP
#define ZKCORO_SCAN_HPP

#include <zkcoro/client.hpp>
#include <zkcoro/detail/api.hpp>
#include <zkcoro/detail/config.hpp>
#include <zkcoro/error.hpp>
#include <zkcoro/queue_order.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zkcoro {

/// The recipe a lock path was recognised as, from its children's names (Curator's layouts):
///   mutex         <path>/..lock-<seq>          (also a leader selector, and a semaphore's entry
///                                               queue when it is not under a semaphore)
///   read_write    <path>/..__READ__<seq>, ..__WRIT__<seq>
///   semaphore     <path>/leases/..lease-<seq>  and its entry queue <path>/locks/..lock-<seq>
///   leader_latch  <path>/..latch-<seq>
/// A path with several recipes' nodes is listed as the first of read_write, leader_latch, mutex
/// that it has; the other recipes' nodes are then foreign in its order (as the lock sees them).
enum class lock_kind { mutex, read_write, semaphore, leader_latch };

ZKCORO_API std::string_view to_string(lock_kind k) noexcept;

/// One lock path and its queue.
struct lock_info {
    std::string path;  ///< the lock's path
    lock_kind kind = lock_kind::mutex;  ///< its recipe
    /// Holders in queue order: a mutex's or latch's first node, a read-write lock's holding
    /// readers or writer, every lease of a semaphore (its size is not stored in ZooKeeper, so
    /// every lease node counts as held, as Curator counts them).
    std::vector<participant> holders;
    /// Waiters in queue order. A semaphore's waiters are the nodes of its entry queue (locks/).
    /// Foreign nodes (lock_mode::foreign) take their place here; one that sorts first blocks.
    std::vector<participant> waiters;
};

/// A child listing or read that failed under the root (other than the node having vanished,
/// which is skipped): e.g. ZNOAUTH on a subtree. The scan goes on without that subtree.
struct scan_problem {
    std::string path;  ///< the node whose listing or read failed
    error_code ec;  ///< why
};

/// What a scan of the locks under a root found.
struct scan_result {
    std::vector<lock_info> locks;         ///< sorted by path
    std::vector<scan_problem> problems;  ///< what could not be read (the scan went on without it)
    std::size_t requests = 0;             ///< requests sent (children listings and data reads)
    std::size_t nodes_listed = 0;         ///< children listings (nodes visited)
    std::size_t max_in_flight_seen = 0;   ///< the most requests outstanding at once
};

/// Options of a scan of the locks under a root.
struct scan_options {
    /// Requests outstanding at once; at least 1.
    std::size_t max_in_flight = 64;
};

/// One edge of the wait-for graph: a waiter's session waits for a holder's session on `lock`.
struct wait_edge {
    std::int64_t waiter_session = 0;  ///< the session that waits
    std::int64_t holder_session = 0;  ///< the session it waits for
    std::string lock;         ///< the lock path
    std::string waiter_node;  ///< the waiter's node path
    std::string holder_node;  ///< the holder's node path
    std::string waiter_data;  ///< the waiter node's data
    std::string holder_data;  ///< the holder node's data
};

/// A strongly connected set of two sessions or more: each waits, through the others, for itself.
struct wait_cycle {
    std::vector<std::int64_t> sessions;  ///< ascending
    std::vector<wait_edge> edges;        ///< the edges among them, ordered by lock path
};

/// The wait-for graph of a scan: for every mutex, read-write lock and semaphore, an edge from
/// each waiter's session to each holder's session (a waiter waits, directly or behind others in
/// the queue, for the holders to leave). Leader latches add none (waiting to lead blocks no
/// lock), nor do foreign nodes, persistent nodes (session 0), or an edge from a session to
/// itself (two tasks or threads of one client contending is normal; see README for what a
/// session cycle proves).
ZKCORO_API std::vector<wait_edge> wait_for_graph(const std::vector<lock_info>& locks);

/// The cycles of a wait-for graph (its strongly connected components of two sessions or more),
/// ordered by their smallest session id.
ZKCORO_API std::vector<wait_cycle> find_cycles(const std::vector<wait_edge>& edges);

namespace detail {
ZKCORO_API void start_scan(client& c, std::string root, scan_options opts,
                           any_handler<void(error_code, scan_result)> handler);
}  // namespace detail

/// Lists every lock under `root` (root included): one children listing per node visited, one
/// read per lock node; nodes whose names carry a lock marker are not descended into (ephemeral
/// nodes have no children). At most opts.max_in_flight requests are outstanding at once.
/// Nodes that vanish during the scan are skipped; other failures under the root are reported in
/// scan_result::problems. Errors: client_errc::invalid_path for a bad root (nothing is sent),
/// the root listing's error (e.g. zk_errc::no_node), and a lost session or connection anywhere
/// (client_errc::closed, session_expired, ZooKeeper's ZCONNECTIONLOSS...: retry the scan).
/// The listing is not a snapshot: each lock's queue is read at its own moment.
/// Handler: void(error_code, scan_result). Not cancellable (a bounded number of reads).
template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, scan_result)) CompletionToken = detail::default_token>
auto async_scan(client& c, std::string_view root, scan_options opts, CompletionToken&& token = {})
{
    return asio::async_initiate<CompletionToken, void(error_code, scan_result)>(
        detail::make_initiation(c.get_executor(),
                                [&c, r = std::string(root), opts](auto handler) {
                                    detail::start_scan(c, r, opts, std::move(handler));
                                }),
        token);
}

template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, scan_result)) CompletionToken = detail::default_token>
auto async_scan(client& c, std::string_view root, CompletionToken&& token = {})
{
    return async_scan(c, root, scan_options{}, std::forward<CompletionToken>(token));
}

}  // namespace zkcoro

#endif
