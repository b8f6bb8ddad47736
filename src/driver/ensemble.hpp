// The ensemble's member list as ZooKeeper publishes it in /zookeeper/config (3.5+, dynamic
// reconfiguration), parsed (internal, pure: no I/O).
#ifndef ZKCORO_SRC_ENSEMBLE_HPP
#define ZKCORO_SRC_ENSEMBLE_HPP

#include "driver/connect_string.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zkcoro::detail {

struct ensemble_member {
    long id = 0;                // N of server.N
    host_port client;           // where clients connect
    bool observer = false;      // role "observer" (else a participant)
};

struct ensemble_config {
    std::vector<ensemble_member> members;  // in the order of the text; members that serve no
                                           // client (no client port) are left out
    std::string version;                   // the hex text after "version=", "" if absent
    int skipped = 0;                       // server lines without a client port
};

// Parses the data of /zookeeper/config: lines
//   server.N=host:quorumport:electionport[:role][;[clientaddress:]clientport]
//   version=HEX
// (other keys, such as group.N or weight.N, are ignored). A client address that is the wildcard
// (0.0.0.0, ::) or absent means the member's host. Hosts may be names, IPv4 addresses, or IPv6
// addresses (bracketed or not). On a malformed server line: nullopt, with `why` naming it.
std::optional<ensemble_config> parse_ensemble_config(std::string_view text, std::string* why);

}  // namespace zkcoro::detail

#endif
