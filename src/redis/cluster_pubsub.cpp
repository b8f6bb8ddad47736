// Redis Cluster: release notifications with sharded pub/sub (SSUBSCRIBE on the master of the
// channel's slot, SPUBLISH in the scripts), beside cluster.cpp.
#include "redis/cluster.hpp"

#include "redis/redis_impl.hpp"
#include "redis/slot.hpp"

#include <charconv>
#include <mutex>

namespace zkcoro::detail {

namespace {

constexpr auto unplaced = static_cast<std::size_t>(-1);

// hiredis 0.14 (Debian's) knows no sharded pub/sub: an smessage frame reaches a callback only when
// the context is in subscribe mode and the channel's name is registered with it, which a SUBSCRIBE
// of that name does (hiredis also asserts on a frame nobody awaits outside subscribe mode). So each
// channel is subscribed twice on its link: SUBSCRIBE (no one PUBLISHes on it but an older client,
// whose message is heard too, on this one node) then SSUBSCRIBE. Unsubscribing goes in the other
// order: the last UNSUBSCRIBE takes hiredis out of subscribe mode, once no shard channel is left.
void send_subscribe(redis_link& l, const std::string& channel)
{
    l.send_push({"SUBSCRIBE", channel});
    l.send_push({"SSUBSCRIBE", channel});
}

void send_unsubscribe(redis_link& l, const std::string& channel)
{
    if (l.state() != redis_state::connected)
        return;  // its subscriptions went with the connection
    l.send_push({"SUNSUBSCRIBE", channel});
    l.send_push({"UNSUBSCRIBE", channel});
}

}  // namespace

const std::string& sharded_script(const std::string& text, const std::string*& sha)
{
    static std::mutex m;
    static std::map<const std::string*, std::pair<std::string, std::string>> made;
    std::lock_guard<std::mutex> l(m);
    auto [it, fresh] = made.try_emplace(&text);
    if (fresh) {
        std::string t = text;
        constexpr std::string_view from = "('publish',", to = "('spublish',";
        for (auto at = t.find(from); at != std::string::npos; at = t.find(from, at + to.size()))
            t.replace(at, from.size(), to);
        it->second.second = t == text ? std::string() : script_sha1(t);
        it->second.first = std::move(t);
    }
    if (it->second.second.empty())
        return text;  // publishes nothing: the caller's SHA stands
    sha = &it->second.second;
    return it->second.first;
}

void cluster_router::ssubscribe(const std::string& channel)
{
    channels_.emplace(channel, unplaced);
    if (!mapped_)
        return start();  // placed once the map is in
    place_channels();
}

void cluster_router::sunsubscribe(const std::string& channel)
{
    auto it = channels_.find(channel);
    if (it == channels_.end())
        return;
    const auto at = it->second;
    channels_.erase(it);
    if (at < nodes_.size() && nodes_[at].sub)
        send_unsubscribe(*nodes_[at].sub, channel);
}

bool cluster_router::ssubscribed(const std::string& channel) const
{
    auto it = channels_.find(channel);
    return it != channels_.end() && it->second < nodes_.size() && nodes_[it->second].sub &&
           nodes_[it->second].sub->state() == redis_state::connected;
}

// Each channel on the master of its slot in the map: a channel whose master changed (a failover,
// a slot moved) leaves the old one and joins the new one. A link not connected yet subscribes
// its channels when it is (and again after each reconnection).
void cluster_router::place_channels()
{
    if (closed_ || !mapped_)
        return;
    for (auto& [channel, at] : channels_) {
        const auto n = slots_[key_slot(channel)];
        if (n < 0 || static_cast<std::size_t>(n) == at)
            continue;
        if (at < nodes_.size() && nodes_[at].sub)
            send_unsubscribe(*nodes_[at].sub, channel);
        at = static_cast<std::size_t>(n);
        auto& l = sub_of(at);
        if (l.state() == redis_state::connected)
            send_subscribe(l, channel);
        else
            l.start();
    }
}

redis_link& cluster_router::sub_of(std::size_t i)
{
    auto& n = nodes_[i];
    if (!n.sub || n.sub->state() == redis_state::closed) {
        redis_url u = url_;
        u.host = n.host;
        u.port = n.port;
        u.cluster_nodes.clear();
        redis_link::hooks h;
        h.push = [w = weak_from_this(), i](const redis_reply& r) {
            if (auto self = w.lock())
                self->sub_push(i, r);
        };
        h.ready = [w = weak_from_this(), i] {
            auto self = w.lock();
            if (!self || self->closed_)
                return;
            for (auto& [channel, at] : self->channels_)
                if (at == i)
                    send_subscribe(*self->nodes_[i].sub, channel);
        };
        h.state = [w = weak_from_this()](redis_state s) {
            auto self = w.lock();
            if (self && (s == redis_state::reconnecting || s == redis_state::closed))
                self->refresh();  // the shard's master dropped: failed over?
        };
        n.sub = std::make_shared<redis_link>(strand_, std::move(u), opts_, true, std::move(h));
    }
    return *n.sub;
}

void cluster_router::sub_push(std::size_t i, const redis_reply& r)
{
    if (closed_)
        return;
    if (r.type == redis_reply::kind::error) {
        // "MOVED <slot> <host>:<port>" to an SSUBSCRIBE: the map was stale. The channels of that
        // slot on this node go where it says, and the map is read again.
        int slot = -1;
        const auto sp1 = r.str.find(' ');
        const auto sp2 = sp1 == std::string::npos ? sp1 : r.str.find(' ', sp1 + 1);
        const auto colon = r.str.rfind(':');
        unsigned port = 0;
        if (r.str.starts_with("MOVED ") && sp2 != std::string::npos && colon != std::string::npos && colon > sp2 &&
            std::from_chars(r.str.data() + sp1 + 1, r.str.data() + sp2, slot).ec == std::errc{} && slot >= 0 &&
            slot < cluster_slots &&
            std::from_chars(r.str.data() + colon + 1, r.str.data() + r.str.size(), port).ec == std::errc{} &&
            port > 0 && port < 65536) {
            const auto host = std::string_view(r.str).substr(sp2 + 1, colon - sp2 - 1);
            slots_[slot] = static_cast<std::int16_t>(
                node_index(host.empty() ? std::string_view(nodes_[i].host) : host, static_cast<std::uint16_t>(port)));
            for (auto& [channel, at] : channels_)
                if (at == i && key_slot(channel) == slot)
                    at = unplaced;
            place_channels();
        }
        return refresh();
    }
    if (r.type != redis_reply::kind::array || r.elements.size() < 2)
        return;
    const auto& kind = r.elements[0].str;
    if (kind == "sunsubscribe") {
        // Not ours (we left): the node's slot moved away; join where the map says, once read.
        auto it = channels_.find(r.elements[1].str);
        if (it != channels_.end() && it->second == i) {
            it->second = unplaced;
            refresh();
        }
        return;
    }
    if (kind == "subscribe" || kind == "unsubscribe")
        return;  // the plain twin of a shard channel (see send_subscribe)
    if (on_push)
        on_push(r);
}

// The redis_impl side (beside client.cpp).
bool redis_impl::cluster_subscribe(const std::string& channel, bool first)
{
    if (!cluster_)
        start_cluster();
    if (!cluster_->on_push)
        cluster_->on_push = [w = weak_from_this()](const redis_reply& r) {
            if (auto self = w.lock())
                self->on_push(r);
        };
    if (first)
        cluster_->ssubscribe(channel);
    return cluster_->ssubscribed(channel);
}

void redis_impl::cluster_unsubscribe(const std::string& channel)
{
    if (cluster_)
        cluster_->sunsubscribe(channel);
}

}  // namespace zkcoro::detail
