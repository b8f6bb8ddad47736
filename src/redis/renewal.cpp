// The Redis lock's holder: the key's TTL renewed until the release or the loss.
#include "redis/backend.hpp"

#include <zkcoro/detail/access.hpp>

namespace zkcoro::detail {

namespace {

// Renews the key we hold every third of its TTL (sooner after a failure) until the release
// (ns->monitor_stop) or the loss: one timer and one pending reply, no coroutine. On the strand.
// The timer has two roles: the next renewal's time while none is in flight, and the bound on the
// one in flight (TTL less the safety margin after the last confirmed one) while it is.
class renewal : public std::enable_shared_from_this<renewal> {
public:
    renewal(std::shared_ptr<lock_object> s, std::shared_ptr<redis_backend> b, std::shared_ptr<node_state> ns,
            steady_clock::time_point confirmed)
        : s_(std::move(s)), b_(std::move(b)), ns_(std::move(ns)), timer_(s_->ex), confirmed_(confirmed),
          ttl_arg_(std::to_string(b_->opts.ttl.count()))
    {
    }

    void start()
    {
        ns_->monitor_stop.slot().assign([w = weak_from_this()](asio::cancellation_type) {
            if (auto self = w.lock()) {
                self->stopped_ = true;
                self->timer_.cancel();
            }
        });
        arm(std::min(confirmed_ + b_->opts.ttl / 3, lost_at()));
    }

private:
    steady_clock::time_point lost_at() const { return confirmed_ + b_->opts.ttl - b_->opts.safety_margin; }
    bool over() const { return stopped_ || ns_->lost || ns_->released; }

    void arm(steady_clock::time_point at)
    {
        timer_.expires_at(at);
        timer_.async_wait(pooled([self = shared_from_this(), g = ++gen_](error_code ec) {
            if (!ec && g == self->gen_)
                self->fire();
        }));
    }

    void lose(std::string_view why)
    {
        if (mark_lost(s_, ns_))
            b_->rc->log(log_level::warn, fmt::format("redis lock {} lost: {}", ns_->node, why));
    }

    void fire()
    {
        if (over())
            return;
        if (in_flight_ || steady_clock::now() >= lost_at())
            return lose("no renewal confirmed within the TTL less the safety margin");
        const auto sent = steady_clock::now();
        in_flight_ = true;
        auto op = make_pooled<reply_op>(
            pooled([self = shared_from_this(), sent](error_code ec, redis_reply r) { self->on_reply(ec, r, sent); }),
            b_->rc->strand);
        op->inline_ok = true;
        const std::string_view args[] = {ns_->node, ns_->value, ttl_arg_};
        eval_acked(*b_->rc, renew_script().text, renew_script().sha, args, 1, std::move(op));
        arm(lost_at());  // the bound on this renewal
    }

    void on_reply(error_code ec, const redis_reply& r, steady_clock::time_point sent)
    {
        if (!in_flight_ || over())
            return;  // lost (the bound fired first), or released
        in_flight_ = false;
        if (ec)  // not confirmed (connection lost, server busy): try again soon, until lost_at
            return arm(std::min(lost_at(), steady_clock::now() + std::chrono::milliseconds(50)));
        if (r.type != redis_reply::kind::integer || r.integer != 1)
            return lose("the key is gone or holds another token");
        confirmed_ = sent;
        arm(std::min(confirmed_ + b_->opts.ttl / 3, lost_at()));
    }

    std::shared_ptr<lock_object> s_;
    std::shared_ptr<redis_backend> b_;
    std::shared_ptr<node_state> ns_;
    asio::steady_timer timer_;
    steady_clock::time_point confirmed_;
    std::string ttl_arg_;
    std::uint64_t gen_ = 0;
    bool in_flight_ = false;
    bool stopped_ = false;
};

}  // namespace

guard hold_key(const std::shared_ptr<lock_object>& s, const std::shared_ptr<redis_backend>& b, owner_id owner,
               std::string value, std::int64_t fence, steady_clock::time_point sent)
{
    auto ns = make_pooled<node_state>();
    ns->node = s->path;
    ns->value = std::move(value);
    ns->fence_base = fence;
    auto h = make_pooled<object_lease>(s, ns, owner);
    record_grant(s, ns, h, false);
    make_pooled<renewal>(s, b, ns, sent)->start();
    return access::make_guard(std::move(h), owner);
}

}  // namespace zkcoro::detail
