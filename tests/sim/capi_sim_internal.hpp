// Inside the simulated C client (capi_sim.hpp): the handle, the simulation's state, and what the
// C functions (capi_sim_calls.cpp) use of the network (capi_sim.cpp).
#ifndef ZKCORO_TESTS_SIM_CAPI_SIM_INTERNAL_HPP
#define ZKCORO_TESTS_SIM_CAPI_SIM_INTERNAL_HPP

#include "capi_sim.hpp"

#include <zookeeper/zookeeper.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

struct _zhandle {
    watcher_fn watcher = nullptr;
    void* context = nullptr;
    int recv_timeout = 0;
    int state = 0;
    zksim::session_id sid = 0;
    clientid_t cid{};
    int efd = -1;
    bool retiring = false;  // zoo_set_context(nullptr): the driver hands it to its closer thread
    std::int64_t last_up_ns = 0, last_down_ns = 0;  // the two directions stay in order
    std::deque<std::function<void()>> ready;        // run by zookeeper_process, in order
    // Requests issued and not answered yet: each one's completion with an error (connection loss,
    // expiry, ZCLOSING at close).
    std::map<std::uint64_t, std::function<void(int)>> pending;
    std::uint64_t next_request = 0;
    // The connection: each one an epoch; what travels on one that broke is not delivered.
    std::uint64_t epoch = 0;
    bool link_up = false;                                    // the server's side
    std::map<std::uint64_t, std::function<void()>> on_wire;  // sent, not arrived yet
    std::vector<std::pair<std::uint64_t, std::function<void()>>> unsent;  // issued while connecting
    // What the client library keeps across a reconnect: the newest zxid it has seen and the
    // watches it holds (re-registered with SetWatches).
    std::int64_t last_zxid = 0;
    std::set<std::string> w_data, w_exist, w_child;
};

namespace zksim {

struct sim_state {
    std::unique_ptr<zk_world> world = std::make_unique<zk_world>();
    std::atomic<std::int64_t> now_ns{sim_epoch_ns};
    std::mt19937_64 rng{1};
    std::int64_t lat_min_us = 100, lat_max_us = 400;
    std::uint64_t seq = 0;
    std::multimap<std::pair<std::int64_t, std::uint64_t>, std::function<void()>> due;
    std::vector<zhandle_t*> handles;
    std::mutex close_mu;  // the driver's closer thread calls zookeeper_close
    std::vector<zhandle_t*> closing;
    double disconnects_per_s = 0;  // per connected handle (sim_faults)
    double break_on_request = 0;   // per request sent (sim_faults)
    unsigned lies = 0;  // sim_lie
    bool refuse_auth = false;  // sim_refuse_auth
    sim_counts counts;
    // Asked at every step before the due events run (the simulated Redis, redis_sim.hpp: it reads
    // what the clients wrote to their sockets); true when it did something. None by default.
    std::function<bool()> poll_hook;
};

sim_state& S();
void trace(zhandle_t* zh, const std::string& what);
bool alive(zhandle_t* zh);
// An event of the simulation at simulated time `t` (ns; after those due before, and after the
// ones already set for `t`).
void at(std::int64_t t, std::function<void()> f);
// One way's latency, drawn from sim_latency's range (ns).
std::int64_t latency_ns();
// To the server, in the order sent (applied on arrival unless the connection broke first).
void up(zhandle_t* zh, std::function<void()> apply);
// To the client, in the order sent, if the connection it travels on is still the handle's.
void down(zhandle_t* zh, std::function<void()> deliver);
// The session is (again) connected on a new connection.
void connected(zhandle_t* zh);
// A request: `apply` runs on the server and returns the completion's call (run on the client);
// `fail` completes it with an error code instead (connection loss, expiry, ZCLOSING).
int request(zhandle_t* zh, std::function<std::function<void()>()> apply, std::function<void(int)> fail);
// sim_lie's lie_hide_predecessor (`own` false) and lie_hide_own_node (true): leaves out of
// `children` (a listing of `parent` for `zh`) the lowest-sequence child of another session (of
// zh's own), in 1 listing of 3.
void hide_child(zhandle_t* zh, const std::string& parent, std::vector<std::string>& children, bool own);
int rc_of(const error_code& ec);
Stat to_c(const node_stat& n);
create_mode mode_of(int flags);

}  // namespace zksim

#endif
