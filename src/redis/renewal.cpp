// The Redis lock's holder: the key's TTL renewed until the release or the loss.
#include "redis/backend.hpp"
#include "redis/shared_lock.hpp"

#include <zkcoro/detail/access.hpp>

#include <algorithm>
#include <utility>
#include <vector>

namespace zkcoro::detail {

// Renews the key we hold every third of its TTL (sooner after a failure) until the release
// (ns->monitor_stop) or the loss: one pending reply, no coroutine, and the backend's renewal
// timer. On the strand. The time it waits for has two roles: the next renewal's time while none
// is in flight, and the bound on the one in flight (TTL less the safety margin after the last
// confirmed one) while it is.
//
// The backend keeps one timer for its holds (a mutex's one after another, a semaphore's several
// at once: the timer is armed for the earliest, and asks each of them), and leaves it armed when
// a hold ends: a hold that wants a later time finds it armed earlier and is asked again then
// (on_timer), so a short hold costs no timer operation (no timerfd_settime, no cancelled wait).
// Fired with no hold, it is not re-armed; the client's close cancels it (and ends a hold still
// renewed: issue 40), and so does the backend's end (the timer goes with it).
// The backend owns the renewals of its current holds (`renewing`); the renewal refers back to the
// lock object weakly, so that the object, its backend and the renewal do not keep each other.
class key_renewal : public std::enable_shared_from_this<key_renewal> {
public:
    key_renewal(const std::shared_ptr<lock_object>& s, redis_backend& b, std::shared_ptr<node_state> ns,
                steady_clock::time_point confirmed)
        : s_(s), b_(b), ns_(std::move(ns)), confirmed_(confirmed)
    {
    }

    void start()
    {
        b_.renewing.push_back(shared_from_this());
        ns_->monitor_stop.slot().assign([w = weak_from_this()](asio::cancellation_type) {
            if (auto self = w.lock())
                self->stop();
        });
        ns_->set_lost_by(lost_at());
        arm(std::min(confirmed_ + b_.opts.ttl / 3, lost_at()));
    }

    // The backend's timer fired, at due_ or before.
    void on_timer()
    {
        if (over())
            return stop();
        if (steady_clock::now() < due_)
            return b_.arm_renewal(due_);
        fire();
    }

    // The client was closed: no renewal can be sent any more; the key expires within its TTL.
    void client_closed() { lose("the client was closed; the key expires within its TTL"); }

    // Stopped for good: the release, the loss, or the backend's end. Nothing after it reaches
    // the backend (a reply still due returns at once).
    void stop()
    {
        stopped_ = true;
        auto& all = b_.renewing;
        auto me = std::find_if(all.begin(), all.end(), [this](const auto& r) { return r.get() == this; });
        if (me != all.end()) {
            auto keep = std::move(*me);  // this object lives until the end of this function
            all.erase(me);
        }
    }

private:
    steady_clock::time_point lost_at() const { return b_.held_until(confirmed_); }
    bool over() const { return stopped_ || ns_->ended(); }

    void arm(steady_clock::time_point at)
    {
        due_ = at;
        b_.arm_renewal(at);
    }

    void lose(std::string_view why)
    {
        if (auto s = s_.lock(); s && s->lost(ns_))
            b_.rc->log(log_level::warn, fmt::format("redis lock {} lost: {}", ns_->node, why));
        stop();
    }

    void fire()
    {
        if (in_flight_ || steady_clock::now() >= lost_at())
            return lose(last_error_.empty()
                            ? std::string("no renewal confirmed within the TTL less the safety margin")
                            : "no renewal confirmed within the TTL less the safety margin (the last one: " +
                                  last_error_ + ")");
        const auto sent = steady_clock::now();
        in_flight_ = true;
        auto op = make_pooled<reply_op>(
            pooled([self = shared_from_this(), sent](error_code ec, redis_reply r) { self->on_reply(ec, r, sent); }),
            b_.rc->strand);
        op->inline_ok = true;
        arm(lost_at());  // the bound on this renewal
        if (b_.rw) {  // a read-write lock's hold: the write key or a read lease
            const std::string_view args[] = {ns_->node, b_.rw->readers, ns_->value, b_.ttl_arg};
            return eval_acked(*b_.rc, rw_renew_script().text, rw_renew_script().sha, args, 2, std::move(op));
        }
        if (b_.sem) {  // a semaphore's leases: its holder's entry in P:leases
            const auto args = b_.sem_args(ns_->value, "0");
            const auto& renew = semaphore_renew_script();
            return eval_acked(*b_.rc, renew.text, renew.sha, args, 5, std::move(op));
        }
        const std::string_view args[] = {ns_->node, ns_->value, b_.ttl_arg};
        eval_acked(*b_.rc, renew_script().text, renew_script().sha, args, 1, std::move(op));
    }

