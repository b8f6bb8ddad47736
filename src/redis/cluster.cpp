// Redis Cluster: the slot map, one link per master, routing with MOVED, ASK and TRYAGAIN.
#include "redis/cluster.hpp"

#include "redis/redis_impl.hpp"
#include "redis/slot.hpp"

#include <boost/asio/steady_timer.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace zkcoro::detail {

namespace {

bool starts_with_word(std::string_view text, std::string_view upper)
{
    return text.size() > upper.size() && text[upper.size()] == ' ' && text.starts_with(upper);
}

// The parts of "MOVED 3999 127.0.0.1:6381" (or ASK): slot, host (may be empty), port.
bool parse_redirect(std::string_view text, int& slot, std::string_view& host, std::uint16_t& port)
{
    const auto sp1 = text.find(' ');
    const auto sp2 = sp1 == std::string_view::npos ? sp1 : text.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos)
        return false;
    const auto s = text.substr(sp1 + 1, sp2 - sp1 - 1);
    const auto addr = text.substr(sp2 + 1);
    const auto colon = addr.rfind(':');
    if (colon == std::string_view::npos)
        return false;
    const auto p = addr.substr(colon + 1);
    unsigned port_n = 0;
    if (std::from_chars(s.data(), s.data() + s.size(), slot).ec != std::errc{} || slot < 0 || slot >= cluster_slots ||
        std::from_chars(p.data(), p.data() + p.size(), port_n).ec != std::errc{} || port_n == 0 || port_n > 65535)
        return false;
    host = addr.substr(0, colon);
    if (host.starts_with('[') && host.ends_with(']'))
        host = host.substr(1, host.size() - 2);
    port = static_cast<std::uint16_t>(port_n);
    return true;
}

// A RESP2 map (a flat array of names and values): the value named `name`, or null.
const redis_reply* map_field(const redis_reply& map, std::string_view name)
{
    for (std::size_t i = 0; i + 1 < map.elements.size(); i += 2)
        if (map.elements[i].str == name)
            return &map.elements[i + 1];
    return nullptr;
}

std::int64_t reply_int(const redis_reply& r)
{
    if (r.type == redis_reply::kind::integer)
        return r.integer;
    std::int64_t n = -1;
    std::from_chars(r.str.data(), r.str.data() + r.str.size(), n);
    return n;
}

}  // namespace

void set_cluster_seed_hooks(redis_link::hooks& h, const redis_url& url)
{
    auto next = std::make_shared<std::size_t>(0);
    h.resolve = [seeds = url.cluster_nodes, next](redis_link::hooks::resolved done) {
        done({}, {}, seeds[(*next)++ % seeds.size()]);
    };
    h.retry_first = [n = static_cast<int>(url.cluster_nodes.size())](error_code, int tries) { return tries < n; };
}

struct cluster_router::routed {
    std::vector<std::string> args;
    const std::string* script;
    std::shared_ptr<reply_op> op;
    int slot;  // -1: no key
    int redirections = 0;  // MOVED and ASK followed
    std::optional<std::chrono::steady_clock::time_point> first_try_again;  // its first TRYAGAIN
    std::shared_ptr<answer_site> where = nullptr;  // exec_tracked
};

cluster_router::cluster_router(redis_strand strand, redis_url url, redis_options opts,
                               std::function<void(redis_state)> on_state)
    : strand_(std::move(strand)), url_(std::move(url)), opts_(std::move(opts)), on_state_(std::move(on_state))
{
    slots_.fill(-1);
}

void cluster_router::start()
{
    if (control_)
        return;
    redis_link::hooks h;
    h.state = [w = weak_from_this()](redis_state s) {
        if (auto self = w.lock())
            self->on_control_state(s);
    };
    set_cluster_seed_hooks(h, url_);
    control_ = std::make_shared<redis_link>(strand_, url_, opts_, false, std::move(h));
    control_->start();
}

void cluster_router::on_control_state(redis_state s)
{
    if (closed_)
        return;
    if (s == redis_state::connected) {
        connects = control_->connects;
        refresh();
        if (mapped_)
            on_state_(s);
        return;
    }
    if (s == redis_state::closed) {
        // The first connection failed (every seed), or the map said this is no cluster.
        closed_ = true;
        auto w = std::move(waiting_);
        waiting_.clear();
        for (auto& c : w)
            c->op->fail(last_code());
    }
    on_state_(s);
}

