// The simulated ZooKeeper C client: the functions of libzookeeper_st that libzkcoro calls, over
// zk_world, with a seeded network and a simulated clock (capi_sim.hpp says how they take the
// library's place). What each function does is what the C client documents (zookeeper.h, 3.8):
// a request is queued and answered through its completion from zookeeper_process(), in the
// order sent; watch events and session events reach the handle's watcher from there too, a
// session's events before the reply of any request the server applied after them.
#include "capi_sim.hpp"

#include <zookeeper/zookeeper.h>

#include <arpa/inet.h>
#include <netinet/in.h>
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

namespace {

struct sim_state {
    std::unique_ptr<zk_world> world = std::make_unique<zk_world>();
    std::atomic<std::int64_t> now_ns{1'000'000'000'000};
    std::mt19937_64 rng{1};
    std::int64_t lat_min_us = 100, lat_max_us = 400;
    std::uint64_t seq = 0;
    std::multimap<std::pair<std::int64_t, std::uint64_t>, std::function<void()>> due;
    std::vector<zhandle_t*> handles;
    std::mutex close_mu;  // the driver's closer thread calls zookeeper_close
    std::vector<zhandle_t*> closing;
    double disconnects_per_s = 0;  // per connected handle (sim_faults)
    double break_on_request = 0;   // per request sent (sim_faults)
    sim_counts counts;
};

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
        for (auto& e : s.world->take_events(zh->sid))
            down(zh, [zh, type = event_type(e.type), path = e.path] {
                forget_watch(zh, type, path);
                if (zh->watcher)
                    zh->watcher(zh, type, ZOO_CONNECTED_STATE, path.c_str(), zh->context);
            });
    }
}

int rc_of(const error_code& ec)
{
    if (!ec)
        return ZOK;
    if (ec.category() == zkcoro::make_error_code(zkcoro::zk_errc::no_node).category())
        return ec.value();
    return ZBADARGUMENTS;  // the client's own check refused it (invalid path)
}

Stat to_c(const node_stat& n)
{
    Stat r{};
    r.czxid = n.czxid;
    r.mzxid = n.mzxid;
    r.ctime = n.ctime;
    r.mtime = n.mtime;
    r.version = n.version;
    r.cversion = n.cversion;
    r.aversion = n.aversion;
    r.ephemeralOwner = n.ephemeral_owner;
    r.dataLength = n.data_length;
    r.numChildren = n.num_children;
    r.pzxid = n.pzxid;
    return r;
}

create_mode mode_of(int flags)
{
    if (flags == ZOO_CONTAINER)
        return create_mode::container;
    if (flags == ZOO_EPHEMERAL_SEQUENTIAL)
        return create_mode::ephemeral_sequential;
    if (flags == ZOO_PERSISTENT_SEQUENTIAL)
        return create_mode::persistent_sequential;
    if (flags == ZOO_EPHEMERAL)
        return create_mode::ephemeral;
    return create_mode::persistent;
}

void disconnect(zhandle_t* zh);

