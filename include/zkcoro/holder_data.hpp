// The default data of zkcoro's lock nodes: who holds or waits, as parseable text.
//
//   host=<host> pid=<pid> program=<program>[ label=<label>][ parent=0x<session>]
//
// Space-separated key=value fields in this order; each value percent-encoded (every byte other
// than A-Z a-z 0-9 and . _ - : / @ + ~ as %XX, upper-case hex). A parser takes the fields it
// knows and skips others, so fields may be added. Curator's nodes hold its client's IP address
// (or whatever its application set): parse_holder_data tells them apart (nullopt).
// The label comes from client_config::holder_label; mutex_options::data replaces the whole text.
#ifndef ZKCORO_HOLDER_DATA_HPP
#define ZKCORO_HOLDER_DATA_HPP

#include <zkcoro/detail/api.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace zkcoro {

/// Who holds a lock, as zkcoro stores it in the lock node ("host=H pid=P program=NAME label=L").
struct holder_info {
    std::string host;     ///< gethostname()
    std::int64_t pid = 0;  ///< getpid()
    std::string program;  ///< the program's name (the last component of argv[0])
    std::string label;    ///< set by the application; empty: no field
    /// The session of a lock held around this process, on whose behalf it waits too (zklock run
    /// inside another zklock: its $ZKLOCK_SESSION_ID); 0: none, no field. The wait-for graph
    /// (zkcoro/scan.hpp) adds an edge from it, so that nested locks taken in two orders show
    /// their deadlock.
    std::int64_t parent_session = 0;
    bool operator==(const holder_info&) const = default;  ///< Member-wise equality.
};

/// This process's host, pid and program, with `label`.
ZKCORO_API holder_info this_process(std::string_view label = {});

/// The text above for `h`.
ZKCORO_API std::string format_holder_data(const holder_info& h);

/// The fields of a node's data in the format above; nullopt when it is not (no host= and pid=
/// fields, a bad pid or a bad %-escape): e.g. Curator's IP address, or an application's text.
ZKCORO_API std::optional<holder_info> parse_holder_data(std::string_view data);

}  // namespace zkcoro

#endif
