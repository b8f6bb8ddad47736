// The registry of requests and watches: what is pending on the current handle, how a request is
// submitted to the C library, how a watch event finds its handles, and the undo of abandoned
// creates.
#include "driver/client_impl.hpp"

#include <zkcoro/error.hpp>

#include <fmt/format.h>

namespace zkcoro::detail {

zkcoro::node_stat to_stat(const Stat* s) noexcept
{
    zkcoro::node_stat r;
    if (!s)
        return r;
    r.czxid = s->czxid;
    r.mzxid = s->mzxid;
    r.ctime = s->ctime;
    r.mtime = s->mtime;
    r.version = s->version;
    r.cversion = s->cversion;
    r.aversion = s->aversion;
    r.ephemeral_owner = s->ephemeralOwner;
    r.data_length = s->dataLength;
    r.num_children = s->numChildren;
    r.pzxid = s->pzxid;
    return r;
}

void watch_state::deliver(error_code e, watch_event ev)
{
    std::shared_ptr<op_state<watch_event>> w;
    {
        std::lock_guard lk(m);
        if (fired)
            return;
        fired = true;
        ec = e;
        event = std::move(ev);
        w = std::move(waiter);
    }
    if (w)
        w->complete(ec, event);
}

// ---------------------------------------------------------------------------------------------
// Requests

void client_impl::submit(const std::shared_ptr<op_base>& op,
                         const std::function<int(zhandle_t*, void*)>& fn)
{
    zk_guard g(this);
    if (closed_)
        return op->fail(closed_reason());
    if (!zh_ && fsm_.generation() > 0)
        return op->fail(make_zk_error(ZCONNECTIONLOSS));  // between handles (resolving after an expiry): retriable
    if (!zh_)
        return op->fail(client_errc::not_connected);
    // The C library owns the request (and one reference to the op) until it calls back.
    auto* req = new pending_request{op, this};
    int rc = fn(zh_, req);
    // On a handle whose session the library has just told us expired (before the driver replaces
    // it) every request is refused with ZINVALIDSTATE: say what it means, so that the caller's
    // handling of a lost session applies (the read-write lock's acquisitions failed with the
    // bare ZINVALIDSTATE there, 198 of 1800 in the simulation with faults).
    if (rc == ZINVALIDSTATE && zoo_state(zh_) == ZOO_EXPIRED_SESSION_STATE)
        rc = ZSESSIONEXPIRED;
    if (rc != ZOK) {
        delete req;
        return op->fail(make_zk_error(rc));
    }
    requests_sent.fetch_add(1, std::memory_order_relaxed);
    req->linked = true;
    req->next = ops_head_;
    if (ops_head_)
        ops_head_->prev = req;
    ops_head_ = req;
    // A request the library could not flush at once (large, or a full socket buffer) needs
    // write readiness now, not at the next ping.
    rearm();
}

void client_impl::unlink(pending_request* r) noexcept
{
    if (!r->linked)
        return;
    ++delivered_;
    if (r->prev)
        r->prev->next = r->next;
    else
        ops_head_ = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->prev = r->next = nullptr;
    r->linked = false;
}

void client_impl::add_watch(bool child, const std::string& path, std::shared_ptr<watch_state> w)
{
    (child ? child_watches_ : data_watches_)[path].push_back(std::move(w));
}

void client_impl::cleanup_node(std::string path)
{
    log(log_level::info, fmt::format("deleting {}, created by an abandoned request", path));
    if (!zh_ || fsm_.state() != session_state::connected) {
        cleanup_paths_.push_back(std::move(path));
        return;
    }
    auto* ctx = new std::pair<client_impl*, std::string>(this, path);
    int rc = zoo_adelete(
        zh_, path.c_str(), -1,
        [](int result, const void* data) {
            std::unique_ptr<std::pair<client_impl*, std::string>> c(
                static_cast<std::pair<client_impl*, std::string>*>(const_cast<void*>(data)));
            if (result == ZCONNECTIONLOSS || result == ZOPERATIONTIMEOUT)
                c->first->cleanup_paths_.push_back(std::move(c->second));
        },
        ctx);
    if (rc != ZOK) {
        delete ctx;
        cleanup_paths_.push_back(std::move(path));
    }
}

void client_impl::on_watch_event(int type, const char* path)
{
    ++delivered_;
    if (!path)
        return;
    if (type == ZOO_CHANGED_EVENT && std::string_view(path) == ZOO_CONFIG_NODE)
        read_ensemble();  // the ensemble was reconfigured (driver/ensemble.cpp)
    watch_event ev;
    ev.path = path;
    bool data = false, child = false;
    if (type == ZOO_CREATED_EVENT) {
        ev.type = watch_event_type::created;
        data = true;
    } else if (type == ZOO_CHANGED_EVENT) {
        ev.type = watch_event_type::data_changed;
        data = true;
    } else if (type == ZOO_CHILD_EVENT) {
        ev.type = watch_event_type::children_changed;
        child = true;
    } else if (type == ZOO_DELETED_EVENT) {
        ev.type = watch_event_type::deleted;
        data = child = true;
    } else {
        return;
    }
    watch_events.fetch_add(1, std::memory_order_relaxed);
    for (auto [wanted, map] : {std::pair{data, &data_watches_}, std::pair{child, &child_watches_}}) {
        if (!wanted)
            continue;
        auto it = map->find(ev.path);
        if (it == map->end())
            continue;
        map->take(it, [&ev](auto& ws) {
            for (auto& w : ws)
                w->deliver({}, ev);
        });
    }
}

}  // namespace zkcoro::detail
