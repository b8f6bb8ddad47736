// The simulated C client's functions: what libzookeeper_st's do (zookeeper.h, 3.8), over the
// simulated network and zk_world (capi_sim.cpp). Defined in the test program, they take the
// library's place for libzkcoro (capi_sim.hpp).
#include "capi_sim_internal.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>

namespace zksim {

void hide_child(zhandle_t* zh, const std::string& parent, std::vector<std::string>& children, bool own)
{
    auto& s = S();
    auto lowest = children.end();
    for (auto it = children.begin(); it != children.end(); ++it) {
        const auto st = s.world->stat_of(parent + "/" + *it);
        if (it->size() < 10 || !st || (st->ephemeral_owner == zh->sid) != own)
            continue;
        if (lowest == children.end() || it->compare(it->size() - 10, 10, *lowest, lowest->size() - 10, 10) < 0)
            lowest = it;
    }
    if (lowest == children.end() || std::uniform_int_distribution<int>(0, 2)(s.rng) != 0)
        return;
    trace(zh, "lie: " + *lowest + " left out of the listing");
    ++s.counts.lies;
    children.erase(lowest);
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

}  // namespace zksim

extern "C" {

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
            if (zksim::S().lies & zksim::lie_hide_predecessor)
                zksim::hide_child(zh, p, rep.children, false);
            if (zksim::S().lies & zksim::lie_hide_own_node)
                zksim::hide_child(zh, p, rep.children, true);
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