    void on_reply(error_code ec, const redis_reply& r, steady_clock::time_point sent)
    {
        if (!in_flight_ || over())
            return;  // lost (the bound fired first), released, or the backend is gone
        in_flight_ = false;
        if (ec) {  // not confirmed (connection lost, server busy): try again soon, until lost_at
            // Kept for the loss message: a refusal's own text (e.g. NOPERM) says why.
            last_error_ = ec.message();
            if (r.type == redis_reply::kind::error)
                last_error_ += ": the server said: " + r.str;
            return arm(std::min(lost_at(), steady_clock::now() + std::chrono::milliseconds(50)));
        }
        last_error_.clear();
        if (r.type != redis_reply::kind::integer || r.integer != 1)
            return lose("the key is gone or holds another token");
        confirmed_ = sent;
        ns_->set_lost_by(lost_at());
        arm(std::min(confirmed_ + b_.opts.ttl / 3, lost_at()));
    }

    std::weak_ptr<lock_object> s_;
    redis_backend& b_;  // owns this renewal while it runs (renewing); stop() before it goes
    std::shared_ptr<node_state> ns_;
    steady_clock::time_point confirmed_;
    steady_clock::time_point due_;
    std::string last_error_;  // the last unconfirmed renewal's error ("" after a confirmed one)
    bool in_flight_ = false;
    bool stopped_ = false;
};

void redis_backend::end_renewal() noexcept
{
    for (auto& r : std::exchange(renewing, {}))
        r->stop();
}

void redis_backend::client_closed()
{
    for (auto& r : std::vector<std::shared_ptr<key_renewal>>(renewing))
        r->client_closed();
    if (renew_armed_) {
        renew_armed_ = false;
        ++renew_gen_;  // a wait that completed already finds itself stale
        renew_timer_.cancel();
    }
}

void redis_backend::arm_renewal(steady_clock::time_point at)
{
    if (renew_armed_ && renew_at_ <= at)
        return;  // it fires first; the hold is asked again then
    if (rc->closing())
        return;  // nothing to renew after the close (client_closed has ended the renewal)
    ensure_close_hook();  // once per backend: the close cancels this timer
    renew_armed_ = true;
    renew_at_ = at;
    renew_timer_.expires_at(at);
    renew_timer_.async_wait(pooled([w = weak_from_this(), gen = ++renew_gen_](error_code ec) {
        auto self = w.lock();
        if (ec || !self || gen != self->renew_gen_)
            return;  // moved earlier (a newer wait has it), or the backend is gone
        self->renew_armed_ = false;
        // Each hold's renewal runs when due, and asks for the timer again when not yet.
        if (self->renewing.size() == 1) {
            auto r = self->renewing.front();  // on_timer may end it
            return r->on_timer();
        }
        for (auto& r : std::vector<std::shared_ptr<key_renewal>>(self->renewing))
            r->on_timer();
    }));
}

guard hold_key(active_task& task, const std::shared_ptr<redis_backend>& b, std::string value, std::int64_t fence,
               steady_clock::time_point sent)
{
    const auto& s = task.object();
    auto ns = make_pooled<node_state>();
    ns->node = s->path;
    ns->value = std::move(value);
    ns->fence_base = fence;
    auto h = task.granted(ns);
    make_pooled<key_renewal>(s, *b, ns, sent)->start();
    return access::make_guard(std::move(h), task.owner());
}

}  // namespace zkcoro::detail
