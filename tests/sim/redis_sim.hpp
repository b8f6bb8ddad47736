// The simulated Redis server and its network (issue 34, items 2 and 3: the Redis seam). The test
// program defines redisAsyncConnect(host, port): libzkcoro's call binds to it (-rdynamic), and it
// returns hiredis' own redisAsyncConnectUnix to the AF_UNIX socket that the simulated server of
// that port listens on (in /tmp). hiredis, our link (src/redis/link.cpp), the handshake, the
// client, the lock, its renewal and release run unchanged and talk RESP over a real socket; only
// the server and the network's timing are simulated. A unix socket's write lands in the peer's
// queue at once, so the scheduler (capi_sim.cpp's run_until, through sim_state::poll_hook) reads
// what the clients wrote at every step, on the simulation's one thread: a request arrives after
// a drawn latency (in order per connection), is applied to redis_world then, and its reply is
// written back after another drawn latency, when Asio's next poll (a real epoll_wait with no
// wait) finds the client's socket readable. Same seed, same run.
//
// Faults (redis_faults): the server closes a connection (what was on the wire applied or not, a
// coin each; replies on their way lost), an accepted connection closed at once (a failed
// connect), the script cache flushed, replies delayed, the server paused (nothing applied or answered for a while; keys
// expire meanwhile), and a failover to the replica, which lost the writes it had not received yet
// (the replica has each write after a drawn lag; WAIT answers from when it has them).
#ifndef ZKCORO_TESTS_SIM_REDIS_SIM_HPP
#define ZKCORO_TESTS_SIM_REDIS_SIM_HPP

#include "redis_world.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace zksim {

struct redis_faults {
    double drops_per_s = 0;       // each open connection closed by the server, on average, a second
    double drop_on_request = 0;   // chance that a request meets such a close on the wire
    double refuse_connect = 0;    // chance that an accepted connection is closed at once
    double delay_chance = 0;      // chance that a reply is delayed by up to max_delay_ms more
    std::int64_t max_delay_ms = 0;
    double pauses_per_s = 0;      // the server stops applying and answering, up to max_pause_ms
    std::int64_t max_pause_ms = 0;
    // The replica (world.replicas > 0) has each write within a drawn lag of 0..replica_lag_ms after
    // the master applied it (in order); WAIT answers from that. A failover promotes it: the writes
    // it did not have yet are lost, every connection is closed, the script cache is empty.
    double script_flushes_per_s = 0;  // SCRIPT FLUSH (an operator's): the next EVALSHA meets NOSCRIPT
    int replicas = 0;  // world.replicas: 0 (none) or 1
    std::int64_t replica_lag_ms = 0;
    double failovers_per_s = 0;
};

struct redis_counts {
    long connections = 0;         // accepted
    long refused = 0;             // accepted and closed at once
    long drops = 0;               // connections the server closed
    long applied_unanswered = 0;  // requests on the wire at a close that were applied
    long not_applied = 0;         // requests on the wire at a close that were not
    long delayed = 0;             // replies delayed
    long pauses = 0;
    long failovers = 0;
    long script_flushes = 0;
    long lost_writes = 0;         // writes the failovers lost
    long steps = 0;               // requests applied + replies and pushes delivered
};

// One simulated server on `port` (one per port; made after sim_reset, gone before the next).
class redis_sim {
public:
    explicit redis_sim(std::uint16_t port, redis_faults f = {});
    redis_sim(const redis_sim&) = delete;
    redis_sim& operator=(const redis_sim&) = delete;
    ~redis_sim();

    std::string url() const;
    std::size_t open_connections() const;
    // Stops the faults (the end of a run: the clients clean up undisturbed).
    void quiet();
    // Closes every connection now (a fault).
    void drop_all();
    // The model's clock set to the simulated one (done before every command it applies; call it
    // before reading world's keys from outside).
    void sync_clock();
    // A failover now (a fault; needs world.replicas > 0).
    void failover();

    redis_world world;
    redis_faults faults;
    redis_counts counts;
    const std::uint16_t port;

    struct conn;

private:
    friend struct redis_sim_access;
    bool poll();
    void accept_new();
    void read_from(const std::shared_ptr<conn>& c);
    void drain(const std::shared_ptr<conn>& c);
    void apply(const std::shared_ptr<conn>& c, const std::vector<std::string>& args);
    void send_down(const std::shared_ptr<conn>& c, std::string bytes);
    void drop(const std::shared_ptr<conn>& c);
    void schedule_drop(const std::shared_ptr<conn>& c);
    void schedule_pause();
    void schedule_failover();
    void schedule_script_flush();
    void replicate(const std::shared_ptr<conn>& c);
    bool wait_command(const std::shared_ptr<conn>& c, const std::vector<std::string>& args);

    std::string path_;
    int listen_fd_ = -1;
    int next_conn_ = 1;
    std::int64_t paused_until_ = 0;
    bool quiet_ = false;
    std::vector<std::shared_ptr<conn>> conns_;
    std::vector<std::int64_t> replicated_at_;  // when the replica has each write (ns)
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// The socket path of the simulated server on `port` (this process's).
std::string redis_socket_path(std::uint16_t port);

}  // namespace zksim

#endif
