// Test support: a fault-injecting TCP proxy on loopback.
//
// Listens on 127.0.0.1:0 and forwards every accepted connection to a target
// on loopback. Runs its own io_context on its own thread; every control
// method may be called from any other thread and returns once the change
// has taken effect on the proxy's thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace zktest {

class tcp_proxy {
public:
    // How cut() closes client connections.
    enum class cut_mode {
        fin,    // orderly close: the client reads EOF
        reset,  // SO_LINGER 0: the client gets ECONNRESET
    };

    // Target must be a loopback address ("127.0.0.1", "localhost", "::1").
    tcp_proxy(std::string target_host, std::uint16_t target_port);
    ~tcp_proxy();
    tcp_proxy(const tcp_proxy&) = delete;
    tcp_proxy& operator=(const tcp_proxy&) = delete;

    std::uint16_t port() const;
    std::string address() const;  // "127.0.0.1:PORT"

    // Closes every open connection (both sides) now; new ones are still accepted.
    void cut(cut_mode mode = cut_mode::fin);

    // On: sockets stay open but no byte is forwarded either way (bytes read
    // are dropped); new connections are accepted but not connected upstream.
    // Off: forwarding resumes for new bytes (dropped ones are not replayed),
    // and connections accepted while on are closed, since their upstream
    // never saw them.
    void set_blackhole(bool on);

    // On: new connections are accepted and closed at once with RST (the
    // server looks down). Open connections are not affected.
    void set_refuse(bool on);

    // Every forwarded chunk is held back for d after it was read (0 = off).
    void set_delay(std::chrono::milliseconds d);

    // The connections open now stop passing the server's bytes to the client (they are
    // dropped), while the client's bytes still reach the server: a request sent from now on is
    // carried out but its reply is lost, which no delay can promise. Connections accepted
    // later are not affected; cut() ends the muted ones.
    void mute_replies();

    // The next connection accepted passes the server's first `bytes` bytes to the client, then
    // drops the rest as mute_replies() does. ZooKeeper's connect response is 41 bytes: the client
    // has a session, and nothing the server says after it (an auth reply, a request's reply)
    // arrives. Later connections are not affected.
    void mute_replies_after(std::size_t bytes);

    std::size_t accepted() const;          // connections accepted so far (refused ones too)
    std::size_t open_connections() const;  // connections currently open

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace zktest
