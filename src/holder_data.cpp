// The default data of zkcoro's lock nodes (include/zkcoro/holder_data.hpp).
#include <zkcoro/holder_data.hpp>

#include <fmt/format.h>

#include <cerrno>  // program_invocation_short_name
#include <charconv>
#include <unistd.h>

namespace zkcoro {

namespace {

bool plain(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-' || c == ':' || c == '/' || c == '@' || c == '+' || c == '~';
}

std::string encode(std::string_view v)
{
    std::string out;
    for (unsigned char c : v) {
        if (plain(c))
            out += static_cast<char>(c);
        else
            out += fmt::format("%{:02X}", c);
    }
    return out;
}

int hex(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

std::optional<std::string> decode(std::string_view v)
{
    std::string out;
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (v[i] != '%') {
            out += v[i];
            continue;
        }
        if (i + 2 >= v.size())
            return std::nullopt;
        const int hi = hex(v[i + 1]), lo = hex(v[i + 2]);
        if (hi < 0 || lo < 0)
            return std::nullopt;
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
    }
    return out;
}

}  // namespace

holder_info this_process(std::string_view label)
{
    holder_info h;
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) == 0)
        h.host = host;
    h.pid = ::getpid();
    h.program = program_invocation_short_name;  // glibc: the last component of argv[0]
    h.label = std::string(label);
    return h;
}

std::string format_holder_data(const holder_info& h)
{
    std::string out = fmt::format("host={} pid={} program={}", encode(h.host), h.pid, encode(h.program));
    if (!h.label.empty())
        out += " label=" + encode(h.label);
    if (h.parent_session != 0)
        out += fmt::format(" parent=0x{:x}", static_cast<std::uint64_t>(h.parent_session));
    return out;
}

std::optional<holder_info> parse_holder_data(std::string_view data)
{
    holder_info h;
    bool host = false, pid = false;
    while (!data.empty()) {
        const auto space = data.find(' ');
        const std::string_view field = data.substr(0, space);
        data = space == std::string_view::npos ? std::string_view{} : data.substr(space + 1);
        const auto eq = field.find('=');
        if (eq == std::string_view::npos)
            return std::nullopt;
        const auto key = field.substr(0, eq);
        auto value = decode(field.substr(eq + 1));
        if (!value)
            return std::nullopt;
        if (key == "host") {
            h.host = std::move(*value);
            host = true;
        } else if (key == "pid") {
            const auto* b = value->data();
            const auto* e = b + value->size();
            auto [p, ec] = std::from_chars(b, e, h.pid);
            if (ec != std::errc{} || p != e || value->empty() || h.pid <= 0)
                return std::nullopt;
            pid = true;
        } else if (key == "program") {
            h.program = std::move(*value);
        } else if (key == "label") {
            h.label = std::move(*value);
        } else if (key == "parent") {
            // 0x<hex>; a malformed one is skipped (the field is advisory).
            std::uint64_t sid = 0;
            if (value->size() > 2 && value->starts_with("0x")) {
                const auto* b = value->data() + 2;
                const auto* e = value->data() + value->size();
                auto [p, ec] = std::from_chars(b, e, sid, 16);
                if (ec == std::errc{} && p == e)
                    h.parent_session = static_cast<std::int64_t>(sid);
            }
        }
    }
    if (!host || !pid)
        return std::nullopt;
    return h;
}

}  // namespace zkcoro