error_code cluster_router::last_code() const
{
    if (!map_error_.empty())
        return redis_errc::error_reply;
    return control_ && control_->last_code() ? control_->last_code() : error_code(redis_errc::closed);
}

std::string cluster_router::last_error() const
{
    if (!map_error_.empty())
        return map_error_;
    return control_ ? control_->last_error() : std::string();
}

std::string cluster_router::server() const
{
    if (!control_)
        return {};
    const auto& u = control_->url();
    return u.host.find(':') != std::string::npos ? fmt::format("[{}]:{}", u.host, u.port)
                                                 : fmt::format("{}:{}", u.host, u.port);
}

void cluster_router::refresh()
{
    if (closed_ || !control_ || control_->state() != redis_state::connected)
        return;  // read when the link to a seed is (back) up
    if (refreshing_) {
        refresh_again_ = true;
        return;
    }
    refreshing_ = true;
    ++refreshes;
    auto op = std::make_shared<reply_op>(
        [w = weak_from_this()](error_code ec, redis_reply r) {
            if (auto self = w.lock())
                self->on_map(ec, r, true);
        },
        strand_);
    const std::string_view args[] = {"CLUSTER", "SHARDS"};
    control_->send(args, std::move(op));
}

void cluster_router::on_map(error_code ec, const redis_reply& r, bool shards)
{
    refreshing_ = false;
    if (closed_)
        return;
    if (shards && ec == redis_errc::error_reply && r.str.find("SHARDS") != std::string::npos) {
        // Before Redis 7: CLUSTER SLOTS.
        refreshing_ = true;
        auto op = std::make_shared<reply_op>(
            [w = weak_from_this()](error_code e, redis_reply rr) {
                if (auto self = w.lock())
                    self->on_map(e, rr, false);
            },
            strand_);
        const std::string_view args[] = {"CLUSTER", "SLOTS"};
        return control_->send(args, std::move(op));
    }
    if (ec) {
        if (ec == redis_errc::connection_lost)
            return;  // read again once the link is back
        // Not a cluster node ("This instance has cluster support disabled"), or an ACL refusal.
        map_error_ = fmt::format("redis+cluster: {} refused CLUSTER {}: {}: is it a Redis Cluster node?", server(),
                                 shards ? "SHARDS" : "SLOTS", r.str.empty() ? ec.message() : r.str);
        if (opts_.log)
            opts_.log(log_level::error, map_error_);
        if (!mapped_)
            return control_->close();  // closed: the waiting commands fail with error_reply
        return;
    }
    std::array<std::int16_t, 16384> next;
    next.fill(-1);
    const auto& seed_host = control_->url().host;
    auto assign = [&](std::int64_t lo, std::int64_t hi, std::string_view host, std::int64_t port) {
        if (lo < 0 || hi >= cluster_slots || lo > hi || port <= 0 || port > 65535)
            return;
        if (host.empty() || host == "?")
            host = seed_host;  // the node does not know its own address: the one we reached
        const auto idx = static_cast<std::int16_t>(node_index(host, static_cast<std::uint16_t>(port)));
        std::fill(next.begin() + lo, next.begin() + hi + 1, idx);
    };
    for (const auto& e : r.elements) {
        if (shards) {
            // {slots: [lo, hi, ...], nodes: [{id, port, ip, endpoint, role, health, ...}, ...]}
            const auto* sl = map_field(e, "slots");
            const auto* ns = map_field(e, "nodes");
            if (!sl || !ns)
                continue;
            for (const auto& n : ns->elements) {
                const auto* role = map_field(n, "role");
                const auto* health = map_field(n, "health");
                const auto* port = map_field(n, "port");
                const auto* ep = map_field(n, "endpoint");
                const auto* ip = map_field(n, "ip");
                if (!role || role->str != "master" || !port || (health && health->str == "fail"))
                    continue;
                const std::string_view host = ep && !ep->str.empty() && ep->str != "?" ? ep->str
                                              : ip                                      ? ip->str
                                                                                        : std::string_view();
                for (std::size_t i = 0; i + 1 < sl->elements.size(); i += 2)
                    assign(reply_int(sl->elements[i]), reply_int(sl->elements[i + 1]), host, reply_int(*port));
                break;
            }
        } else if (e.elements.size() >= 3 && e.elements[2].elements.size() >= 2) {
            // [lo, hi, [host, port, id], replicas...]
            assign(reply_int(e.elements[0]), reply_int(e.elements[1]), e.elements[2].elements[0].str,
                   reply_int(e.elements[2].elements[1]));
        }
    }
    slots_ = next;
    const bool first = !mapped_;
    mapped_ = true;
    if (first && control_->state() == redis_state::connected)
        on_state_(redis_state::connected);
    auto w = std::move(waiting_);
    waiting_.clear();
    for (auto& c : w)
        route(std::move(c));
    place_channels();
    if (refresh_again_) {
        refresh_again_ = false;
        refresh();
    }
}

