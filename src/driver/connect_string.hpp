// The connect string, parsed (internal): hosts with ports, and the chroot. Shared by check_config
// and by the driver, which resolves host names with Asio before the C library sees them.
#ifndef ZKCORO_SRC_CONNECT_STRING_HPP
#define ZKCORO_SRC_CONNECT_STRING_HPP

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zkcoro::detail {

struct host_port {
    std::string host;          // a name, an IPv4 address, or an IPv6 address (without brackets)
    std::uint16_t port = 0;
    bool numeric = false;      // an address: nothing to resolve
};

struct connect_spec {
    std::vector<host_port> hosts;
    std::string chroot;        // empty, or a valid path such as "/app"
};

// Parses "host:port[,host:port...][/chroot]". A host is a name (letters, digits, '-', '_', '.'),
// an IPv4 address, or an IPv6 address in brackets ("[::1]:2181"). On error: nullopt, with a
// sentence in `why` that names the offending entry.
std::optional<connect_spec> parse_connect_string(std::string_view text, std::string* why);

// "addr:port" as the C library reads it: it splits at the last ':', so an IPv6 address goes in
// without brackets.
std::string c_host_port(const std::string& address, std::uint16_t port);

}  // namespace zkcoro::detail

#endif
