// The simulated network and server side of the simulated C client (capi_sim.hpp; its functions
// are in capi_sim_calls.cpp): messages each way in order with drawn latencies, a request applied
// to zk_world on arrival, its reply and the watch events it fired sent back (a session's events
// before the reply of any request the server applied after them), the faults, the scheduler
// (run_until), and the clock, randomness and timerfd the program puts in place of the system's.
#include "capi_sim_internal.hpp"

#include <zookeeper/zookeeper.h>

#include <boost/asio/post.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

namespace zksim {

sim_state& S()
{
    static sim_state s;
    return s;
}

// ZKCORO_SIM_CAPI_TRACE=1: each request as the server applies it, each fault (debugging a seed).
void trace(zhandle_t* zh, const std::string& what)
{
    static const bool on = std::getenv("ZKCORO_SIM_CAPI_TRACE") != nullptr;
    if (on)
        std::fprintf(stderr, "%12.6f sim s0x%llx: %s\n", static_cast<double>(S().now_ns.load() - 1'000'000'000'000) / 1e9,
                     static_cast<unsigned long long>(zh ? zh->sid : 0), what.c_str());
}

bool alive(zhandle_t* zh)
{
    auto& h = S().handles;
    return std::find(h.begin(), h.end(), zh) != h.end();
}

std::int64_t latency_ns()
{
    auto& s = S();
    std::uniform_int_distribution<std::int64_t> d(s.lat_min_us, s.lat_max_us);
    return d(s.rng) * 1000;
}

void at(std::int64_t t, std::function<void()> f)
{
    auto& s = S();
    s.due.emplace(std::make_pair(t, s.seq++), std::move(f));
}

// To the server: applied when it arrives, after everything the handle sent before, unless the
// connection broke first (then disconnect() decided whether it arrived).
void up(zhandle_t* zh, std::function<void()> apply)
{
    const auto t = std::max(S().now_ns.load() + latency_ns(), zh->last_up_ns + 1);
    zh->last_up_ns = t;
    const auto id = zh->next_request++;
    zh->on_wire.emplace(id, std::move(apply));
    at(t, [zh, id] {
        if (!alive(zh))
            return;
        auto it = zh->on_wire.find(id);
        if (it == zh->on_wire.end())
            return;
        auto f = std::move(it->second);
        zh->on_wire.erase(it);
        if (zh->link_up)
            f();
    });
}

// The client side's own: ready for zookeeper_process, with the C library's wake-up.
void ready(zhandle_t* zh, std::function<void()> f)
{
    zh->ready.push_back(std::move(f));
    const std::uint64_t one = 1;
    (void)!::write(zh->efd, &one, sizeof one);
}

// To the client: ready for zookeeper_process when it arrives, after what was sent before it, if
// the connection it travels on is still the handle's.
void down(zhandle_t* zh, std::function<void()> deliver)
{
    const auto t = std::max(S().now_ns.load() + latency_ns(), zh->last_down_ns + 1);
    zh->last_down_ns = t;
    at(t, [zh, e = zh->epoch, f = std::move(deliver)] {
        if (alive(zh) && zh->epoch == e)
            ready(zh, f);
    });
}

void forget_watch(zhandle_t* zh, int type, const std::string& path)
{
    if (type == ZOO_CREATED_EVENT || type == ZOO_CHANGED_EVENT || type == ZOO_DELETED_EVENT) {
        zh->w_data.erase(path);
        zh->w_exist.erase(path);
    }
    if (type == ZOO_CHILD_EVENT || type == ZOO_DELETED_EVENT)
        zh->w_child.erase(path);
}

int event_type(watch_event_type t)
{
    switch (t) {
    case watch_event_type::created: return ZOO_CREATED_EVENT;
    case watch_event_type::deleted: return ZOO_DELETED_EVENT;
    case watch_event_type::data_changed: return ZOO_CHANGED_EVENT;
    case watch_event_type::children_changed: return ZOO_CHILD_EVENT;
    default: return ZOO_SESSION_EVENT;
    }
}

// The watch events the last write fired, on their way to every connected session's handle.
void send_events()
{
    auto& s = S();
    for (auto* zh : s.handles) {
        if (zh->sid == 0)
            continue;
        for (auto& e : s.world->take_events(zh->sid)) {
            if (((s.lies & lie_drop_deleted_events) && e.type == watch_event_type::deleted) ||
                ((s.lies & lie_drop_data_events) && e.type == watch_event_type::data_changed)) {
                trace(zh, "lie: event on " + e.path + " not delivered");
                ++s.counts.lies;
                continue;
            }
            down(zh, [zh, type = event_type(e.type), path = e.path] {
                forget_watch(zh, type, path);
                if (zh->watcher)
                    zh->watcher(zh, type, ZOO_CONNECTED_STATE, path.c_str(), zh->context);
            });
        }
    }
}

void disconnect(zhandle_t* zh);

// A request: `apply` runs on the server and returns the completion's call (run on the client);
// `fail` completes it with an error code instead (ZCLOSING when the handle closes first).
int request(zhandle_t* zh, std::function<std::function<void()>()> apply, std::function<void(int)> fail)
{
    if (!alive(zh) || zh->state == ZOO_EXPIRED_SESSION_STATE || zh->state == ZOO_AUTH_FAILED_STATE)
        return ZINVALIDSTATE;
    const auto id = zh->next_request++;
    zh->pending.emplace(id, std::move(fail));
    auto send = [zh, id, apply = std::move(apply)] {
        // A fault aimed at this request: the connection breaks while it is on the wire (then it
        // arrives or not, and its reply is lost): the recoveries of the protocol live there.
        auto& st = S();
        if (st.break_on_request > 0 && std::bernoulli_distribution(st.break_on_request)(st.rng))
            at(st.now_ns.load() + 1, [zh, e = zh->epoch] {
                if (alive(zh) && zh->epoch == e)
                    disconnect(zh);
            });
        up(zh, [zh, id, apply] {
            auto reply = apply();
            send_events();  // a write's events before its reply
            auto& s = S();
            if ((s.lies & lie_swallow_reply) && std::uniform_int_distribution<int>(0, 29)(s.rng) == 0) {
                trace(zh, "lie: a reply not sent");
                ++s.counts.lies;
                return;
            }
            down(zh, [zh, id, reply = std::move(reply), zxid = S().world->last_zxid()] {
                if (zh->pending.erase(id) == 0)
                    return;
                zh->last_zxid = std::max(zh->last_zxid, zxid);
                reply();
            });
        });
    };
    if (zh->state == ZOO_CONNECTED_STATE)
        send();
    else
        zh->unsent.emplace_back(id, std::move(send));  // sent once connected, as the library does
    return ZOK;
}

// The client learns that its connection broke: every request not answered fails with `rc`, in
// the order issued, and the watcher hears of it (ZOO_CONNECTING_STATE, or the expiry).
void connection_lost(zhandle_t* zh, int rc, int state)
{
    zh->state = state;
    if (state == ZOO_EXPIRED_SESSION_STATE)
        zh->unsent.clear();
    std::set<std::uint64_t> keep;  // issued while connecting: sent after the reconnect
    for (auto& u : zh->unsent)
        keep.insert(u.first);
    std::vector<std::function<void(int)>> failed;
    for (auto it = zh->pending.begin(); it != zh->pending.end();) {
        if (keep.count(it->first)) {
            ++it;
            continue;
        }
        failed.push_back(std::move(it->second));
        it = zh->pending.erase(it);
    }
    for (auto& fail : failed)
        fail(rc);
    if (zh->watcher)
        zh->watcher(zh, ZOO_SESSION_EVENT, state, "", zh->context);
}

void schedule_disconnect(zhandle_t* zh);
void refuse_auth(zhandle_t* zh);

// The session is (again) connected on a new connection: the client hears of it, then what it
// issued meanwhile goes out (or, with sim_refuse_auth, the refusal comes).
void connected(zhandle_t* zh)
{
    zh->link_up = true;
    down(zh, [zh] {
        zh->state = ZOO_CONNECTED_STATE;
        if (zh->watcher)
            zh->watcher(zh, ZOO_SESSION_EVENT, ZOO_CONNECTED_STATE, "", zh->context);
        if (S().refuse_auth)
            return refuse_auth(zh);
        auto unsent = std::move(zh->unsent);
        zh->unsent.clear();
        for (auto& [id, send] : unsent)
            send();
    });
    send_events();  // SetWatches' own events, after the session event
    schedule_disconnect(zh);
}

// sim_refuse_auth: the server answers the credentials with an error and closes the connection;
// the handle is done (ZOO_AUTH_FAILED_STATE), the session lives on the server until its timeout.
void refuse_auth(zhandle_t* zh)
{
    auto& s = S();
    trace(zh, "credentials refused");
    zh->state = ZOO_AUTH_FAILED_STATE;
    zh->link_up = false;
    ++zh->epoch;
    zh->unsent.clear();
    zh->on_wire.clear();
    s.world->disconnect(zh->sid);
    at(s.now_ns.load() + std::int64_t{zh->recv_timeout} * 1'000'000, [sid = zh->sid] {
        if (S().world->alive(sid)) {
            S().world->expire_session(sid);
            ++S().counts.expiries;
            send_events();
        }
    });
    if (zh->watcher)
        zh->watcher(zh, ZOO_SESSION_EVENT, ZOO_AUTH_FAILED_STATE, "", zh->context);
    auto pending = std::move(zh->pending);
    zh->pending.clear();
    for (auto& [id, fail] : pending)
        fail(ZAUTHFAILED);
}

// A fault: the connection breaks now. What was on the wire to the server arrived or not (a coin
// each), the replies on their way are lost; the server keeps the session for its timeout, the
// client hears of the break one trip later and reconnects after a drawn delay: most within a
// fraction of the timeout, some after it (the session has expired by then).
void disconnect(zhandle_t* zh)
{
    auto& s = S();
    if (!zh->link_up || zh->state != ZOO_CONNECTED_STATE)
        return;
    auto wire = std::move(zh->on_wire);
    zh->on_wire.clear();
    for (auto& [id, apply] : wire)
        if (std::uniform_int_distribution<int>(0, 1)(s.rng) == 1) {
            trace(zh, "on the wire, arrives:");
            apply();  // it arrived: its reply is lost below
            ++s.counts.applied_unanswered;
        } else {
            ++s.counts.not_applied;
        }
    trace(zh, "connection broken");
    zh->link_up = false;
    ++zh->epoch;
    ++s.counts.disconnects;
    s.world->disconnect(zh->sid);
    const auto now = s.now_ns.load();
    const auto timeout_ns = std::int64_t{zh->recv_timeout} * 1'000'000;
    at(now + latency_ns(), [zh] {
        if (alive(zh))
            connection_lost(zh, ZCONNECTIONLOSS, ZOO_CONNECTING_STATE);
    });
    at(now + timeout_ns, [zh, e = zh->epoch] {  // the server's session timer
        if (alive(zh) && zh->epoch == e && !zh->link_up && S().world->alive(zh->sid)) {
            S().world->expire_session(zh->sid);
            ++S().counts.expiries;
            send_events();
        }
    });
    const int pick = std::uniform_int_distribution<int>(0, 99)(s.rng);
    std::int64_t away;
    if (pick < 60)
        away = std::uniform_int_distribution<std::int64_t>(1, 300)(s.rng) * 1'000'000;
    else if (pick < 85)
        away = std::uniform_int_distribution<std::int64_t>(300'000'000, timeout_ns * 7 / 10)(s.rng);
    else
        away = std::uniform_int_distribution<std::int64_t>(timeout_ns * 11 / 10, timeout_ns * 15 / 10)(s.rng);
    at(now + 2 * latency_ns() + away, [zh, e = zh->epoch] {
        if (!alive(zh) || zh->epoch != e || zh->state == ZOO_EXPIRED_SESSION_STATE)
            return;
        auto& w = *S().world;
        if (!w.alive(zh->sid)) {
            ++zh->epoch;
            at(S().now_ns.load() + latency_ns(), [zh] {
                if (alive(zh))
                    connection_lost(zh, ZSESSIONEXPIRED, ZOO_EXPIRED_SESSION_STATE);
            });
            return;
        }
        w.reconnect(zh->sid, zh->last_zxid,
                    zk_world::watch_set{{zh->w_data.begin(), zh->w_data.end()},
                                        {zh->w_exist.begin(), zh->w_exist.end()},
                                        {zh->w_child.begin(), zh->w_child.end()}});
        connected(zh);
    });
}

void schedule_disconnect(zhandle_t* zh)
{
    auto& s = S();
    if (s.disconnects_per_s <= 0)
        return;
    std::exponential_distribution<double> d(s.disconnects_per_s);
    const auto after = static_cast<std::int64_t>(d(s.rng) * 1e9) + 1;
    at(s.now_ns.load() + after, [zh, e = zh->epoch] {
        if (alive(zh) && zh->epoch == e)
            disconnect(zh);
    });
}

void close_now(zhandle_t* zh)
{
    auto& s = S();
    if (zh->sid != 0 && s.world->alive(zh->sid) && zh->state != ZOO_AUTH_FAILED_STATE) {
        s.world->close_session(zh->sid);
        s.handles.erase(std::find(s.handles.begin(), s.handles.end(), zh));
        send_events();
    } else {
        s.handles.erase(std::find(s.handles.begin(), s.handles.end(), zh));
    }
    auto pending = std::move(zh->pending);
    for (auto& [id, fail] : pending)
        fail(ZCLOSING);
    ::close(zh->efd);
    delete zh;
}

// The closer thread's zookeeper_close calls, taken in by the simulation's thread. A handle the
// driver is retiring is waited for (bounded), so that its closing comes at the same step in
// every run of a seed.
void take_closes()
{
    auto& s = S();
    for (int spins = 0;; ++spins) {
        std::vector<zhandle_t*> closing;
        {
            std::lock_guard lk(s.close_mu);
            closing.swap(s.closing);
        }
        for (auto* zh : closing)
            close_now(zh);
        const bool waiting = std::any_of(s.handles.begin(), s.handles.end(), [](auto* h) { return h->retiring; });
        if (!waiting)
            return;
        if (spins > 5000)
            throw std::runtime_error("capi_sim: a retired handle was not closed within 5 s");
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

bool step()
{
    take_closes();
    auto& s = S();
    bool any = s.poll_hook && s.poll_hook();
    while (!s.due.empty() && s.due.begin()->first.first <= s.now_ns.load()) {
        auto f = std::move(s.due.begin()->second);
        s.due.erase(s.due.begin());
        f();
        ++s.counts.steps;
        any = true;
    }
    return any;
}

void sim_reset(std::uint64_t seed)
{
    auto& s = S();
    if (!s.handles.empty())
        throw std::logic_error("capi_sim: sim_reset with handles open");
    s.world = std::make_unique<zk_world>(seed);
    s.now_ns = sim_epoch_ns;
    s.world->set_now(sim_epoch_ns / 1'000'000);
    s.rng.seed(seed);
    s.due.clear();
    s.seq = 0;
    s.disconnects_per_s = 0;
    s.break_on_request = 0;
    s.lies = 0;
    s.refuse_auth = false;
    s.counts = {};
}

void sim_lie(unsigned lies)
{
    S().lies = lies;
}

void sim_refuse_auth(bool on)
{
    S().refuse_auth = on;
}

sim_counts sim_stats()
{
    return S().counts;
}

zk_world& sim_world()
{
    return *S().world;
}

std::chrono::steady_clock::time_point sim_now()
{
    return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(S().now_ns.load()));
}

void sim_latency(std::int64_t min_us, std::int64_t max_us)
{
    S().lat_min_us = min_us;
    S().lat_max_us = max_us;
}

void sim_faults(double disconnects_per_s, double break_on_request)
{
    S().disconnects_per_s = disconnects_per_s;
    S().break_on_request = break_on_request;
}

std::size_t sim_handles()
{
    return S().handles.size();
}

namespace {

// run_until's question to Asio: how long until its next timer? Asio keeps its timers to itself,
// but without a timerfd its reactor passes the wait until the next one to epoll_wait (in whole
// milliseconds, rounded down, at least 1) when the io_context is run with nothing ready. So
// run_until runs the io_context once with `probe` set, and the program's epoll_wait (below)
// answers that call: it notes the wait, posts a handler that does nothing so that run_one
// returns, and waits for nothing. Only the simulation's thread, and only during that call.
struct asio_probe {
    boost::asio::io_context* ioc = nullptr;
    long wait_ms = -1;  // what epoll_wait was asked to wait; -1: it was not asked
    long noops = 0;     // the handlers posted to end a probe that have run
};
thread_local asio_probe* probe = nullptr;

}  // namespace

// An epoll_wait of the probing io_context: a real one that does not wait first (fds made ready by
// the simulation are reported as ever); when nothing is ready, the probe's answer.
int probe_epoll_wait(int epfd, struct epoll_event* events, int max, int timeout)
{
    auto* p = probe;
    if (p == nullptr || timeout == 0)
        return ::epoll_pwait(epfd, events, max, timeout, nullptr);
    probe = nullptr;  // one answer per probe
    const int got = ::epoll_pwait(epfd, events, max, 0, nullptr);
    if (got != 0)
        return got;
    p->wait_ms = timeout < 0 ? 5 * 60 * 1000 : timeout;
    boost::asio::post(*p->ioc, [p] { ++p->noops; });
    return 0;
}

bool run_until(boost::asio::io_context& ioc, const std::function<bool()>& done, std::chrono::milliseconds max_virtual,
               const std::function<bool()>& elsewhere)
{
    auto& s = S();
    const auto limit = s.now_ns.load() + std::chrono::nanoseconds(max_virtual).count();
    asio_probe p{&ioc};
    int waits = 0;  // real-time waits for `elsewhere`, 1 ms each
    while (!done()) {
        if (s.now_ns.load() > limit)
            return false;
        if (ioc.stopped())
            ioc.restart();
        const auto noops = p.noops;
        if (const auto real = static_cast<long>(ioc.poll()) - (p.noops - noops); real > 0) {
            s.counts.steps += real;
            continue;
        }
        if (step())
            continue;
        if (elsewhere && elsewhere()) {
            if (++waits > 10'000)
                return false;
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            continue;
        }
        // Nothing ready: the clock moves to the next thing due, the simulation's or Asio's, and
        // done() is asked again before anything runs at that moment (the checkers see the state
        // that lasted until then).
        p.wait_ms = -1;
        probe = &p;
        const auto before = p.noops;
        const auto n = static_cast<long>(ioc.run_one());
        probe = nullptr;
        if (const auto real = n - (p.noops - before); real > 0) {  // posted by the closer's thread
            s.counts.steps += real;
            continue;
        }
        // Asio's wait is in whole milliseconds, rounded down: a timer due in 5.7 ms takes two moves
        // (5, then 1). No work left at all (no probe): 1 ms.
        auto next = s.now_ns.load() + (p.wait_ms < 0 ? 1 : p.wait_ms) * 1'000'000;
        if (!s.due.empty())
            next = std::min(next, s.due.begin()->first.first);
        next = std::min(next, limit + 1);
        s.now_ns = std::max(next, s.now_ns.load() + 1);
        s.world->set_now(s.now_ns.load() / 1'000'000);
    }
    return true;
}

}  // namespace zksim

// ---------------------------------------------------------------------------------------------
// What takes libstdc++'s, libc's and libzookeeper_st's place in this program.

namespace std::chrono::_V2 {
steady_clock::time_point steady_clock::now() noexcept
{
    return time_point(nanoseconds(zksim::S().now_ns.load()));
}
}  // namespace std::chrono::_V2

extern "C" {

// Boost.UUID's seeding (the protected names) reads the OS's randomness: here the seed's.
ssize_t getrandom(void* buf, size_t len, unsigned int) noexcept
{
    auto* p = static_cast<unsigned char*>(buf);
    for (size_t i = 0; i < len; ++i)
        p[i] = static_cast<unsigned char>(zksim::S().rng());
    return static_cast<ssize_t>(len);
}

// Asio's reactor waits here (run_until's probe: above).
int epoll_wait(int epfd, struct epoll_event* events, int max, int timeout)
{
    return zksim::probe_epoll_wait(epfd, events, max, timeout);
}

int timerfd_create(clockid_t, int) noexcept
{
    errno = ENOSYS;  // Asio then checks its timers against steady_clock on every run
    return -1;
}

}  // extern "C"
