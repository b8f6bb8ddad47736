// The in-memory ZooKeeper tree (see zk_world.hpp). The rules follow ZooKeeper 3.8's server as
// observed by tests/sim/test_zk_world_vs_server.cpp; the comments say where a rule comes from.
#include "zk_world.hpp"

#include <zkcoro/path.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace zksim {

using zkcoro::client_errc;
using zkcoro::zk_errc;

namespace {

// The parent of a path as the server computes it for a create: everything before the last '/'
// ("/a/" -> "/a", the sequential form of a name made of the number alone).
std::string parent_of(const std::string& path)
{
    auto pos = path.rfind('/');
    return pos == 0 || pos == std::string::npos ? std::string("/") : path.substr(0, pos);
}

std::string name_of(const std::string& path) { return path.substr(path.rfind('/') + 1); }

bool version_ok(std::int32_t wanted, const node_stat& st) { return wanted == -1 || wanted == st.version; }

bool is_ephemeral(create_mode m)
{
    return m == create_mode::ephemeral || m == create_mode::ephemeral_sequential;
}

// FNV-1a over the name, started from the salt: the scrambled but fixed order of get_children.
std::uint64_t order_key(std::uint64_t salt, const std::string& name)
{
    std::uint64_t h = 1469598103934665603ull ^ (salt * 0x9E3779B97F4A7C15ull);
    for (unsigned char c : name)
        h = (h ^ c) * 1099511628211ull;
    return h;
}

}  // namespace

zk_world::zk_world(std::uint64_t order_salt) : order_salt_(order_salt)
{
    nodes_["/"] = node{};  // the root: all-zero Stat, as on a fresh server (which also has /zookeeper)
}

zk_world::session* zk_world::live(session_id s)
{
    auto it = sessions_.find(s);
    return it == sessions_.end() || !it->second.alive ? nullptr : &it->second;
}

// What stops a request before it is applied: a path zkcoro's client refuses before sending
// (client_errc::invalid_path), a session that is gone, or one with no connection (the request
// was not sent: connection_loss, as the C client reports it).
error_code zk_world::admit(session_id s, const std::string& path, bool sequential)
{
    if (auto p = zkcoro::check_path(path, sequential); !p.ok())
        return p.ec;
    auto* ss = live(s);
    if (!ss)
        return zk_errc::session_expired;
    return ss->connected ? error_code{} : error_code{zk_errc::connection_loss};
}

error_code zk_world::do_check(const std::string& path, std::int32_t version) const
{
    auto it = nodes_.find(path);
    if (it == nodes_.end())
        return zk_errc::no_node;
    if (!version_ok(version, it->second.stat))
        return zk_errc::bad_version;
    return {};
}

error_code zk_world::do_create(session_id s, const create_req& r, std::string& made, std::vector<trigger>& t)
{
    auto parent_path = parent_of(r.path);
    auto pit = nodes_.find(parent_path);
    if (pit == nodes_.end())
        return zk_errc::no_node;
    auto& parent = pit->second;
    if (parent.stat.ephemeral_owner != 0)  // an ephemeral (a container shows owner 0)
        return zk_errc::no_children_for_ephemerals;
    auto name = r.path;
    if (zkcoro::is_sequential(r.mode))
        name += fmt::format("{:010d}", parent.creates);  // see node::creates
    if (nodes_.count(name))
        return zk_errc::node_exists;
    made = std::move(name);
    node n;
    n.data = r.data;
    n.stat.czxid = n.stat.mzxid = n.stat.pzxid = zxid_;
    n.stat.ctime = n.stat.mtime = now_ms_;
    n.stat.data_length = static_cast<std::int32_t>(r.data.size());
    if (is_ephemeral(r.mode)) {
        n.stat.ephemeral_owner = s;
        sessions_.at(s).ephemerals.insert(made);
    } else if (r.mode == create_mode::container) {
        n.container = true;
        containers_.insert(made);
    }
    parent.children.insert(name_of(made));
    parent.creates += 1;
    parent.stat.cversion = 2 * parent.creates - static_cast<std::int32_t>(parent.children.size());
    parent.stat.num_children += 1;
    parent.stat.pzxid = zxid_;
    nodes_.emplace(made, std::move(n));
    t.push_back({watch_event_type::created, made});
    t.push_back({watch_event_type::children_changed, parent_path});
    return {};
}

