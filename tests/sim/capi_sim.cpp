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
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
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
    // Requests sent and not answered yet: each one's completion with an error (ZCLOSING at close).
    std::map<std::uint64_t, std::function<void(int)>> pending;
    std::uint64_t next_request = 0;
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
};

sim_state& S()
{
    static sim_state s;
    return s;
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

// To the server: applied when it arrives, after everything the handle sent before.
void up(zhandle_t* zh, std::function<void()> apply)
{
    const auto t = std::max(S().now_ns.load() + latency_ns(), zh->last_up_ns + 1);
    zh->last_up_ns = t;
    at(t, [zh, f = std::move(apply)] {
        if (alive(zh))
            f();
    });
}

// To the client: ready for zookeeper_process when it arrives, after what was sent before it.
void down(zhandle_t* zh, std::function<void()> deliver)
{
    const auto t = std::max(S().now_ns.load() + latency_ns(), zh->last_down_ns + 1);
    zh->last_down_ns = t;
    at(t, [zh, f = std::move(deliver)] {
        if (!alive(zh))
            return;
        zh->ready.push_back(f);
        const std::uint64_t one = 1;
        (void)!::write(zh->efd, &one, sizeof one);
    });
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

// A request: `apply` runs on the server and returns the completion's call (run on the client);
// `fail` completes it with an error code instead (ZCLOSING when the handle closes first).
int request(zhandle_t* zh, std::function<std::function<void()>()> apply, std::function<void(int)> fail)
{
    if (!alive(zh) || zh->state == ZOO_EXPIRED_SESSION_STATE)
        return ZINVALIDSTATE;
    const auto id = zh->next_request++;
    zh->pending.emplace(id, std::move(fail));
    up(zh, [zh, id, apply = std::move(apply)] {
        auto reply = apply();
        send_events();  // a write's events before its reply
        down(zh, [zh, id, reply = std::move(reply)] {
            zh->pending.erase(id);
            reply();
        });
    });
    return ZOK;
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
        down(zh, [zh] {
            zh->state = ZOO_CONNECTED_STATE;
            if (zh->watcher)
                zh->watcher(zh, ZOO_SESSION_EVENT, ZOO_CONNECTED_STATE, "", zh->context);
        });
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
            return [rep, completion, data] {
                if (rep.ec)
                    return completion(zksim::rc_of(rep.ec), nullptr, data);
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
            return [rep, completion, data] {
                const auto st = zksim::to_c(rep.stat);
                if (rep.ec)
                    return completion(zksim::rc_of(rep.ec), nullptr, -1, nullptr, data);
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
            return [rep, completion, data] {
                if (rep.ec)
                    return completion(zksim::rc_of(rep.ec), nullptr, nullptr, data);
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
