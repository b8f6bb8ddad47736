// A real network partition for the fault suite: two network namespaces of our own joined by a
// veth pair, and a relay from the far namespace to the ZooKeeper servers.
//
//   near namespace (holder)            far namespace (relay)          root namespace
//   198.51.100.1/24  <--- veth --->    198.51.100.2/24:PORT_i  ---->  127.0.0.1:SERVER_PORT_i
//
// Both ends of the veth live in our namespaces: nothing is added to the root namespace (whose
// interface uses 192.0.2.0/24). A holder runs in the near namespace (`ip netns exec`) with the
// connect string relay_connect_string(). The relay's listening sockets are created inside the far
// namespace (setns there, socket+bind+listen, setns back); its connections to the servers are
// made from the root namespace, where the servers listen on loopback. partition() sets the far
// end of the veth down: the holder's packets go nowhere, and no connection is closed by it.
//
// Names are unique per process (zkfault<pid>n / zkfault<pid>f, veths zkf<pid>a / zkf<pid>b).
// The destructor deletes both namespaces (which deletes the veth). remove_stale() deletes the
// namespaces of earlier runs whose process is gone (a run ended by SIGKILL cannot clean up).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace zkfault {

// Runs a command (no shell) and waits at most 20 s; returns its exit status, throws
// std::runtime_error with its output if it cannot be started. Used for `ip`.
int run_command(const std::vector<std::string>& argv, std::string* output = nullptr);

class netns_partition {
public:
    // Creates the namespaces, the veth and the addresses, and a relay for each server port.
    // Throws std::runtime_error (after undoing what was done) on failure.
    explicit netns_partition(const std::vector<std::uint16_t>& server_ports);
    ~netns_partition();
    netns_partition(const netns_partition&) = delete;
    netns_partition& operator=(const netns_partition&) = delete;

    const std::string& near_namespace() const { return near_; }
    // "198.51.100.2:P1,198.51.100.2:P2,...": the servers as seen from the near namespace.
    std::string relay_connect_string() const;

    void partition();  // far end of the veth down
    void heal();       // far end up again

    // Connections the relay has accepted so far.
    std::size_t relayed_connections() const;

    // The root namespace's IPv4 addresses, IPv4 routes and interface names (`ip -o -4 addr`,
    // `ip -4 route`, `ip -o link`, states left out): the suite compares it before, during and
    // after a partition to prove that nothing was added there.
    static std::string root_snapshot();

    // Deletes namespaces named by this scheme whose owning process no longer exists.
    static void remove_stale();
    // Best-effort deletion of this process's namespaces (the signal path uses it).
    static void remove_own() noexcept;

private:
    struct relay;
    void set_far_link(bool up);
    std::string near_, far_, veth_near_, veth_far_;
    std::unique_ptr<relay> relay_;
};

}  // namespace zkfault