error_code zk_world::do_remove(const std::string& path, std::int32_t version, std::vector<trigger>& t,
                               bool only_if_container)
{
    if (path == "/")
        return zk_errc::bad_arguments;  // the server refuses its special paths
    auto it = nodes_.find(path);
    if (it == nodes_.end())
        return zk_errc::no_node;
    if (only_if_container && !it->second.container)
        return zk_errc::bad_arguments;
    if (!version_ok(version, it->second.stat))
        return zk_errc::bad_version;
    if (!it->second.children.empty())
        return zk_errc::not_empty;
    auto owner = it->second.stat.ephemeral_owner;
    if (it->second.container)
        containers_.erase(path);
    else if (owner != 0)
        sessions_.at(owner).ephemerals.erase(path);
    nodes_.erase(it);
    auto parent_path = parent_of(path);
    auto& parent = nodes_.at(parent_path);
    parent.children.erase(name_of(path));
    parent.stat.cversion = 2 * parent.creates - static_cast<std::int32_t>(parent.children.size());
    parent.stat.num_children -= 1;
    parent.stat.pzxid = zxid_;
    t.push_back({watch_event_type::deleted, path});
    t.push_back({watch_event_type::children_changed, parent_path});
    return {};
}

error_code zk_world::do_set(const std::string& path, const std::string& data, std::int32_t version,
                            std::vector<trigger>& t)
{
    if (auto ec = do_check(path, version))
        return ec;
    auto& n = nodes_.at(path);
    n.data = data;
    n.stat.version += 1;
    n.stat.mzxid = zxid_;
    n.stat.mtime = now_ms_;
    n.stat.data_length = static_cast<std::int32_t>(data.size());
    t.push_back({watch_event_type::data_changed, path});
    return {};
}

void zk_world::deliver(std::map<std::string, std::set<session_id>>& table, const std::string& path,
                       watch_event_type type, std::set<session_id>* already)
{
    auto it = table.find(path);
    if (it == table.end())
        return;
    auto watchers = std::move(it->second);  // one-shot: the entry goes, for every session
    table.erase(it);
    for (auto s : watchers) {
        if (already && !already->insert(s).second)
            continue;  // one NodeDeleted per session, though it watched data and children
        if (auto* ss = live(s))
            ss->events.push_back(event{type, path, seq_});
    }
}

// The server's DataTree: a create fires NodeCreated on the path's data watches, then
// NodeChildrenChanged on the parent's child watches; a delete fires NodeDeleted on the path's
// data and child watches (once per session), then NodeChildrenChanged on the parent; a setData
// fires NodeDataChanged on the data watches. An exists watch on a missing node is a data watch.
void zk_world::fire(const std::vector<trigger>& t)
{
    for (auto& x : t) {
        if (x.type == watch_event_type::children_changed) {
            deliver(child_watches_, x.path, x.type, nullptr);
        } else if (x.type == watch_event_type::deleted) {
            std::set<session_id> told;
            deliver(data_watches_, x.path, x.type, &told);
            deliver(child_watches_, x.path, x.type, &told);
        } else {
            deliver(data_watches_, x.path, x.type, nullptr);
        }
    }
}

// A single write: admitted, stamped, given a zxid (even when it fails: the server logs an error
// transaction), its watches fired once it is applied.
template <class Reply, class Apply>
Reply zk_world::write(session_id s, const std::string& path, bool sequential, Apply apply)
{
    Reply rep;
    if ((rep.ec = admit(s, path, sequential)))
        return rep;
    rep.seq = ++seq_;
    ++zxid_;
    std::vector<trigger> t;
    apply(rep, t);
    fire(t);
    return rep;
}

