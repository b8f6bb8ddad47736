// The order of a lock's queue (Curator's sorting rules) and what a listing of the queue reports.
#ifndef ZKCORO_QUEUE_ORDER_HPP
#define ZKCORO_QUEUE_ORDER_HPP

#include <zkcoro/detail/api.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zkcoro {

/// What a node in a lock's queue asks for.
enum class lock_mode {
    exclusive,  ///< a mutex node ("-lock-")
    read,       ///< the read side of a read-write lock ("__READ__")
    write,      ///< the write side of a read-write lock ("__WRIT__")
    lease,      ///< a semaphore lease ("-lease-")
    foreign,    ///< none of the recipe's markers: another recipe's or a user's node
};

/// One node in a lock's queue, as async_participants reports it (holders first).
struct participant {
    std::string name;             ///< e.g. "_c_<uuid>-lock-0000000042"
    std::string path;             ///< full path
    std::string data;             ///< what the holder stored (Curator: its IP address)
    std::int64_t session_id = 0;  ///< the node's ephemeral owner (0: persistent, never goes away)
    std::int64_t ctime = 0;       ///< creation time, ms since the epoch (server clock)
    std::int64_t czxid = 0;  ///< transaction that created the node
    lock_mode mode = lock_mode::exclusive;  ///< exclusive, read, write, lease, queued or foreign
    /// Holds the lock (or a lease) by the recipe's rule. A foreign node never holds, but it takes
    /// its place in Curator's order: a foreign node that sorts first blocks the lock for everyone.
    bool holds = false;
    /// The node's data could not be read (no READ permission in its ACL): `data` is empty; the
    /// session and times come from its Stat, which needs no permission.
    bool data_unreadable = false;
};

/// Sorting rule of Curator's lock recipes: the text after the last occurrence of `marker`
/// ("lock-"), or the whole name when the marker is absent. Compared byte-wise.
ZKCORO_API std::string_view sequence_key(std::string_view name, std::string_view marker) noexcept;

/// Sorts child names by sequence_key (stable: equal keys keep their order).
ZKCORO_API void sort_by_sequence(std::vector<std::string>& names, std::string_view marker);

/// Queue order of a read-write lock: by the text after the last "__READ__", else after the last
/// "__WRIT__", else the whole name; a write node sorts before a read node of the same sequence.
ZKCORO_API void sort_read_write(std::vector<std::string>& names);

}  // namespace zkcoro

#endif
