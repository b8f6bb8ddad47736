// Redis Sentinel: master discovery and failover announcements.
#include "redis/sentinel.hpp"

#include <boost/asio/post.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace zkcoro::detail {

namespace {

// A URL for one sentinel: no credentials (they are the master's), no sentinels of its own.
redis_url sentinel_url(const redis_url::endpoint& e)
{
    redis_url u;
    u.host = e.host;
    u.port = e.port;
    return u;
}

redis_options sentinel_options(const redis_options& opts)
{
    redis_options o;
    o.connect_timeout = std::min(opts.connect_timeout, std::chrono::milliseconds(2000));
    o.reconnect_min = opts.reconnect_min;
    o.reconnect_max = std::min(opts.reconnect_max, std::chrono::milliseconds(500));
    return o;
}

// Called with the address, or the error; `at`: the index in `order` of the sentinel that named it.
using named = std::function<void(error_code, std::string, redis_url::endpoint, std::size_t at)>;

struct discovery : std::enable_shared_from_this<discovery> {
    redis_strand strand;
    redis_url url;
    redis_options opts;
    named done;
    std::vector<redis_url::endpoint> order;  // asked from `start` on, round to the one before it
    std::size_t start = 0;
    std::size_t asked = 0;
    std::vector<std::string> failures;  // "host:port: why", one per sentinel asked
    bool any_answered = false;
    std::shared_ptr<redis_link> link;

    void ask()
    {
        if (asked == order.size())
            return finish();
        const auto at = (start + asked++) % order.size();
        const auto& e = order[at];
        link = std::make_shared<redis_link>(strand, sentinel_url(e), sentinel_options(opts), false, redis_link::hooks{});
        auto op = std::make_shared<reply_op>(
            [self = shared_from_this(), e, at](error_code ec, redis_reply r) { self->answered(e, at, ec, std::move(r)); },
            strand);
        const std::string_view args[] = {"SENTINEL", "get-master-addr-by-name", url.master_name};
        link->send(args, std::move(op));
    }

    void answered(const redis_url::endpoint& e, std::size_t at, error_code ec, redis_reply r)
    {
        const auto where = fmt::format("{}:{}", e.host, e.port);
        std::string why;
        if (ec) {
            why = r.type == redis_reply::kind::error ? r.str
                  : link->last_error().empty()       ? ec.message()
                                                     : link->last_error();
        }
        auto l = std::move(link);
        asio::post(strand, [l] { l->close(); });
        if (!ec && r.type == redis_reply::kind::nil) {
            any_answered = true;
            failures.push_back(fmt::format("{}: knows no master '{}'", where, url.master_name));
            return ask();
        }
        if (!ec && r.type == redis_reply::kind::array && r.elements.size() == 2) {
            redis_url::endpoint m;
            m.host = r.elements[0].str;
            long port = std::strtol(r.elements[1].str.c_str(), nullptr, 10);
            if (!m.host.empty() && port > 0 && port < 65536) {
                m.port = static_cast<std::uint16_t>(port);
                return done({}, {}, std::move(m), at);
            }
            why = "its answer is not an address";
        } else if (!ec) {
            why = "its answer is not an address";
        }
        failures.push_back(fmt::format("{}: {}", where, why));
        ask();
    }

    void finish()
    {
        std::string list;
        for (const auto& f : failures)
            list += (list.empty() ? "" : "; ") + f;
        if (any_answered)
            return done(redis_errc::unknown_master,
                        fmt::format("no sentinel knows a master named '{}' ({})", url.master_name, list), {}, 0);
        done(redis_errc::no_sentinel,
             fmt::format("no sentinel answered for master '{}' ({})", url.master_name, list), {}, 0);
    }
};

void discover(const redis_strand& strand, const redis_url& url, const redis_options& opts,
              std::vector<redis_url::endpoint> order, std::size_t start, named done)
{
    auto d = std::make_shared<discovery>();
    d->strand = strand;
    d->url = url;
    d->opts = opts;
    d->done = std::move(done);
    d->order = std::move(order);
    d->start = start;
    d->ask();
}

// What one link knows of its sentinels (on the strand): the order to ask them in, and which of
// them named the address the link is trying.
struct sentinel_order {
    std::vector<redis_url::endpoint> order;
    std::optional<std::size_t> named_by;  // index in `order`
};

}  // namespace