// A request: `apply` runs on the server and returns the completion's call (run on the client);
// `fail` completes it with an error code instead (ZCLOSING when the handle closes first).
int request(zhandle_t* zh, std::function<std::function<void()>()> apply, std::function<void(int)> fail)
{
    if (!alive(zh) || zh->state == ZOO_EXPIRED_SESSION_STATE)
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

// The session is (again) connected on a new connection: the client hears of it, then what it
// issued meanwhile goes out.
void connected(zhandle_t* zh)
{
    zh->link_up = true;
    down(zh, [zh] {
        zh->state = ZOO_CONNECTED_STATE;
        if (zh->watcher)
            zh->watcher(zh, ZOO_SESSION_EVENT, ZOO_CONNECTED_STATE, "", zh->context);
        auto unsent = std::move(zh->unsent);
        zh->unsent.clear();
        for (auto& [id, send] : unsent)
            send();
    });
    send_events();  // SetWatches' own events, after the session event
    schedule_disconnect(zh);
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
    if (zh->sid != 0 && s.world->alive(zh->sid)) {
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
    bool any = false;
    while (!s.due.empty() && s.due.begin()->first.first <= s.now_ns.load()) {
        auto f = std::move(s.due.begin()->second);
        s.due.erase(s.due.begin());
        f();
        any = true;
    }
    return any;
}

}  // namespace

void sim_reset(std::uint64_t seed)
{
    auto& s = S();
    if (!s.handles.empty())
        throw std::logic_error("capi_sim: sim_reset with handles open");
    s.world = std::make_unique<zk_world>(seed);
    s.rng.seed(seed);
    s.due.clear();
    s.seq = 0;
    s.disconnects_per_s = 0;
    s.break_on_request = 0;
    s.counts = {};
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

bool run_until(boost::asio::io_context& ioc, const std::function<bool()>& done, std::chrono::milliseconds max_virtual)
{
    auto& s = S();
    const auto limit = s.now_ns.load() + std::chrono::nanoseconds(max_virtual).count();
    while (!done()) {
        if (s.now_ns.load() > limit)
            return false;
        if (ioc.stopped())
            ioc.restart();
        if (ioc.poll() > 0)
            continue;
        if (step())
            continue;
        auto next = s.now_ns.load() + 1'000'000;
        if (!s.due.empty())
            next = std::min(next, s.due.begin()->first.first);
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

int timerfd_create(clockid_t, int) noexcept
{
    errno = ENOSYS;  // Asio then checks its timers against steady_clock on every run
    return -1;
}

zhandle_t* zookeeper_init2(const char*, watcher_fn fn, int recv_timeout, const clientid_t* clientid, void* context,
                           int, log_callback_fn)
{
    using namespace zksim;
    auto* zh = new zhandle_t;
    zh->watcher = fn;
    zh->context = context;
    zh->recv_timeout = recv_timeout;
    zh->state = ZOO_CONNECTING_STATE;
    zh->efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    S().handles.push_back(zh);
    zh->link_up = true;  // the connect request travels on the first connection
    const zksim::session_id resume = clientid ? clientid->client_id : 0;
    up(zh, [zh, resume] {
        auto& w = *S().world;
        const bool resumed = resume != 0 && w.alive(resume);
        if (resume != 0 && !resumed) {
            down(zh, [zh] {
                zh->state = ZOO_EXPIRED_SESSION_STATE;
                if (zh->watcher)
                    zh->watcher(zh, ZOO_SESSION_EVENT, ZOO_EXPIRED_SESSION_STATE, "", zh->context);
            });
            return;
        }
        zh->sid = resumed ? resume : w.open_session();
        zh->cid.client_id = zh->sid;
        if (resumed)
            w.reconnect(zh->sid, w.last_zxid(), {});
        connected(zh);
    });
    return zh;
}

int zookeeper_interest(zhandle_t* zh, int* fd, int* interest, struct timeval* tv)
{
    *fd = zh->efd;
    *interest = ZOOKEEPER_READ;
    tv->tv_sec = 1;
    tv->tv_usec = 0;
    return zh->state == ZOO_EXPIRED_SESSION_STATE ? ZINVALIDSTATE : ZOK;
}

int zookeeper_process(zhandle_t* zh, int)
{
    std::uint64_t n = 0;
    (void)!::read(zh->efd, &n, sizeof n);
    while (!zh->ready.empty()) {
        auto f = std::move(zh->ready.front());
        zh->ready.pop_front();
        f();
    }
    return ZOK;
}

int zookeeper_close(zhandle_t* zh)
{
    std::lock_guard lk(zksim::S().close_mu);
    zksim::S().closing.push_back(zh);
    return ZOK;
}

void zoo_set_context(zhandle_t* zh, void* context)
{
    zh->context = context;
    if (!context)
        zh->retiring = true;
}

int zoo_state(zhandle_t* zh)
{
    return zh->state;
}

const clientid_t* zoo_client_id(zhandle_t* zh)
{
    return &zh->cid;
}

int zoo_recv_timeout(zhandle_t* zh)
{
    return zh->recv_timeout;
}

struct sockaddr* zookeeper_get_connected_host(zhandle_t* zh, struct sockaddr* addr, socklen_t* addr_len)
{
    if (zh->state != ZOO_CONNECTED_STATE || *addr_len < sizeof(sockaddr_in))
        return nullptr;
    auto* in = reinterpret_cast<sockaddr_in*>(addr);
    std::memset(in, 0, sizeof *in);
    in->sin_family = AF_INET;
    in->sin_port = htons(2181);
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    *addr_len = sizeof *in;
    return addr;
}

const char* zoo_get_current_server(zhandle_t*)
{
    return "127.0.0.1:2181";
}

void zoo_cycle_next_server(zhandle_t*) {}

int zoo_set_servers_resolution_delay(zhandle_t*, int)
{
    return ZOK;
}

void zoo_set_log_callback(zhandle_t*, log_callback_fn) {}

int zoo_add_auth(zhandle_t* zh, const char*, const char*, int, void_completion_t completion, const void* data)
{
    return zksim::request(
        zh, [completion, data]() -> std::function<void()> {
            return [completion, data] {
                if (completion)
                    completion(ZOK, data);
            };
        },
        [completion, data](int rc) {
            if (completion)
                completion(rc, data);
        });
}

int zoo_acreate2(zhandle_t* zh, const char* path, const char* value, int valuelen, const struct ACL_vector*, int mode,
                 string_stat_completion_t completion, const void* data)
{
    zksim::create_req r{path, value ? std::string(value, static_cast<std::size_t>(std::max(valuelen, 0))) : "",
                        zksim::mode_of(mode)};
    return zksim::request(
        zh, [zh, r, completion, data]() -> std::function<void()> {
            auto rep = zksim::S().world->create(zh->sid, r);
            zksim::trace(zh, "create " + r.path + " -> " + (rep.ec ? rep.ec.message() : rep.path));
            return [rep, completion, data] {
                const auto st = zksim::to_c(rep.stat);
                completion(zksim::rc_of(rep.ec), rep.ec ? nullptr : rep.path.c_str(), rep.ec ? nullptr : &st, data);
            };
        },
        [completion, data](int rc) { completion(rc, nullptr, nullptr, data); });
}

int zoo_adelete(zhandle_t* zh, const char* path, int version, void_completion_t completion, const void* data)
{
    zksim::remove_req r{path, version};
    return zksim::request(
        zh, [zh, r, completion, data]() -> std::function<void()> {
            auto rep = zksim::S().world->remove(zh->sid, r);
            zksim::trace(zh, "delete " + r.path + " -> " + (rep.ec ? rep.ec.message() : "ok"));
            return [rep, completion, data] { completion(zksim::rc_of(rep.ec), data); };
        },
        [completion, data](int rc) { completion(rc, data); });
}

int zoo_aexists(zhandle_t* zh, const char* path, int watch, stat_completion_t completion, const void* data)
{
    std::string p = path;
    return zksim::request(
        zh, [zh, p, watch, completion, data]() -> std::function<void()> {
            auto rep = zksim::S().world->exists(zh->sid, p, watch != 0);
            zksim::trace(zh, "exists " + p + (watch ? " (watch)" : "") + (rep.stat ? " -> yes" : " -> no"));
            return [zh, p, watch, rep, completion, data] {
                if (rep.ec)
                    return completion(zksim::rc_of(rep.ec), nullptr, data);
                if (watch)
                    (rep.stat ? zh->w_data : zh->w_exist).insert(p);
                if (!rep.stat)
                    return completion(ZNONODE, nullptr, data);
                const auto st = zksim::to_c(*rep.stat);
                completion(ZOK, &st, data);
            };
        },
        [completion, data](int rc) { completion(rc, nullptr, data); });
}

int zoo_aget(zhandle_t* zh, const char* path, int watch, data_completion_t completion, const void* data)
{
    std::string p = path;
    return zksim::request(
        zh, [zh, p, watch, completion, data]() -> std::function<void()> {
            auto rep = zksim::S().world->get_data(zh->sid, p, watch != 0);
            return [zh, p, watch, rep, completion, data] {
                const auto st = zksim::to_c(rep.stat);
                if (rep.ec)
                    return completion(zksim::rc_of(rep.ec), nullptr, -1, nullptr, data);
                if (watch)
                    zh->w_data.insert(p);
                completion(ZOK, rep.data.data(), static_cast<int>(rep.data.size()), &st, data);
            };
        },
        [completion, data](int rc) { completion(rc, nullptr, -1, nullptr, data); });
}

int zoo_aset(zhandle_t* zh, const char* path, const char* buffer, int buflen, int version,
             stat_completion_t completion, const void* data)
{
    zksim::set_data_req r{path, buffer ? std::string(buffer, static_cast<std::size_t>(std::max(buflen, 0))) : "",
                          version};
    return zksim::request(
        zh, [zh, r, completion, data]() -> std::function<void()> {
            auto rep = zksim::S().world->set_data(zh->sid, r);
            return [rep, completion, data] {
                const auto st = zksim::to_c(rep.stat);
                completion(zksim::rc_of(rep.ec), rep.ec ? nullptr : &st, data);
            };
        },
        [completion, data](int rc) { completion(rc, nullptr, data); });
}

int zoo_aget_children2(zhandle_t* zh, const char* path, int watch, strings_stat_completion_t completion,
                       const void* data)
{
    std::string p = path;
    return zksim::request(
        zh, [zh, p, watch, completion, data]() -> std::function<void()> {
            auto rep = zksim::S().world->get_children(zh->sid, p, watch != 0);
            if (std::getenv("ZKCORO_SIM_CAPI_TRACE")) {
                std::string l;
                for (auto& c : rep.children)
                    l += " " + c.substr(c.size() - 10);
                zksim::trace(zh, "children " + p + (watch ? " (watch)" : "") + " ->" + l);
            }
            return [zh, p, watch, rep, completion, data] {
                if (rep.ec)
                    return completion(zksim::rc_of(rep.ec), nullptr, nullptr, data);
                if (watch)
                    zh->w_child.insert(p);
                std::vector<char*> ptrs;
                for (auto& c : rep.children)
                    ptrs.push_back(const_cast<char*>(c.c_str()));
                String_vector v{static_cast<int32_t>(ptrs.size()), ptrs.data()};
                const auto st = zksim::to_c(rep.stat);
                completion(ZOK, &v, &st, data);
            };
        },
        [completion, data](int rc) { completion(rc, nullptr, nullptr, data); });
}

int zoo_amulti(zhandle_t* zh, int count, const zoo_op_t* ops, zoo_op_result_t* results, void_completion_t completion,
               const void* data)
{
    std::vector<zksim::multi_op> mops;
    for (int i = 0; i < count; ++i) {
        const auto& o = ops[i];
        if (o.type == ZOO_CREATE_OP)
            mops.emplace_back(zksim::create_req{o.create_op.path,
                                                o.create_op.data ? std::string(o.create_op.data, static_cast<std::size_t>(std::max(o.create_op.datalen, 0))) : "",
                                                zksim::mode_of(o.create_op.flags)});
        else if (o.type == ZOO_DELETE_OP)
            mops.emplace_back(zksim::remove_req{o.delete_op.path, o.delete_op.version});
        else if (o.type == ZOO_SETDATA_OP)
            mops.emplace_back(zksim::set_data_req{o.set_op.path,
                                                  o.set_op.data ? std::string(o.set_op.data, static_cast<std::size_t>(std::max(o.set_op.datalen, 0))) : "",
                                                  o.set_op.version});
        else if (o.type == ZOO_CHECK_OP)
            mops.emplace_back(zksim::check_req{o.check_op.path, o.check_op.version});
        else
            return ZBADARGUMENTS;
    }
    return zksim::request(
        zh, [zh, mops, ops, results, count, completion, data]() -> std::function<void()> {
            auto rep = zksim::S().world->multi(zh->sid, mops);
            return [rep, ops, results, count, completion, data] {
                for (int i = 0; i < count && i < static_cast<int>(rep.results.size()); ++i) {
                    auto& r = rep.results[static_cast<std::size_t>(i)];
                    results[i].err = zksim::rc_of(r.ec);
                    if (ops[i].type == ZOO_CREATE_OP && ops[i].create_op.buf && ops[i].create_op.buflen > 0 && !r.ec) {
                        const auto n = std::min<std::size_t>(r.path.size(), static_cast<std::size_t>(ops[i].create_op.buflen - 1));
                        std::memcpy(ops[i].create_op.buf, r.path.data(), n);
                        ops[i].create_op.buf[n] = '\0';
                    }
                    if (ops[i].type == ZOO_SETDATA_OP && ops[i].set_op.stat && !r.ec)
                        *ops[i].set_op.stat = zksim::to_c(r.stat);
                }
                completion(zksim::rc_of(rep.ec), data);
            };
        },
        [completion, data](int rc) { completion(rc, data); });
}

}  // extern "C"