create_reply zk_world::create(session_id s, const create_req& r)
{
    return write<create_reply>(s, r.path, zkcoro::is_sequential(r.mode), [&](create_reply& rep, auto& t) {
        if (!(rep.ec = do_create(s, r, rep.path, t)))
            rep.stat = nodes_.at(rep.path).stat;
    });
}

stat_reply zk_world::remove(session_id s, const remove_req& r)
{
    return write<stat_reply>(s, r.path, false, [&](stat_reply& rep, auto& t) { rep.ec = do_remove(r.path, r.version, t); });
}

stat_reply zk_world::set_data(session_id s, const set_data_req& r)
{
    return write<stat_reply>(s, r.path, false, [&](stat_reply& rep, auto& t) {
        if (!(rep.ec = do_set(r.path, r.data, r.version, t)))
            rep.stat = nodes_.at(r.path).stat;
    });
}

template <class Reply>
const zk_world::node* zk_world::read(session_id s, const std::string& path, Reply& rep)
{
    if ((rep.ec = admit(s, path)))
        return nullptr;
    rep.seq = ++seq_;
    auto it = nodes_.find(path);
    return it == nodes_.end() ? nullptr : &it->second;
}

exists_reply zk_world::exists(session_id s, std::string_view path, bool watch)
{
    exists_reply rep;
    std::string p(path);
    const node* n = read(s, p, rep);
    if (rep.ec)
        return rep;
    if (n)
        rep.stat = n->stat;
    if (watch)
        data_watches_[p].insert(s);  // also on a missing node: fires on its creation
    return rep;
}

data_reply zk_world::get_data(session_id s, std::string_view path, bool watch)
{
    data_reply rep;
    std::string p(path);
    const node* n = read(s, p, rep);
    if (rep.ec)
        return rep;
    if (!n) {
        rep.ec = zk_errc::no_node;  // and no watch is left
        return rep;
    }
    rep.data = n->data;
    rep.stat = n->stat;
    if (watch)
        data_watches_[p].insert(s);
    return rep;
}

children_reply zk_world::get_children(session_id s, std::string_view path, bool watch)
{
    children_reply rep;
    std::string p(path);
    const node* n = read(s, p, rep);
    if (rep.ec)
        return rep;
    if (!n) {
        rep.ec = zk_errc::no_node;
        return rep;
    }
    rep.children.assign(n->children.begin(), n->children.end());
    std::sort(rep.children.begin(), rep.children.end(), [&](const std::string& a, const std::string& b) {
        auto ka = order_key(order_salt_, a), kb = order_key(order_salt_, b);
        return ka != kb ? ka < kb : a < b;
    });
    rep.stat = n->stat;
    if (watch)
        child_watches_[p].insert(s);
    return rep;
}

