#include <zkcoro/error.hpp>
#include <zkcoro/path.hpp>

#include <fmt/format.h>

#include <cstdint>
#include <cstring>

namespace zkcoro {
namespace {

path_problem bad(std::size_t pos, std::string_view why) noexcept
{
    return {make_error_code(client_errc::invalid_path), pos, why};
}

// Decodes one UTF-8 sequence at s[i]; returns its length, or 0 if malformed.
std::size_t decode_utf8(std::string_view s, std::size_t i, char32_t& cp) noexcept
{
    auto b = static_cast<unsigned char>(s[i]);
    std::size_t len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > s.size())
        return 0;
    cp = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    for (std::size_t k = 1; k < len; ++k) {
        auto c = static_cast<unsigned char>(s[i + k]);
        if ((c >> 6) != 0x2)
            return 0;
        cp = (cp << 6) | (c & 0x3F);
    }
    // Reject overlong forms and values beyond Unicode.
    static constexpr char32_t min_for_len[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_for_len[len] || cp > 0x10FFFF)
        return 0;
    return len;
}

// Whether every byte of `s` is printable ASCII (0x20 to 0x7E), eight bytes at a time: the common
// path, which then needs no character-by-character check.
bool printable_ascii(std::string_view s) noexcept
{
    constexpr std::uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    std::size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
        std::uint64_t x;
        std::memcpy(&x, s.data() + i, 8);
        const std::uint64_t below = (x - ones * 0x20) & ~x & highs;  // a byte below 0x20
        const std::uint64_t d = x ^ (ones * 0x7F);
        const std::uint64_t del = (d - ones) & ~d & highs;           // a byte 0x7F
        if ((x & highs) | below | del)                                // or one of 0x80 and above
            return false;
    }
    for (; i < s.size(); ++i)
        if (auto b = static_cast<unsigned char>(s[i]); b < 0x20 || b >= 0x7F)
            return false;
    return true;
}

}  // namespace

std::string path_problem::describe(std::string_view path) const
{
    if (ok())
        return fmt::format("valid path \"{}\"", path);
    return fmt::format("invalid path \"{}\": {} at position {}", path, reason, position);
}

path_problem check_path(std::string_view path, bool sequential) noexcept
{
    if (path.empty())
        return bad(0, "empty path");
    if (path[0] != '/')
        return bad(0, "path must start with '/'");
    if (path.size() == 1)
        return {};
    if (path.back() == '/' && !sequential)
        return bad(path.size() - 1, "trailing '/'");
    // The node name from name_start to i (a '/' or the end).
    auto check_name = [&](std::size_t name_start, std::size_t i) -> path_problem {
        auto name = path.substr(name_start, i - name_start);
        // A trailing '/' of a sequential path is where the server appends the number.
        bool sequential_tail = sequential && i == path.size() && name.empty();
        if (name.empty() && !sequential_tail && i != path.size())
            return bad(i, "empty node name");
        if (name == ".")
            return bad(name_start, "'.' is not a valid node name");
        if (name == "..")
            return bad(name_start, "'..' is not a valid node name");
        return {};
    };
    if (printable_ascii(path)) {
        // The common case: a name can be wrong only by being empty, "." or "..", each seen at the
        // '/' before it (one memchr per name; the trailing '/' was settled above).
        const char* const p = path.data();
        const char* const end = p + path.size();
        for (const char* s = p; (s = static_cast<const char*>(std::memchr(s, '/', end - s))) != nullptr;) {
            ++s;  // where the name starts
            const auto at = static_cast<std::size_t>(s - p);
            const auto left = static_cast<std::size_t>(end - s);
            if (left == 0)
                break;  // a sequential path's trailing '/'
            if (*s == '/')
                return bad(at, "empty node name");
            if (*s == '.' && (left == 1 || s[1] == '/'))
                return bad(at, "'.' is not a valid node name");
            if (*s == '.' && s[1] == '.' && (left == 2 || s[2] == '/'))
                return bad(at, "'..' is not a valid node name");
        }
        return {};
    }
    std::size_t name_start = 1;
    for (std::size_t i = 1; i <= path.size();) {
        if (i == path.size() || path[i] == '/') {
            if (auto p = check_name(name_start, i); !p.ok())
                return p;
            name_start = i + 1;
            ++i;
            continue;
        }
        // Printable ASCII other than '/' (handled above): valid, the common case.
        if (auto b = static_cast<unsigned char>(path[i]); b >= 0x20 && b < 0x7F) {
            ++i;
            continue;
        }
        char32_t cp = 0;
        std::size_t len = decode_utf8(path, i, cp);
        if (len == 0)
            return bad(i, "invalid UTF-8");
        if (cp == 0)
            return bad(i, "NUL character");
        if ((cp > 0 && cp < 0x20) || (cp >= 0x7F && cp <= 0x9F))
            return bad(i, "control character");
        if ((cp >= 0xD800 && cp <= 0xF8FF) || (cp >= 0xFFF0 && cp <= 0xFFFF))
            return bad(i, "reserved character");
        // The server checks the path as Java's UTF-16: a character beyond U+FFFF (an emoji) is a
        // surrogate pair there, in the refused range U+D800-U+F8FF.
        if (cp > 0xFFFF)
            return bad(i, "character beyond U+FFFF (ZooKeeper refuses them)");
        i += len;
    }
    return {};
}

std::string join_path(std::string_view parent, std::string_view child)
{
    std::string r;
    r.reserve(parent.size() + 1 + child.size());
    r += parent;
    if (r.empty() || r.back() != '/')
        r += '/';
    r += child;
    return r;
}

std::string_view parent_path(std::string_view path) noexcept
{
    auto pos = path.rfind('/');
    if (pos == std::string_view::npos || pos == 0)
        return "/";
    return path.substr(0, pos);
}

std::string_view node_name(std::string_view path) noexcept
{
    // memrchr, not rfind: string_view::rfind goes back a byte at a time (about 300 instructions
    // for a lock node's path, on every grant).
    if (path.empty())
        return path;
    const auto* slash = static_cast<const char*>(::memrchr(path.data(), '/', path.size()));
    return slash ? path.substr(static_cast<std::size_t>(slash - path.data()) + 1) : path;
}

}  // namespace zkcoro
