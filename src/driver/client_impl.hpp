// Internals of zkcoro::client: the driver that runs the single-threaded ZooKeeper C client
// inside an Asio executor, the registry of pending operations and watches, and the session.
#ifndef ZKCORO_SRC_CLIENT_IMPL_HPP
#define ZKCORO_SRC_CLIENT_IMPL_HPP

#include <zkcoro/client_config.hpp>
#include <zkcoro/error.hpp>
#include <zkcoro/types.hpp>

#include "session/session_fsm.hpp"

#include "async/op_state.hpp"
#include "async/recycling_map.hpp"
#include "async/state_listener.hpp"
#include "driver/connect_string.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/any_completion_executor.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <zookeeper/zookeeper.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

namespace zkcoro::detail {

// The one lock that serialises every call into the C library, for every handle in the process
// (its request-id counter and log buffers are global and not atomic). It also guards every
// client_impl's state. Recursive: C callbacks run inside calls made with it held.
std::recursive_mutex& zk_mutex() noexcept;

class client_impl;
struct ensemble_read;  // driver/ensemble.cpp

// The steady clock in nanoseconds, the unit of client_impl::last_heard_ns: mark_heard stamps it,
// the pinger (driver/failover.cpp) measures the silence since.
inline std::int64_t now_ns() noexcept
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// Holds zk_mutex; when the outermost holder on this thread lets go, log lines collected while it
// was held are handed to the client's sink, with no lock held.
class zk_guard {
public:
    explicit zk_guard(client_impl* self);
    ~zk_guard();
    zk_guard(const zk_guard&) = delete;
    zk_guard& operator=(const zk_guard&) = delete;

private:
    std::unique_lock<std::recursive_mutex> lock_;
    client_impl* self_;
    client_impl* prev_;
};

// A request the C library holds, as its `data` pointer, until it calls back (it always does, with
// ZCLOSING at the latest): the operation it completes, the client it went through, and the links
// of that client's registry of pending requests (guarded by zk_mutex).
struct pending_request {
    std::shared_ptr<op_base> op;
    client_impl* impl = nullptr;
    pending_request* prev = nullptr;
    pending_request* next = nullptr;
    bool linked = false;

    // One per request: in a recycled block (async/pool.hpp).
    static void* operator new(std::size_t n) { return block_cache::allocate(n); }
    static void operator delete(void* p, std::size_t n) noexcept { block_cache::deallocate(p, n); }
};

// The shared state of a watch handle.
struct watch_state {
    std::mutex m;
    bool fired = false;
    error_code ec;
    watch_event event;
    std::shared_ptr<op_state<watch_event>> waiter;
    asio::any_io_executor fallback_ex;

    // Records the outcome and wakes the waiter, if any. Thread-safe.
    void deliver(error_code e, watch_event ev);
};

class client_impl : public std::enable_shared_from_this<client_impl> {
public:
    client_impl(asio::any_io_executor ex, client_config cfg);
    ~client_impl();

    asio::any_io_executor executor;
    client_config cfg;

    // Entry points from client (each takes zk_mutex).
    void connect(std::shared_ptr<op_state<>> op);
    void close(std::shared_ptr<op_state<>> op);
    void wait_state(session_state known, std::shared_ptr<op_state<session_state>> op);
    void listen_state(std::weak_ptr<state_listener> l);
    error_code closed_reason();  // closed_by_, else client_errc::closed

    // Submits a request through `submit` (called with the lock held and the live handle), links
    // the op into the registry and re-evaluates the socket interest. Fails the op at once when
    // the client is closed or not started.
    void submit(const std::shared_ptr<op_base>& op, const std::function<int(zhandle_t*, void*)>& submit);

    // Called from C callbacks (lock held): unlinks an op from the registry.
    void unlink(pending_request* r) noexcept;
    // Registers a watch for `path` of the given kind (lock held).
    void add_watch(bool child, const std::string& path, std::shared_ptr<watch_state> w);
    // Deletes a node that an abandoned create made; retried after reconnection (lock held).
    void cleanup_node(std::string path);

    // Log through the sink (buffered while the lock is held, emitted after).
    void log(log_level level, std::string message);
    void flush_log();

    // Observers (atomics, no lock).
    std::atomic<session_state> state_atomic{session_state::connecting};
    std::atomic<std::int64_t> last_heard_ns{0};
    std::atomic<std::int64_t> negotiated_timeout_ms{0};
    std::atomic<std::uint64_t> generation_atomic{0};
    std::atomic<std::uint64_t> requests_sent{0};
    std::atomic<std::uint64_t> watch_events{0};
    std::atomic<std::uint64_t> connections{0};  // connections established (access::connections)
    std::atomic<std::uint64_t> ensemble_changes{0};  // member lists learnt from /zookeeper/config

    // The addresses ("addr:port") the C library connects to: the connect string's, or the
    // ensemble's once followed (driver/ensemble.cpp).
    std::vector<std::string> servers() const;

    session_credentials credentials() const;
    std::string connected_server() const;

    // C library entry points.
    static void watcher_thunk(zhandle_t* zh, int type, int state, const char* path, void* ctx);
    static void log_thunk(const char* message);

    std::vector<std::pair<log_level, std::string>> log_buffer;  // guarded by zk_mutex
    ACL_vector acl_vector{};                                    // the default ACL, C form

    // The chroot of the connect string ("" if none), and whether async_connect found it.
    const std::string& chroot() const noexcept { return spec_.chroot; }
    std::atomic<bool> chroot_verified{false};

private:
    void begin_handle();
    void on_resolved();
    void start_handle(const std::string& hosts);
    void rearm();
    void start_wait(bool write);
    void on_ready(std::uint64_t gen, int events, const error_code& ec);
    void on_timer(std::uint64_t gen, const error_code& ec);
    void process(int events);
    void drop_socket();
    void on_session_event(int state);
    void on_watch_event(int type, const char* path);
    void apply(const session_action& a);
    void fail_pending(error_code ec);
    void retire_handle(std::function<void(int)> done);
    void mark_heard() noexcept;

