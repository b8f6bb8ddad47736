#include "driver/connect_string.hpp"

#include <zkcoro/path.hpp>

#include <boost/asio/ip/address.hpp>

#include <fmt/format.h>

#include <charconv>

namespace zkcoro::detail {

namespace {

std::nullopt_t fail(std::string* why, std::string text)
{
    if (why)
        *why = std::move(text);
    return std::nullopt;
}

bool is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
           c == '.';
}

// Printable form of user text inside a message: control bytes escaped.
std::string shown(std::string_view s)
{
    std::string out;
    for (unsigned char c : s) {
        if (c < 0x20 || c == 0x7f)
            out += fmt::format("\\x{:02x}", c);
        else
            out += static_cast<char>(c);
    }
    return out;
}

}  // namespace

std::optional<connect_spec> parse_connect_string(std::string_view text, std::string* why)
{
    connect_spec spec;
    if (text.empty())
        return fail(why, "connect string is empty");
    // The chroot, if any, starts at the first '/'.
    std::string_view hosts = text;
    if (auto slash = text.find('/'); slash != std::string_view::npos) {
        hosts = text.substr(0, slash);
        auto chroot = text.substr(slash);
        if (auto p = check_path(chroot); !p.ok())
            return fail(why, "chroot: " + p.describe(chroot));
        if (chroot != "/")
            spec.chroot = std::string(chroot);
    }
    if (hosts.empty())
        return fail(why, "no host before the chroot");
    for (bool more = true; more;) {
        auto comma = hosts.find(',');
        more = comma != std::string_view::npos;
        auto entry = hosts.substr(0, comma);
        hosts = more ? hosts.substr(comma + 1) : std::string_view{};
        if (entry.empty())
            return fail(why, "empty host entry (two commas in a row, or a comma at an end)");
        host_port hp;
        std::string_view host, port_text;
        if (entry.front() == '[') {
            auto close = entry.find(']');
            if (close == std::string_view::npos)
                return fail(why, fmt::format("\"{}\": '[' without ']' (IPv6 addresses: [::1]:2181)", shown(entry)));
            host = entry.substr(1, close - 1);
            auto rest = entry.substr(close + 1);
            if (rest.empty() || rest.front() != ':')
                return fail(why, fmt::format("\"{}\" is not [address]:port", shown(entry)));
            port_text = rest.substr(1);
            // Hex digits, ':' and '.' (an embedded IPv4 address) only: the parser below would take
            // a scope ("%eth0") with any bytes after it, and stop at an embedded NUL.
            for (char c : host)
                if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' || c == '.'))
                    return fail(why, fmt::format("\"{}\": '{}' cannot appear in an IPv6 address (scoped addresses "
                                                 "are not supported)", shown(entry), shown(std::string_view(&c, 1))));
            boost::system::error_code ec;
            auto a = boost::asio::ip::make_address_v6(std::string(host), ec);
            if (ec)
                return fail(why, fmt::format("\"{}\": not an IPv6 address in brackets", shown(entry)));
            hp.host = a.to_string();
            hp.numeric = true;
        } else {
            auto colon = entry.rfind(':');
            if (colon == std::string_view::npos || colon == 0)
                return fail(why, fmt::format("\"{}\" is not host:port", shown(entry)));
            host = entry.substr(0, colon);
            port_text = entry.substr(colon + 1);
            if (host.find(':') != std::string_view::npos)
                return fail(why, fmt::format("\"{}\": an IPv6 address goes in brackets, e.g. [::1]:2181", shown(entry)));
            for (char c : host)
                if (!is_name_char(c))
                    return fail(why, fmt::format("\"{}\": '{}' cannot appear in a host name", shown(entry),
                                                 shown(std::string_view(&c, 1))));
            if (host.size() > 253)
                return fail(why, fmt::format("host name longer than 253 characters: \"{}...\"", shown(host.substr(0, 40))));
            boost::system::error_code ec;
            auto a = boost::asio::ip::make_address_v4(std::string(host), ec);
            hp.numeric = !ec;
            hp.host = hp.numeric ? a.to_string() : std::string(host);
        }
        unsigned port = 0;
        auto [end, pec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
        if (pec != std::errc{} || end != port_text.data() + port_text.size() || port == 0 || port > 65535)
            return fail(why, fmt::format("\"{}\": port must be a number from 1 to 65535", shown(entry)));
        hp.port = static_cast<std::uint16_t>(port);
        spec.hosts.push_back(std::move(hp));
    }
    return spec;
}

std::string c_host_port(const std::string& address, std::uint16_t port)
{
    return fmt::format("{}:{}", address, port);
}

}  // namespace zkcoro::detail