std::size_t cluster_router::node_index(std::string_view host, std::uint16_t port)
{
    for (std::size_t i = 0; i < nodes_.size(); ++i)
        if (nodes_[i].port == port && nodes_[i].host == host)
            return i;
    nodes_.push_back(node{std::string(host), port, nullptr, nullptr});
    return nodes_.size() - 1;
}

redis_link& cluster_router::link_of(std::size_t i)
{
    auto& n = nodes_[i];
    if (!n.link || n.link->state() == redis_state::closed) {
        // Opened at the first command for it; again after a first connection that failed.
        redis_url u = url_;
        u.host = n.host;
        u.port = n.port;
        u.cluster_nodes.clear();
        redis_link::hooks h;
        h.state = [w = weak_from_this()](redis_state s) {
            auto self = w.lock();
            if (self && (s == redis_state::reconnecting || s == redis_state::closed))
                self->refresh();  // a master dropped: failed over, or gone from the map?
        };
        n.link = std::make_shared<redis_link>(strand_, std::move(u), opts_, false, std::move(h));
    }
    return *n.link;
}

void cluster_router::exec(command_args args, std::shared_ptr<reply_op> op, const std::string* script)
{
    exec_tracked(args, std::move(op), script, nullptr);
}

void cluster_router::exec_on(std::size_t n, command_args args, std::shared_ptr<reply_op> op)
{
    if (closed_ || n >= nodes_.size())
        return void(op->fail(redis_errc::closed));
    link_of(n).send(args, std::move(op));
    ++sent;
}

std::uint64_t cluster_router::node_connects(std::size_t n) const
{
    return n < nodes_.size() && nodes_[n].link ? nodes_[n].link->connects : 0;
}

void cluster_router::exec_tracked(command_args args, std::shared_ptr<reply_op> op, const std::string* script,
                                  std::shared_ptr<answer_site> where)
{
    if (op->done)
        return;
    if (closed_)
        return void(op->fail(last_code()));
    auto key = routing_key(args);
    auto c = std::make_shared<routed>(routed{std::vector<std::string>(args.begin(), args.end()), script,
                                             std::move(op), key ? key_slot(*key) : -1, 0, std::nullopt, std::move(where)});
    c->op->bind_cancellation();
    if (!mapped_) {
        waiting_.push_back(std::move(c));
        return start();
    }
    route(std::move(c));
}

void cluster_router::route(std::shared_ptr<routed> c)
{
    if (c->op->done)
        return;
    std::int16_t n = c->slot >= 0 ? slots_[c->slot] : -1;
    if (c->slot < 0)
        for (auto s : {0, cluster_slots / 2, cluster_slots - 1})
            if (n < 0)
                n = slots_[s];
    if (n < 0) {
        redis_reply r;
        r.type = redis_reply::kind::error;
        r.str = c->slot >= 0 ? fmt::format("CLUSTERDOWN no master serves slot {} in the map read from {}", c->slot,
                                            server())
                             : fmt::format("CLUSTERDOWN no master in the map read from {}", server());
        refresh();
        return void(c->op->complete(redis_errc::cluster_down, std::move(r)));
    }
    send(std::move(c), static_cast<std::size_t>(n), false);
}

void cluster_router::send(std::shared_ptr<routed> c, std::size_t to_node, bool asking)
{
    auto& l = link_of(to_node);
    if (asking) {
        // ASKING, then the command, on one connection: the node runs it for the importing slot.
        const std::string_view a[] = {"ASKING"};
        l.send(a, std::make_shared<reply_op>([](error_code, redis_reply) {}, strand_));
    }
    auto inner = std::make_shared<reply_op>(
        [w = weak_from_this(), c, to_node](error_code ec, redis_reply r) {
            if (auto self = w.lock())
                return self->answered(c, to_node, ec, std::move(r));
            c->op->complete(ec, std::move(r));
        },
        strand_);
    inner->inline_ok = true;  // answered() runs in the reply's callback, on the strand
    l.send(views_of(c->args), std::move(inner), c->script);
    ++sent;
}

