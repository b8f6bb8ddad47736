// redis_client: the facade, the URL and the subscriptions (the error category: redis/errors.cpp).
#include "redis/cluster.hpp"
#include "redis/redis_impl.hpp"
#include "redis/sentinel.hpp"

#include <zkcoro/detail/access.hpp>

#include <zkcoro/redis.hpp>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/uuid/detail/sha1.hpp>

#include <fmt/format.h>

#include <cctype>
#include <charconv>

namespace zkcoro {

std::string_view to_string(redis_state s) noexcept
{
    switch (s) {
    case redis_state::idle: return "idle";
    case redis_state::connecting: return "connecting";
    case redis_state::connected: return "connected";
    case redis_state::reconnecting: return "reconnecting";
    case redis_state::closed: return "closed";
    }
    return "unknown";
}

namespace detail {

std::string script_sha1(const std::string& script)
{
    boost::uuids::detail::sha1 h;
    h.process_bytes(script.data(), script.size());
    boost::uuids::detail::sha1::digest_type d;
    h.get_digest(d);
    return fmt::format("{:08x}{:08x}{:08x}{:08x}{:08x}", d[0], d[1], d[2], d[3], d[4]);
}

redis_strand make_redis_strand(const asio::any_io_executor& ex)
{
    if (const auto* io = ex.target<asio::io_context::executor_type>())
        return asio::make_strand(*io);
    return asio::make_strand(ex);
}

redis_impl::redis_impl(asio::any_io_executor e, std::string_view u, redis_options o)
    : ex(std::move(e)), strand(make_redis_strand(ex)), opts(std::move(o))
{
    url = parse_redis_url(u, url_ec, &url_why);
    if (url_ec) {
        state = redis_state::closed;
        error_text = url_why;
    }
}

void redis_impl::log(log_level level, std::string_view message) const
{
    if (opts.log)
        opts.log(level, message);
}

error_code redis_impl::closed_reason() const
{
    if (cluster_)
        return cluster_->last_code();
    return cmd_ && cmd_->last_code() ? cmd_->last_code() : error_code(redis_errc::closed);
}

void redis_impl::on_state(redis_state s)
{
    state = s;
    if (s == redis_state::connected && cmd_) {
        connects = cmd_->connects;
        const auto& at = cmd_->url();  // with Sentinel: the master it named
        std::lock_guard lk(error_m);
        server_text = at.host.find(':') != std::string::npos ? fmt::format("[{}]:{}", at.host, at.port)
                                                             : fmt::format("{}:{}", at.host, at.port);
    }
    if (s == redis_state::closed && watcher_)
        watcher_->close();  // the first connection failed (or close()): stop following failovers
    if (s == redis_state::closed && cmd_ && !cmd_->last_error().empty()) {
        std::lock_guard lk(error_m);
        error_text = cmd_->last_error();
    }
    if (cluster_ && (s == redis_state::connected || (s == redis_state::closed && !cluster_->last_error().empty()))) {
        connects = cluster_->connects;
        std::lock_guard lk(error_m);
        (s == redis_state::connected ? server_text : error_text) =
            s == redis_state::connected ? cluster_->server() : cluster_->last_error();
    }
    if (s == redis_state::connected || s == redis_state::closed) {
        auto waiters = std::move(connect_waiters_);
        connect_waiters_.clear();
        error_code ec;
        if (s == redis_state::closed)
            ec = closed_reason();
        for (auto& w : waiters)
            w->complete(ec);
    }
    auto sw = std::move(state_waiters_);
    state_waiters_.clear();
    for (auto& [known, op] : sw) {
        if (known != s)
            op->complete({}, s);
        else
            state_waiters_.emplace_back(known, std::move(op));
    }
}

void redis_impl::connect(std::shared_ptr<op_state<>> op)
{
    if (url_ec)
        return void(op->fail(url_ec));
    auto s = state.load();
    if (s == redis_state::connected)
        return void(op->complete({}));
    if (s == redis_state::closed)
        return void(op->fail(closed_reason()));
    op->bind_cancellation();
    connect_waiters_.push_back(std::move(op));
    if (!url.cluster_nodes.empty())
        return start_cluster();
    if (!cmd_) {
        std::weak_ptr<redis_impl> w = shared_from_this();
        redis_link::hooks h;
        h.state = [w](redis_state st) {
            if (auto self = w.lock())
                self->on_state(st);
        };
        if (!url.sentinels.empty()) {
            set_sentinel_hooks(h, strand, url, opts);
            watch();
        }
        cmd_ = std::make_shared<redis_link>(strand, url, opts, false, std::move(h));
    }
    cmd_->start();
}

void redis_impl::exec(command_args args, std::shared_ptr<reply_op> op, const std::string* script)
{
    if (url_ec)
        return void(op->fail(url_ec));
    if (!cmd_) {
        // redis+cluster://: routed by key (a client of one server or of sentinels comes here at
        // its first command only: routing costs it nothing).
        if (!url.cluster_nodes.empty())
            return cluster_exec(args, std::move(op), script);
        // The first command connects.
        auto c = detail::make_pooled<op_state<>>([](error_code) {}, strand);
        connect(std::move(c));
    }
    if (!cmd_)
        return void(op->fail(redis_errc::closed));
    cmd_->send(args, std::move(op), script);
    sent = cmd_->sent;
}

void redis_impl::eval(const std::string& script, const std::string& sha1, command_args keys_and_args, int nkeys,
                      std::shared_ptr<reply_op> op)
{
    if (!url.cluster_nodes.empty() && !url_ec)
        return cluster_eval_tracked(script, sha1, keys_and_args, nkeys, std::move(op), nullptr);
    // EVALSHA; the link sends EVAL instead the first time its connection runs the script, and
    // drops the connection on NOSCRIPT (see redis_link::send): a NOSCRIPT is never retried here,
    // as a retry would run after the commands sent behind it.
    char n[12];
    const auto n_end = std::to_chars(n, n + sizeof n, nkeys).ptr;
    arg_views args{"EVALSHA", sha1, std::string_view(n, static_cast<std::size_t>(n_end - n))};
    args.insert(args.end(), keys_and_args.begin(), keys_and_args.end());
    exec(args, std::move(op), &script);
}

std::shared_ptr<redis_link> redis_impl::sub_link()
{
    if (!sub_) {
        std::weak_ptr<redis_impl> w = shared_from_this();
        redis_link::hooks h;
        h.push = [w](const redis_reply& r) {
            if (auto self = w.lock())
                self->on_push(r);
        };
        h.ready = [w] {
            // (Re)subscribe to every channel someone listens on.
            auto self = w.lock();
            if (!self)
                return;
            for (auto& [channel, fns] : self->subs_)
                if (!fns.empty())
                    self->sub_->send_push({"SUBSCRIBE", channel});
        };
        if (!url.sentinels.empty())
            set_sentinel_hooks(h, strand, url, opts);
        sub_ = std::make_shared<redis_link>(strand, url, opts, true, std::move(h));
        sub_->start();
    }
    return sub_;
}

std::uint64_t redis_impl::subscribe(const std::string& channel, std::function<void(channel_event, std::string_view)> fn)
{
    auto id = next_sub_++;
    auto& fns = subs_[channel];
    bool first = fns.empty();
    fns.emplace(id, std::move(fn));
    if (url_ec)
        return id;
    // On a cluster: sharded, on the channel's shard (cluster_pubsub.cpp).
    auto link = url.cluster_nodes.empty() ? sub_link() : nullptr;
    const bool up = link ? link->state() == redis_state::connected : cluster_subscribe(channel, first);
    if (link && first && up)
        link->send_push({"SUBSCRIBE", channel});
    if (!first && up)
        asio::post(strand, [w = weak_from_this(), channel, id] {
            // Already subscribed: tell the newcomer at once (after it has stored its id).
            auto self = w.lock();
            if (!self)
                return;
            auto it = self->subs_.find(channel);
            if (it == self->subs_.end())
                return;
            if (auto f = it->second.find(id); f != it->second.end())
                f->second(channel_event::subscribed, {});
        });
    return id;
}

void redis_impl::unsubscribe(const std::string& channel, std::uint64_t id)
{
    auto it = subs_.find(channel);
    if (it == subs_.end())
        return;
    it->second.erase(id);
    if (it->second.empty()) {
        subs_.erase(it);
        if (!url.cluster_nodes.empty())
            cluster_unsubscribe(channel);
        else if (sub_ && sub_->state() == redis_state::connected)
            sub_->send_push({"UNSUBSCRIBE", channel});
    }
}

void redis_impl::on_push(const redis_reply& r)
{
    if (r.type != redis_reply::kind::array || r.elements.size() < 3)
        return;
    const auto& kind = r.elements[0].str;
    channel_event ev;
    if (kind == "subscribe" || kind == "ssubscribe")
        ev = channel_event::subscribed;
    else if (kind == "message" || kind == "smessage")
        ev = channel_event::message;
    else
        return;
    auto it = subs_.find(r.elements[1].str);
    if (it == subs_.end())
        return;
    // A callback may unsubscribe: call a copy.
    std::vector<std::function<void(channel_event, std::string_view)>> fns;
    for (auto& [id, f] : it->second)
        fns.push_back(f);
    const std::string_view message = ev == channel_event::message ? std::string_view(r.elements[2].str) : std::string_view();
    for (auto& f : fns)
        f(ev, message);
}

void redis_impl::watch()
{
    if (watcher_)
        return;
    std::weak_ptr<redis_impl> w = shared_from_this();
    watcher_ = watch_failovers(strand, url, opts, [w](std::string announcement) {
        auto self = w.lock();
        if (!self || self->closing_)
            return;
        ++self->failovers;
        // "<name> <old-ip> <old-port> <new-ip> <new-port>": a link already at the new master stays.
        auto sp = announcement.rfind(' ');
        auto sp2 = sp == std::string::npos || sp == 0 ? std::string::npos : announcement.rfind(' ', sp - 1);
        std::string at = sp2 == std::string::npos ? std::string() : announcement.substr(sp2 + 1);
        auto why = fmt::format("the sentinels switched the master: {}", announcement);
        for (auto* l : {&self->cmd_, &self->sub_})
            if (*l && fmt::format("{} {}", (*l)->url().host, (*l)->url().port) != at)
                (*l)->drop(why);
    });
}

void redis_impl::wait_state(redis_state known, std::shared_ptr<op_state<redis_state>> op)
{
    auto s = state.load();
    if (s != known)
        return void(op->complete({}, s));
    op->bind_cancellation();
    state_waiters_.emplace_back(known, std::move(op));
}

std::uint64_t redis_impl::add_close_hook(std::function<void()> fn)
{
    auto id = next_hook_++;
    close_hooks_.emplace(id, std::move(fn));
    return id;
}

void redis_impl::remove_close_hook(std::uint64_t id) { close_hooks_.erase(id); }

void redis_impl::close()
{
    closing_ = true;
    // A hook may remove itself: call a copy.
    auto hooks = close_hooks_;
    for (auto& [id, fn] : hooks)
        fn();
    if (cmd_)
        cmd_->close();
    if (cluster_)
        cluster_->close();
    if (sub_)
        sub_->close();
    if (watcher_)
        watcher_->close();
    state = redis_state::closed;
    on_state(redis_state::closed);
}

}  // namespace detail

redis_client::redis_client(executor_type ex, std::string_view url, redis_options opts)
    : impl_(std::make_shared<detail::redis_impl>(std::move(ex), url, std::move(opts)))
{
}

redis_client::~redis_client()
{
    if (impl_)
        close();
}

redis_client::executor_type redis_client::get_executor() const noexcept { return impl_->ex; }
redis_state redis_client::state() const noexcept { return impl_->state.load(); }
const redis_url& redis_client::url() const noexcept { return impl_->url; }
std::uint64_t redis_client::connects() const noexcept { return impl_->connects.load(); }
std::uint64_t redis_client::commands_sent() const noexcept { return impl_->sent.load(); }

std::string redis_client::server() const
{
    std::lock_guard lk(impl_->error_m);
    return impl_->server_text;
}

std::string redis_client::last_error() const
{
    std::lock_guard lk(impl_->error_m);
    return impl_->error_text;
}

void redis_client::start_connect(detail::any_handler<void(error_code)> h)
{
    auto op = detail::make_pooled<detail::op_state<>>(std::move(h), impl_->ex);
    asio::dispatch(impl_->strand, [impl = impl_, op] { impl->connect(op); });
}

void redis_client::start_exec(std::vector<std::string> args, detail::any_handler<void(error_code, redis_reply)> h)
{
    auto op = std::make_shared<detail::reply_op>(std::move(h), impl_->ex);
    asio::dispatch(impl_->strand, [impl = impl_, op, a = std::move(args)]() mutable { impl->exec(detail::views_of(a), op); });
}

void redis_client::start_wait_state(redis_state known, detail::any_handler<void(error_code, redis_state)> h)
{
    auto op = detail::make_pooled<detail::op_state<redis_state>>(std::move(h), impl_->ex);
    asio::dispatch(impl_->strand, [impl = impl_, op, known] { impl->wait_state(known, op); });
}

namespace detail {
const std::shared_ptr<redis_impl>& access::redis_of(const redis_client& c) noexcept { return c.impl_; }
}  // namespace detail

void redis_client::close()
{
    asio::dispatch(impl_->strand, [impl = impl_] { impl->close(); });
}

}  // namespace zkcoro