void discover_master(const redis_strand& strand, const redis_url& url, const redis_options& opts,
                     redis_link::hooks::resolved done)
{
    discover(strand, url, opts, url.sentinels, 0,
             [done = std::move(done)](error_code ec, std::string why, redis_url::endpoint e, std::size_t) {
                 done(ec, std::move(why), std::move(e));
             });
}

void set_sentinel_hooks(redis_link::hooks& h, const redis_strand& strand, const redis_url& url,
                        const redis_options& opts)
{
    // The client guidelines' way (redis.io, "Sentinel client spec"): when the address a sentinel
    // named cannot be reached or is not a master (ROLE), the next attempt asks the sentinels
    // after that one first (a stale sentinel listed first is not asked again and again); a
    // sentinel whose master answered goes to the front of the list.
    auto list = std::make_shared<sentinel_order>();
    list->order = url.sentinels;
    h.resolve = [strand, url, opts, list](redis_link::hooks::resolved done) {
        const std::size_t start = list->named_by ? (*list->named_by + 1) % list->order.size() : 0;
        list->named_by.reset();
        discover(strand, url, opts, list->order, start,
                 [list, done = std::move(done)](error_code ec, std::string why, redis_url::endpoint e, std::size_t at) {
                     if (!ec)
                         list->named_by = at;
                     done(ec, std::move(why), std::move(e));
                 });
    };
    h.ready = [list, log = opts.log, then = std::move(h.ready)] {
        if (list->named_by && *list->named_by != 0) {
            const auto at = static_cast<std::ptrdiff_t>(*list->named_by);
            const auto& e = list->order[*list->named_by];
            if (log)
                log(log_level::debug, fmt::format("redis sentinel {}:{} named the master: asked first from now on",
                                                  e.host, e.port));
            std::rotate(list->order.begin(), list->order.begin() + at, list->order.begin() + at + 1);
        }
        list->named_by.reset();
        if (then)
            then();
    };
    h.retry_first = [](error_code ec, int tries) {
        return tries <= 6 && (ec == redis_errc::not_master || ec == redis_errc::connect_failed ||
                              ec == redis_errc::connection_lost);
    };
}

std::shared_ptr<redis_link> watch_failovers(const redis_strand& strand, const redis_url& url,
                                            const redis_options& opts, std::function<void(std::string)> on_switch)
{
    auto link_slot = std::make_shared<std::weak_ptr<redis_link>>();
    auto turn = std::make_shared<std::size_t>(0);
    redis_link::hooks h;
    h.resolve = [url, turn](redis_link::hooks::resolved done) {
        const auto& e = url.sentinels[(*turn)++ % url.sentinels.size()];
        done({}, {}, e);
    };
    h.retry_first = [](error_code, int) { return true; };  // until closed, one sentinel after another
    h.ready = [link_slot] {
        if (auto l = link_slot->lock())
            l->send_push({"SUBSCRIBE", "+switch-master"});
    };
    h.push = [name = url.master_name, on_switch = std::move(on_switch)](const redis_reply& r) {
        // ["message", "+switch-master", "<name> <old-ip> <old-port> <new-ip> <new-port>"]
        if (r.type != redis_reply::kind::array || r.elements.size() < 3 || r.elements[0].str != "message")
            return;
        const auto& text = r.elements[2].str;
        if (text.size() > name.size() && text.compare(0, name.size(), name) == 0 && text[name.size()] == ' ')
            on_switch(text);
    };
    auto o = sentinel_options(opts);
    o.log = opts.log;
    redis_url u = url;
    u.user.clear();
    u.password.clear();
    u.db = 0;
    u.sentinels.clear();  // no ROLE check: it is a sentinel
    auto l = std::make_shared<redis_link>(strand, u, o, true, std::move(h));
    *link_slot = l;
    l->start();
    return l;
}

// A link of a redis+sentinel:// client, on a failover or a READONLY reply (declared in link.hpp).
void redis_link::drop(std::string why)
{
    if (closing_ || state_ == redis_state::closed)
        return;
    if (ac_) {
        if (opts_.log)
            opts_.log(log_level::info, fmt::format("redis {}:{}: {}: finding the master again", url_.host, url_.port, why));
        fail_attempt(redis_errc::not_master, std::move(why));
        backoff_ = std::chrono::milliseconds{0};
        free_context();
        return;
    }
    if (state_ == redis_state::reconnecting && !resolving_) {
        // Waiting out a backoff: try now.
        timer_.cancel();
        backoff_ = std::chrono::milliseconds{0};
        attempt();
    }
}

}  // namespace zkcoro::detail
