// Validation of ZooKeeper paths, done before anything is sent.
#ifndef ZKCORO_PATH_HPP
#define ZKCORO_PATH_HPP

#include <zkcoro/detail/api.hpp>
#include <zkcoro/error.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace zkcoro {

/// Result of check_path: ok() or the first rule broken and where.
struct ZKCORO_API path_problem {
    error_code ec;          ///< client_errc::invalid_path, or empty when the path is valid
    std::size_t position = 0;    ///< byte offset of the offending character
    std::string_view reason;     ///< e.g. "empty node name", "'.' is not a valid node name"
    /// True when the path is valid.
    bool ok() const noexcept { return !ec; }
    /// "invalid path \"/a//b\": empty node name at position 3"
    std::string describe(std::string_view path) const;
};

/// Checks a path by ZooKeeper's rules: absolute, no empty, "." or ".." node names, no trailing
/// '/' (except the root, or when `sequential` since the server appends the number), no NUL, no
/// control or reserved characters (U+0001-U+001F, U+007F-U+009F, U+D800-U+F8FF, U+FFF0-U+FFFF),
/// no character beyond U+FFFF (the server checks UTF-16, where those are surrogate pairs, e.g. an
/// emoji), and valid UTF-8. These are the rules of the server's PathUtils.validatePath.
ZKCORO_API path_problem check_path(std::string_view path, bool sequential = false) noexcept;

/// Joins a parent path and a child name ("/" + "a" -> "/a", "/x" + "a" -> "/x/a").
ZKCORO_API std::string join_path(std::string_view parent, std::string_view child);

/// The parent of a path ("/a/b" -> "/a", "/a" -> "/"); the root's parent is "/".
ZKCORO_API std::string_view parent_path(std::string_view path) noexcept;

/// The last component of a path ("/a/b" -> "b").
ZKCORO_API std::string_view node_name(std::string_view path) noexcept;

}  // namespace zkcoro

#endif