    // Failover (driver/failover.cpp): our own ping, and the choice of the next member.
    void start_pinger();
    void on_ping_timer(std::uint64_t gen, const error_code& ec);
    void steer_next_server();
    void note_attempt(int interest_rc);
    void on_established();

    // Following the ensemble (driver/ensemble.cpp): /zookeeper/config read with a watch at each
    // connection and each change, its member list resolved, and handed to the library.
    void read_ensemble();
    void on_ensemble_read(int rc, std::string_view data);
    void on_ensemble_resolved(std::vector<std::string> addresses, std::string version, std::string summary);
    void apply_pending_servers();
    void leave_if_not_member();
    std::string connected_address() const;
    void detach_ensemble_read() noexcept;  // before the handle goes to the closer
    friend struct ensemble_read;

    zhandle_t* zh_ = nullptr;
    session_fsm fsm_;
    bool started_ = false;
    bool closed_ = false;
    // Why the client closed itself, when not by close() (credentials refused): requests made
    // after it fail with that, not with client_errc::closed.
    error_code closed_by_;
    bool need_recreate_ = false;
    bool need_release_ = false;
    error_code config_error_;

    // The parsed connect string. Host names are resolved with Asio before each handle is made
    // (the C library would call a blocking getaddrinfo): at the first connect and after expiry.
    connect_spec spec_;
    asio::ip::tcp::resolver resolver_;
    asio::steady_timer resolve_retry_;
    struct resolution {
        std::vector<std::vector<std::string>> addresses;  // per host, "addr:port" for the C library
        std::vector<std::string> failures;                 // "host: reason"
        std::size_t pending = 0;
    };
    std::shared_ptr<resolution> resolving_;

    // The socket as the C library has it, watched through our own dup of its fd.
    asio::posix::stream_descriptor desc_;
    dev_t sock_dev_ = 0;
    ino_t sock_ino_ = 0;
    int lib_fd_ = -1;
    // Bumped by every session event: the library only replaces its socket on a path that
    // reports one (a lost connection, then a new one), so while connected with no event since
    // the last check, the same fd number is the same socket and needs no fstat.
    std::uint64_t session_events_ = 0;
    std::uint64_t socket_checked_at_ = ~std::uint64_t{0};
    std::uint64_t desc_gen_ = 0;
    bool read_pending_ = false;
    bool write_pending_ = false;

    // Failover. ZOOKEEPER-2466: after a failed connection the C library steps twice through its
    // list of addresses (handle_error, then zookeeper_interest), so with an even count it never
    // visits half of them. Before the library picks its next address we step it round once
    // more (server_count_ - 1 steps), so that it moves by one: every member in turn.
    std::size_t server_count_ = 0;   // addresses in the list the library has
    bool established_ = false;       // this handle had a session (the library left its initial mode)
    bool steered_ = false;           // the failure since the last attempt is already corrected
    std::string attempt_;            // the address of the last attempt seen ("" unknown)
    int in_library_ = 0;             // inside zookeeper_interest / zookeeper_process
    asio::steady_timer ping_timer_;
    std::uint64_t ping_gen_ = 0;
    std::int64_t ping_sent_ns_ = 0;  // our ping in flight since then (0: none)

    // The ensemble as followed (driver/ensemble.cpp). servers_in_use_: what the library has;
    // servers_pending_: a newer list, handed to the library before it picks its next address
    // (zoo_set_servers while it has no connection: see apply_pending_servers).
    std::vector<std::string> servers_in_use_;
    std::vector<std::string> servers_pending_;
    std::vector<std::string> ensemble_addresses_;  // the last list learnt (for a new handle)
    std::string ensemble_version_;                 // its version ("" none yet)
    std::chrono::steady_clock::time_point pending_since_{};
    ensemble_read* ensemble_read_ = nullptr;  // in flight on zh_; detached when retired
    std::uint64_t ensemble_resolve_gen_ = 0;
    std::size_t forced_moves_ = 0;  // leave_if_not_member's moves in a row

    asio::steady_timer timer_;
    std::uint64_t timer_gen_ = 0;
    bool timer_pending_ = false;
    std::chrono::steady_clock::time_point timer_deadline_{};

    // Registry of pending operations (intrusive list).
    pending_request* ops_head_ = nullptr;
    // Bumped by every request unlinked (answered, or failed) and every watch event seen: whether
    // a zookeeper_process call read a packet that completed something (the read drain).
    std::uint64_t delivered_ = 0;
    // By path. Each keeps the entry of the last path whose watches fired for the next path
    // watched: a lock's children watch, set and fired every cycle, costs no allocation.
    using watch_map = recycling_map<std::string, std::vector<std::shared_ptr<watch_state>>>;
    watch_map data_watches_;
    watch_map child_watches_;

    struct connect_waiter {
        std::shared_ptr<op_state<>> op;
        std::shared_ptr<asio::steady_timer> timer;
    };
    std::vector<connect_waiter> connect_waiters_;
    std::vector<std::pair<session_state, std::shared_ptr<op_state<session_state>>>> state_waiters_;
    std::vector<std::weak_ptr<state_listener>> state_listeners_;  // expired ones pruned as they are met
    std::vector<std::shared_ptr<op_state<>>> close_waiters_;
    std::vector<std::string> cleanup_paths_;

    std::vector<ACL> acl_entries_;
};

// Converts the C library's Stat.
zkcoro::node_stat to_stat(const Stat* s) noexcept;

}  // namespace zkcoro::detail

#endif