void cluster_router::answered(std::shared_ptr<routed> c, std::size_t from_node, error_code ec, redis_reply r)
{
    if (c->op->done)
        return;  // cancelled
    if (r.type == redis_reply::kind::error && c->redirections < max_redirections && !closed_) {
        int slot = 0;
        std::string_view host;
        std::uint16_t port = 0;
        const bool moved_to = starts_with_word(r.str, "MOVED");
        if ((moved_to || starts_with_word(r.str, "ASK")) && parse_redirect(r.str, slot, host, port)) {
            ++c->redirections;
            const auto to = node_index(host.empty() ? std::string_view(nodes_[from_node].host) : host, port);
            if (!moved_to) {
                ++asked;
                return send(std::move(c), to, true);  // the map stays: the slot is still moving
            }
            ++moved;
            slots_[slot] = static_cast<std::int16_t>(to);
            refresh();  // one slot moved: others may have too
            return send(std::move(c), to, false);
        }
    }
    const bool try_again = r.type == redis_reply::kind::error && r.str.starts_with("TRYAGAIN");
    const auto now = std::chrono::steady_clock::now();
    if (try_again && !c->first_try_again)
        c->first_try_again = now;
    if (try_again && now - *c->first_try_again < try_again_for && !closed_) {
        // Some of a multi-key command's keys have moved, some not yet (the lock's acquire script
        // with its fencing counter moved and its key free): sent again until the move is done.
        ++tried_again;
        c->redirections = 0;  // each try may meet ASK again (the source still names the target)
        auto t = std::make_shared<asio::steady_timer>(strand_, std::chrono::milliseconds(20));
        return t->async_wait([t, w = weak_from_this(), c = std::move(c)](error_code) mutable {
            if (auto self = w.lock())
                return self->route(std::move(c));
            c->op->fail(redis_errc::closed);
        });
    }
    if (try_again)
        ++try_again_answers;
    if (ec == redis_errc::connection_lost || r.str.starts_with("CLUSTERDOWN"))
        refresh();
    if (c->where) {
        c->where->node = from_node;
        c->where->connects = node_connects(from_node);
    }
    if (c->op->inline_ok)
        c->op->complete_here(ec, std::move(r));
    else
        c->op->complete(ec, std::move(r));
}

void cluster_router::close()
{
    if (closed_ && !control_)
        return;
    closed_ = true;
    auto w = std::move(waiting_);
    waiting_.clear();
    for (auto& c : w)
        c->op->fail(redis_errc::closed);
    if (control_)
        control_->close();
    for (auto& n : nodes_)
        for (auto* l : {&n.link, &n.sub})
            if (*l)
                (*l)->close();
}

// The redis_impl side (beside client.cpp).
void redis_impl::start_cluster()
{
    if (!cluster_) {
        std::weak_ptr<redis_impl> w = shared_from_this();
        cluster_ = std::make_shared<cluster_router>(strand, url, opts, [w](redis_state st) {
            if (auto self = w.lock())
                self->on_state(st);
        });
    }
    cluster_->start();
}

void redis_impl::cluster_exec(command_args args, std::shared_ptr<reply_op> op, const std::string* script)
{
    if (!cluster_)
        start_cluster();
    cluster_->exec(args, std::move(op), script);
    sent = cluster_->sent;
}

void redis_impl::cluster_eval_tracked(const std::string& script, const std::string& sha, command_args keys_and_args,
                                      int nkeys, std::shared_ptr<reply_op> op,
                                      std::shared_ptr<cluster_answer_site> where)
{
    if (!cluster_)
        start_cluster();
    const auto n = std::to_string(nkeys);
    const std::string* run_sha = &sha;
    const auto& run = sharded_script(script, run_sha);  // PUBLISH made SPUBLISH
    arg_views args{"EVALSHA", *run_sha, n};
    args.insert(args.end(), keys_and_args.begin(), keys_and_args.end());
    cluster_->exec_tracked(args, std::move(op), &run, std::move(where));
    sent = cluster_->sent;
}

}  // namespace zkcoro::detail
