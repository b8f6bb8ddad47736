// The rules that decide who holds a lock, as pure functions of a sorted listing of the lock's
// children (internal). No I/O: tests/unit/test_rules.cpp checks them without a server.
#ifndef ZKCORO_SRC_ENGINE_RULES_HPP
#define ZKCORO_SRC_ENGINE_RULES_HPP

#include <zkcoro/queue_order.hpp>

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zkcoro::detail {

// Node-name markers of Curator's recipes.
inline constexpr std::string_view lock_marker = "lock-";
inline constexpr std::string_view lease_marker = "lease-";
inline constexpr std::string_view latch_marker = "latch-";  // LeaderLatch
inline constexpr std::string_view read_marker = "__READ__";
inline constexpr std::string_view write_marker = "__WRIT__";

// The decision a recipe makes from the sorted queue: hold, or wait.
struct queue_decision {
    bool holds = false;
    std::size_t watch_index = 0;   // the node to watch when not holding
    bool deletion_grants = false;  // that node's deletion makes us a holder with no re-read
    bool watch_children = false;   // wait for a change of the children instead (semaphores)
    bool operator==(const queue_decision&) const = default;
};

// A recipe's rule: the decision for the node at `ours` of a sorted listing.
using queue_rule = std::function<queue_decision(const std::vector<std::string>& sorted, std::size_t ours)>;

// Mutex: the first holds; the others watch the node just before them.
queue_decision mutex_rule(const std::vector<std::string>& sorted, std::size_t ours);

// Read side: holds when no writer sorts before it, else watches the first such writer.
queue_decision read_rule(const std::vector<std::string>& sorted, std::size_t ours);

// Write side: holds when first. Unlike the mutex, the predecessor's deletion does not grant by
// itself: a downgrade inserts a read node at an older sequence, possibly before us.
queue_decision write_rule(const std::vector<std::string>& sorted, std::size_t ours);

// A listing of a read-write lock: each node by its own side's rule (write nodes by write_rule,
// the others by read_rule).
queue_decision read_write_rule(const std::vector<std::string>& sorted, std::size_t i);

// Semaphore lease: holds while the number of leases is at most `max_leases`, else waits for any
// change of the children.
queue_decision lease_rule(const std::vector<std::string>& sorted, std::size_t ours, int max_leases);

// A listing of a semaphore: the first `max_leases` lease nodes hold. (Equal to lease_rule for
// the newest node, which is where a waiter's node is: leases are created under the entry mutex.)
bool lease_holds(const std::vector<std::string>& sorted, std::size_t i, int max_leases) noexcept;

bool is_write_node(std::string_view name) noexcept;
bool is_read_node(std::string_view name) noexcept;

// A child with none of the recipe's markers (e.g. a node "0" a user made by hand).
bool is_foreign(std::string_view name, const std::vector<std::string>& markers) noexcept;

// The mode a node's name asks for, among the recipe's markers.
lock_mode mode_of(std::string_view name, const std::vector<std::string>& markers) noexcept;

// Where our node stands in a sorted listing; empty when it is not there (the session was lost).
std::optional<std::size_t> position_of(const std::vector<std::string>& sorted, std::string_view our_name) noexcept;

// Whether the node at `i` holds, for a listing: the rule says so and the node is the recipe's
// own (a foreign node blocks but never holds).
bool holds_at(const std::vector<std::string>& sorted, std::size_t i, const queue_rule& rule,
              const std::vector<std::string>& markers);

}  // namespace zkcoro::detail

#endif
