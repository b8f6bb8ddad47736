// The lock queue protocol (internal; Curator's LockInternals): enter ZooKeeper's queue under a
// lock path with a protected ephemeral-sequential node and wait until the recipe's rule says
// that node holds.
#ifndef ZKCORO_SRC_ZOOKEEPER_LOCK_QUEUE_HPP
#define ZKCORO_SRC_ZOOKEEPER_LOCK_QUEUE_HPP

#include "engine/rules.hpp"

#include <zkcoro/client.hpp>

#include <boost/asio/awaitable.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace zkcoro::detail {

// What the queue needs to know about a recipe's nodes.
struct queue_spec {
    std::string path;       // the lock path (its children are the queue)
    std::string base_name;  // e.g. "lock-": the node is <path>/_c_<uuid>-<base_name><seq>
    std::string data;       // stored in the node
    std::function<void(std::vector<std::string>&)> sort;
    queue_rule rule;
    // Called with our node's path each time one is created (or found after a lost reply), e.g.
    // to watch it for revocation requests while it still queues.
    std::function<void(const std::string&)> on_created;
};

// Our node, holding.
struct queued_node {
    std::string path;
    node_stat stat;
    // The children watch of the listing that granted (when it left one): it fires on any change
    // of the queue since, our node's deletion included.
    zkcoro::watch queue_watch;
    // That listing showed other children than ours (false when granted by a deletion instead:
    // then nobody knows, and no queue_watch is given).
    bool others_queued = false;
    // An exists watch on our node, set while it waited and not fired (else empty): it fires when
    // the node is deleted or its data changes.
    zkcoro::watch own_watch;
};

// An empty node and no error: the deadline passed. On any unsuccessful end our node is deleted
// (in the background, from a task that does not share the caller's cancellation).
using queue_result = std::tuple<error_code, std::optional<queued_node>>;

// The first round trip of an entry into the queue (our node's create and the listing, pipelined),
// when the caller made it itself: the uncontended case is then decided with no coroutine.
struct queue_entry {
    std::string prefix;  // our protected name's "_c_<uuid>-"
    error_code create_ec;
    create_result created;
    error_code list_ec;
    children_result listed;
};

// A new protected name's prefix, "_c_<uuid>-".
std::string protected_prefix();
// The path to create under the lock `path` for an entry with `prefix` and a recipe's `base_name`
// (a sequential node's: the server appends the number).
std::string entry_path(std::string_view path, std::string_view prefix, std::string_view base_name);
// Our node, holding, when the entry's replies show that it holds at once by the recipe's `sort`
// and `rule` (sorts e.listed; takes e.created.path).
std::optional<queued_node> granted_at_entry(const std::function<void(std::vector<std::string>&)>& sort,
                                            const queue_rule& rule, queue_entry& e);
// Deletes the node an entry under the lock `path` made (or may have made: its create's reply was
// an error), in the background. For an entry given up before any walk.
void abandon_entry(client& zk, const std::string& path, const queue_entry& e);

// `alone`: whether this lock object found the queue empty last time (its guess that it will now).
// When it guesses so, the first listing leaves a children watch, which then covers our node's
// deletion at no extra request; a waiter that guessed wrong gets one stray event when the queue
// next changes, and guesses "contended" next time, so under contention no listing leaves one.
asio::awaitable<queue_result> queue_acquire(client& zk, const queue_spec& spec,
                                            std::chrono::steady_clock::time_point deadline,
                                            std::atomic<bool>& alone, std::optional<queue_entry> entered = {});

}  // namespace zkcoro::detail

#endif
