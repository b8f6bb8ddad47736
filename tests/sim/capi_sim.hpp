// The simulated ZooKeeper C client (issue 34, item 3: the seam). A test program that links
// capi_sim.cpp defines the functions of libzookeeper_st that libzkcoro calls (zookeeper_init2,
// zookeeper_interest, zookeeper_process, zoo_acreate2, ...): the dynamic linker binds
// libzkcoro's calls to the program's definitions first (ELF interposition), so everything of
// ours runs unchanged (the driver's I/O loop, session machine, failover steering and request
// registry, the client, the backends, the engine) against zk_world instead of a server. The
// program also defines std::chrono::steady_clock::now() (the simulated clock: every timer,
// deadline and ping of ours and Asio's reads it) and a timerfd_create() that fails (Asio then
// checks its timers against that clock on every poll instead of waiting on a kernel timer) and an
// epoll_wait that never blocks (run_until asks it when Asio's next timer is due).
//
// One thread runs everything: the test's io_context and sim_step(), in turns (run_until). The
// handle closer's thread only hands its zookeeper_close() over; the closing happens in the next
// step. Same seed, same run.
#ifndef ZKCORO_TESTS_SIM_CAPI_SIM_HPP
#define ZKCORO_TESTS_SIM_CAPI_SIM_HPP

#include "zk_world.hpp"

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace zksim {

// Where the simulated clock starts (1000 s), at every sim_reset.
inline constexpr std::int64_t sim_epoch_ns = 1'000'000'000'000;
// Starts a new simulated world (no handles may be open), the clock back at its start: a seed's
// run does not depend on the seeds before it.
void sim_reset(std::uint64_t seed);
zk_world& sim_world();
std::chrono::steady_clock::time_point sim_now();
// Network latency of one way, drawn for each message in [min, max] microseconds.
void sim_latency(std::int64_t min_us, std::int64_t max_us);
// Faults: each connected handle loses its connection `disconnects_per_s` times a second on
// average (what was on the wire arrives or not, replies on the way are lost; the client
// reconnects to its session after a drawn delay, some of them after the session timeout, when
// the server has expired it); and, with probability `break_on_request`, the connection breaks
// while a request is on the wire. 0, 0: none (sim_reset's).
void sim_faults(double disconnects_per_s, double break_on_request = 0);
struct sim_counts {
    long disconnects = 0;         // connections broken
    long expiries = 0;            // sessions the server expired
    long applied_unanswered = 0;  // requests applied whose reply was lost
    long not_applied = 0;         // requests on the wire that never arrived
    long lies = 0;                // answers or events the simulation falsified (sim_lie)
    long steps = 0;               // handlers the io_context ran + server events delivered
};
sim_counts sim_stats();  // since sim_reset
// Negative controls (test only): the simulated server breaks ZooKeeper's promises, so that the
// checkers can be shown to catch what follows. None by default (sim_reset's).
enum sim_lies : unsigned {
    // A listing leaves out its lowest-sequence child of another session (1 listing in 3): the
    // lister believes a predecessor is not there.
    lie_hide_predecessor = 1,
    // A node's deletion is never told to a watcher (a waiter's predecessor, a held node).
    lie_drop_deleted_events = 2,
    // A node's data change is never told to a watcher (a revocation request).
    lie_drop_data_events = 4,
    // A listing leaves out the lister's own lowest-sequence node (1 listing in 3): the walk, or
    // the search for a create whose reply was lost, believes its node is not there.
    lie_hide_own_node = 8,
    // A request is applied but its reply never sent, the connection staying up (1 request in 30):
    // the request waits for ever (no real server does this; the C client would time the
    // connection out). For the liveness checker's control.
    lie_swallow_reply = 16,
};
void sim_lie(unsigned lies);
// On: the server refuses the credentials of every connection made from now on (the first or a
// reconnection), as it refuses an auth scheme it does not know. The handle hears
// ZOO_CONNECTED_STATE and then, in the same zookeeper_process call, ZOO_AUTH_FAILED_STATE (its
// requests not answered failing with ZAUTHFAILED after it, as the C client orders them): nothing
// the library posted on hearing of the connection runs in between, the latest the library can
// learn of a refusal. The server keeps the session until its timeout (the C client sends no
// close over a refused connection). Off by default (sim_reset's).
void sim_refuse_auth(bool on);
// Open simulated handles (sessions being connected or connected).
std::size_t sim_handles();

// Runs `ioc` and the simulated server in turns until `done()` or `max_virtual` of simulated time
// has passed: each turn polls the io_context; when nothing was ready, the server delivers what is
// due, or the clock moves to the next thing due, the server's or Asio's next timer (which the
// io_context tells the program's epoll_wait: capi_sim.cpp), and done() is asked before anything
// runs at the new time. Returns whether done() held.
// `elsewhere`, when given, is true while what done() waits for is in another thread's hands (the
// library's handle closer, which posts a close's completion after the simulation has closed the
// handle): the clock does not move then, and the loop waits for it in real time (at most 10 s),
// so that the completion comes at the same simulated moment in every run.
bool run_until(boost::asio::io_context& ioc, const std::function<bool()>& done,
               std::chrono::milliseconds max_virtual, const std::function<bool()>& elsewhere = {});

}  // namespace zksim

#endif
