// Fuzz target for check_path and the path helpers. The input is the path itself, so the seed
// corpus is plain text.
//
// Properties checked on every input, in both modes (sequential or not):
// - the result is either ok() with no error, or client_errc::invalid_path with a reason and a
//   position inside the path, at the character the reason names;
// - an accepted path starts with '/', has no empty, "." or ".." node name and no NUL byte, is
//   valid UTF-8, and ends with '/' only when it is the root or sequential;
// - the two modes differ only about a trailing '/';
// - an accepted path splits into parent_path and node_name, which join back into it, and its
//   parent and its children with a plain name are accepted too.
#include "fuzz_check.hpp"

#include <zkcoro/error.hpp>
#include <zkcoro/path.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace {

// True when s is well-formed UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF).
// Written from the Unicode table of well-formed byte sequences, independently of src/path.cpp.
bool well_formed_utf8(std::string_view s)
{
    std::size_t i = 0;
    while (i < s.size()) {
        auto b0 = static_cast<unsigned char>(s[i]);
        auto at = [&](std::size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0x100u; };
        auto in = [](unsigned v, unsigned lo, unsigned hi) { return v >= lo && v <= hi; };
        if (b0 <= 0x7F) {
            i += 1;
        } else if (in(b0, 0xC2, 0xDF) && in(at(1), 0x80, 0xBF)) {
            i += 2;
        } else if (b0 == 0xE0 && in(at(1), 0xA0, 0xBF) && in(at(2), 0x80, 0xBF)) {
            i += 3;
        } else if ((in(b0, 0xE1, 0xEC) || in(b0, 0xEE, 0xEF)) && in(at(1), 0x80, 0xBF) && in(at(2), 0x80, 0xBF)) {
            i += 3;
        } else if (b0 == 0xED && in(at(1), 0x80, 0x9F) && in(at(2), 0x80, 0xBF)) {
            i += 3;
        } else if (b0 == 0xF0 && in(at(1), 0x90, 0xBF) && in(at(2), 0x80, 0xBF) && in(at(3), 0x80, 0xBF)) {
            i += 4;
        } else if (in(b0, 0xF1, 0xF3) && in(at(1), 0x80, 0xBF) && in(at(2), 0x80, 0xBF) && in(at(3), 0x80, 0xBF)) {
            i += 4;
        } else if (b0 == 0xF4 && in(at(1), 0x80, 0x8F) && in(at(2), 0x80, 0xBF) && in(at(3), 0x80, 0xBF)) {
            i += 4;
        } else {
            return false;
        }
    }
    return true;
}

// The properties of one result, whatever the path.
void check_result(std::string_view path, bool sequential, const zkcoro::path_problem& p)
{
    FUZZ_CHECK(p.ok() == !p.ec);
    std::string text = p.describe(path);  // must not crash, whatever the bytes
    if (!p.ok()) {
        FUZZ_CHECK(p.ec == zkcoro::client_errc::invalid_path);
        FUZZ_CHECK(!p.reason.empty());
        FUZZ_CHECK(path.empty() ? p.position == 0 : p.position < path.size());
        FUZZ_CHECK(text.find(p.reason) != std::string::npos);
        // The position points at what the reason names (for the reasons known when this was
        // written; a reworded reason is only held to the checks above).
        auto at = [&](std::size_t k) { return k < path.size() ? path[k] : '\0'; };
        if (p.reason == "empty node name")
            FUZZ_CHECK(at(p.position) == '/' && p.position > 0 && at(p.position - 1) == '/');
        else if (p.reason == "trailing '/'")
            FUZZ_CHECK(!sequential && p.position == path.size() - 1 && at(p.position) == '/');
        else if (p.reason == "'.' is not a valid node name" || p.reason == "'..' is not a valid node name")
            FUZZ_CHECK(p.position > 0 && at(p.position - 1) == '/' && at(p.position) == '.');
        else if (p.reason == "NUL character")
            FUZZ_CHECK(at(p.position) == '\0');
        else if (p.reason == "invalid UTF-8" || p.reason == "reserved character")
            FUZZ_CHECK((static_cast<unsigned char>(at(p.position)) & 0x80) != 0);
        else if (p.reason == "path must start with '/'")
            FUZZ_CHECK(p.position == 0 && at(0) != '/');
        return;
    }
    FUZZ_CHECK(!path.empty() && path.front() == '/');
    FUZZ_CHECK(path.find('\0') == std::string_view::npos);
    FUZZ_CHECK(well_formed_utf8(path));
    if (path.size() > 1 && path.back() == '/')
        FUZZ_CHECK(sequential);
    // No empty, "." or ".." node name before the end (a sequential path may end in '/').
    std::string_view rest = path.substr(1);
    while (!rest.empty()) {
        auto slash = rest.find('/');
        auto name = rest.substr(0, slash);
        FUZZ_CHECK(name != "." && name != "..");
        FUZZ_CHECK(!name.empty());
        rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    std::string_view path(reinterpret_cast<const char*>(data), size);
    auto plain = zkcoro::check_path(path, false);
    auto sequential = zkcoro::check_path(path, true);
    check_result(path, false, plain);
    check_result(path, true, sequential);

    // The sequential mode only relaxes the rule about a trailing '/'.
    if (plain.ok())
        FUZZ_CHECK(sequential.ok());
    if (sequential.ok() && (path.size() == 1 || path.back() != '/'))
        FUZZ_CHECK(plain.ok());

    if (plain.ok() && path != "/") {
        auto parent = zkcoro::parent_path(path);
        auto name = zkcoro::node_name(path);
        FUZZ_CHECK(zkcoro::join_path(parent, name) == path);
        FUZZ_CHECK(zkcoro::check_path(parent).ok());
        FUZZ_CHECK(!name.empty() && name.find('/') == std::string_view::npos);
    }
    if (plain.ok()) {
        // A child with a plain ASCII name is valid under any valid path, the root included.
        auto child = zkcoro::join_path(path, "child-0000000001");
        FUZZ_CHECK(zkcoro::check_path(child).ok());
        FUZZ_CHECK(zkcoro::parent_path(child) == path);
    }
    return 0;
}
