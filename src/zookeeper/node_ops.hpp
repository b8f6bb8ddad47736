// The ZooKeeper steps the lock engine repeats (internal), on the public client API: waiting for
// the connection, deleting a node for sure, finding a protected create, making the lock path.
#ifndef ZKCORO_SRC_ZOOKEEPER_NODE_OPS_HPP
#define ZKCORO_SRC_ZOOKEEPER_NODE_OPS_HPP

#include <zkcoro/client.hpp>

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <string>
#include <tuple>

namespace zkcoro::detail {

using steady_time = std::chrono::steady_clock::time_point;

// Waits until the client is connected, at most until `deadline`. False on timeout, session end
// or cancellation. Each round waits for a change of state, so it cannot spin.
asio::awaitable<bool> wait_connected(client& zk, steady_time deadline);
// Why wait_connected returned false, a cancellation aside: past the deadline (an empty code:
// timed out), else the client is closed for good, with its reason (close(), or credentials the
// server refused at a reconnection: tests/sim, "credentials are refused"), else `otherwise`.
error_code not_connected(const client& zk, steady_time deadline, error_code otherwise);

// Deletes a node until it is gone: retried across connection losses (a lost session took the
// ephemeral node with it). Gives up after 100 failed attempts or a minute without a connection,
// with the last error (the caller logs and reports it).
asio::awaitable<error_code> guaranteed_delete(client zk, std::string node);

// guaranteed_delete for a node nobody waits on: a failure is logged at error level, naming the
// node as `what` ("the lost lock node"), since the node then stays until its session ends.
asio::awaitable<void> delete_or_log(client zk, std::string node, std::string what);

// Finds the child that a create with the protected name prefix `prefix` made, if any, and checks
// that the current session owns it; a node left by an earlier session is deleted.
asio::awaitable<std::tuple<error_code, std::string, node_stat>> find_protected(client& zk, const std::string& parent,
                                                                                const std::string& prefix);

// Removes what an unfinished acquisition left: `node` when known, else the node its protected
// name made; then the parents it created (`created`, in creation order), deepest first, while
// they are empty (another participant's node keeps them).
asio::awaitable<void> abandon_node(client zk, std::string parent, std::string prefix, std::string node,
                                   std::vector<std::string> created = {});

// Creates `path` and its missing parents as container nodes; appends to `created` the ones this
// call made (ZooKeeper removes an empty container only once it has had a child, so a failed
// acquisition deletes them itself).
asio::awaitable<error_code> ensure_path(client& zk, const std::string& path, std::vector<std::string>* created = nullptr);

}  // namespace zkcoro::detail

#endif
