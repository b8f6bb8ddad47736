// The pure part of the tree scan (internal): which recipe a listing shows, and a lock's queue in
// the lock's own order with the lock's own rule (engine/rules.hpp). No I/O: tests/unit checks it.
#ifndef ZKCORO_SRC_RECIPES_SCAN_RULES_HPP
#define ZKCORO_SRC_RECIPES_SCAN_RULES_HPP

#include <zkcoro/queue_order.hpp>
#include <zkcoro/scan.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zkcoro::detail {

// What a directory's children make of it.
enum class dir_kind { none, mutex, read_write, leader_latch, leases };

// A child whose name ends in a lock marker ("lock-", "__READ__", "__WRIT__", "latch-", "lease-")
// and a sequence number: a lock node, ephemeral in every recipe, so the scan does not list its
// children. ("zklock-test-1" only contains a marker: a plain node, listed.)
bool is_lock_node_name(std::string_view name) noexcept;

// The recipe of a directory from its children's names: read_write if any has __READ__ or
// __WRIT__, else leader_latch if any has "latch-", else leases if any has "lease-", else mutex
// if any has "lock-", else none.
dir_kind kind_of(const std::vector<std::string>& names) noexcept;

// The children of a directory of `kind` that take a place in its queue, in queue order: every
// lock node, and a foreign child (a plain node, a subdirectory) only where it sorts before a lock
// node, so that it blocks or delays someone (a persistent "0" before the holder). A plain child
// that sorts after every lock node waits for nothing and blocks nobody: not a participant. In a
// semaphore's leases directory every child counts (Curator counts them all as leases).
std::vector<std::string> queue_members(dir_kind kind, std::vector<std::string> names);

// Sorts `nodes` (the children of one directory, data read) by the order of `kind`, marks who
// holds by that recipe's rule and each node's mode, and splits them into holders and waiters
// (queue order kept). Leases: every lease node holds.
void order_queue(dir_kind kind, std::vector<participant> nodes, std::vector<participant>& holders,
                 std::vector<participant>& waiters);

}  // namespace zkcoro::detail

#endif
