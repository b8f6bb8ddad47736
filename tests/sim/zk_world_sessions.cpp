// The in-memory ZooKeeper tree (see zk_world.hpp): sessions, their connections and SetWatches.
#include "zk_world.hpp"

namespace zksim {

using zkcoro::zk_errc;

bool zk_world::alive(session_id s) const
{
    auto it = sessions_.find(s);
    return it != sessions_.end() && it->second.alive;
}

session_id zk_world::open_session()
{
    ++seq_;
    ++zxid_;  // createSession is a transaction
    auto id = next_session_++;
    sessions_[id] = session{};
    return id;
}

error_code zk_world::close_session(session_id s)
{
    auto* ss = live(s);
    if (!ss)
        return zk_errc::no_node;
    ++seq_;
    ++zxid_;  // closeSession: one transaction for all the deletions
    disconnect(s);
    ss->alive = false;
    std::vector<trigger> t;
    auto doomed = ss->ephemerals;  // a copy: do_remove edits the set
    for (auto& path : doomed)
        do_remove(path, -1, t);
    fire(t);
    return {};
}

void zk_world::disconnect(session_id s)
{
    auto* ss = live(s);
    if (!ss)
        return;
    for (auto* table : {&data_watches_, &child_watches_})
        for (auto it = table->begin(); it != table->end();) {
            it->second.erase(s);
            it = it->second.empty() ? table->erase(it) : std::next(it);
        }
    ss->events.clear();
    ss->connected = false;
}

std::uint64_t zk_world::reconnect(session_id s, std::int64_t relative_zxid, const watch_set& w)
{
    auto* ss = live(s);
    if (!ss)
        return 0;
    ss->connected = true;
    ++seq_;
    auto now = [&](watch_event_type type, const std::string& path) {
        ss->events.push_back(event{type, path, seq_});
    };
    for (auto& path : w.data) {
        auto it = nodes_.find(path);
        if (it == nodes_.end())
            now(watch_event_type::deleted, path);
        else if (it->second.stat.mzxid > relative_zxid)
            now(watch_event_type::data_changed, path);
        else
            data_watches_[path].insert(s);
    }
    for (auto& path : w.exist) {
        if (nodes_.count(path))
            now(watch_event_type::created, path);
        else
            data_watches_[path].insert(s);
    }
    for (auto& path : w.child) {
        auto it = nodes_.find(path);
        if (it == nodes_.end())
            now(watch_event_type::deleted, path);
        else if (it->second.stat.pzxid > relative_zxid)
            now(watch_event_type::children_changed, path);
        else
            child_watches_[path].insert(s);
    }
    return seq_;
}

}  // namespace zksim