multi_reply zk_world::multi(session_id s, const std::vector<multi_op>& ops)
{
    multi_reply rep;
    if (ops.empty() || ops.size() > 10000) {
        rep.ec = client_errc::invalid_argument;  // zkcoro's client refuses these
        return rep;
    }
    for (auto& op : ops) {
        auto p = std::visit(
            [](auto& x) {
                if constexpr (std::is_same_v<std::decay_t<decltype(x)>, create_req>)
                    return zkcoro::check_path(x.path, zkcoro::is_sequential(x.mode));
                else
                    return zkcoro::check_path(x.path);
            },
            op);
        if (!p.ok()) {
            rep.ec = p.ec;
            return rep;
        }
    }
    if ((rep.ec = admit(s, "/")))
        return rep;
    rep.seq = ++seq_;
    ++zxid_;  // one transaction, one zxid for all its ops, failed or not
    // Rollback by snapshot: the ops edit the tree in place; a failure puts the copies back.
    auto nodes_before = nodes_;
    auto containers_before = containers_;
    // Every session's ephemerals: a remove in the multi may take another session's node (a
    // rollback that restored only the caller's set lost that node at its owner's expiry: found
    // by the differential test, seed 4).
    std::map<session_id, std::set<std::string>> ephemerals_before;
    for (auto& [id, ss] : sessions_)
        if (ss.alive)
            ephemerals_before[id] = ss.ephemerals;
    std::vector<trigger> t;
    rep.results.resize(ops.size());
    std::size_t failed = ops.size();
    for (std::size_t i = 0; i < ops.size() && failed == ops.size(); ++i) {
        auto& res = rep.results[i];
        std::visit(
            [&](auto& x) {
                using T = std::decay_t<decltype(x)>;
                if constexpr (std::is_same_v<T, create_req>) {
                    res.ec = do_create(s, x, res.path, t);
                } else if constexpr (std::is_same_v<T, remove_req>) {
                    res.ec = do_remove(x.path, x.version, t);
                } else if constexpr (std::is_same_v<T, set_data_req>) {
                    res.ec = do_set(x.path, x.data, x.version, t);
                    if (!res.ec)
                        res.stat = nodes_.at(x.path).stat;
                } else {
                    res.ec = do_check(x.path, x.version);
                }
            },
            ops[i]);
        if (res.ec)
            failed = i;
    }
    if (failed == ops.size()) {
        fire(t);
        return rep;
    }
    nodes_ = std::move(nodes_before);
    containers_ = std::move(containers_before);
    for (auto& [id, set] : ephemerals_before)
        sessions_.at(id).ephemerals = std::move(set);
    rep.ec = rep.results[failed].ec;
    for (std::size_t i = 0; i < ops.size(); ++i) {
        if (i != failed)
            rep.results[i] = multi_result{};
        if (i > failed)
            rep.results[i].ec = zk_errc::runtime_inconsistency;
    }
    return rep;
}

std::vector<std::string> zk_world::reap_containers()
{
    std::vector<std::string> candidates, reaped;
    for (auto& path : containers_) {
        auto& n = nodes_.at(path);
        if (n.creates > 0 && n.children.empty())
            candidates.push_back(path);
    }
    for (auto& path : candidates) {
        ++seq_;
        ++zxid_;  // each a deleteContainer request of its own
        std::vector<trigger> t;
        if (!do_remove(path, -1, t, true))
            reaped.push_back(path);
        fire(t);
    }
    return reaped;
}

const std::deque<event>& zk_world::pending_events(session_id s) const
{
    static const std::deque<event> none;
    auto it = sessions_.find(s);
    return it == sessions_.end() ? none : it->second.events;
}

std::vector<event> zk_world::take_events(session_id s) { return take_events_through(s, UINT64_MAX); }

std::vector<event> zk_world::take_events_through(session_id s, std::uint64_t seq)
{
    std::vector<event> out;
    auto it = sessions_.find(s);
    if (it == sessions_.end())
        return out;
    auto& q = it->second.events;
    while (!q.empty() && q.front().seq <= seq) {
        out.push_back(std::move(q.front()));
        q.pop_front();
    }
    return out;
}

std::optional<node_stat> zk_world::stat_of(std::string_view path) const
{
    auto it = nodes_.find(std::string(path));
    if (it == nodes_.end())
        return std::nullopt;
    return it->second.stat;
}

std::vector<std::string> zk_world::children_of(std::string_view path) const
{
    auto it = nodes_.find(std::string(path));
    if (it == nodes_.end())
        return {};
    return {it->second.children.begin(), it->second.children.end()};
}

std::string zk_world::dump() const
{
    std::string out;
    for (auto& [path, n] : nodes_) {
        auto& st = n.stat;
        out += fmt::format("{} v={} cv={} n={} owner={} czxid={} mzxid={} pzxid={} data='{}'\n", path,
                           st.version, st.cversion, st.num_children,
                           n.container ? std::string("container") : std::to_string(st.ephemeral_owner),
                           st.czxid, st.mzxid, st.pzxid, n.data);
    }
    return out;
}

}  // namespace zksim
