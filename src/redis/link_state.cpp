// One Redis connection's states (beside link.cpp, without hiredis): the first connection,
// failed attempts, reconnection with backoff, giving up, and flushing the queue once connected.
#include "redis/link.hpp"

#include <fmt/format.h>

namespace zkcoro::detail {

void redis_link::set_state(redis_state s)
{
    if (state_ == s)
        return;
    state_ = s;
    if (hooks_.state)
        hooks_.state(s);
}

void redis_link::start()
{
    if (state_ != redis_state::idle)
        return;
    set_state(redis_state::connecting);
    first_started_ = std::chrono::steady_clock::now();
    attempt();
}

void redis_link::fail_attempt(error_code ec, std::string why)
{
    if (attempt_code_)
        return;  // the first reason stands
    attempt_code_ = ec;
    attempt_error_ = std::move(why);
}

void redis_link::flush()
{
    auto q = std::move(queue_);
    queue_.clear();
    for (auto& item : q)
        dispatch_send(views_of(item.args), std::move(item.op), item.script);
    auto pq = std::move(push_queue_);
    push_queue_.clear();
    for (auto& a : pq)
        send_push(std::move(a));
}
void redis_link::on_context_gone()
{
    ac_ = nullptr;
    att_.reset();
    ready_ = false;
    auto keep = shared_from_this();
    timer_.cancel();
    if (closing_ || state_ == redis_state::closed) {
        set_state(redis_state::closed);
        return;
    }
    auto ec = attempt_code_ ? attempt_code_ : error_code(redis_errc::connect_failed);
    auto why = attempt_error_.empty() ? std::string("the connection failed") : attempt_error_;
    // Refused credentials do not get better by trying again: no reconnection loop.
    if (ec == redis_errc::auth_failed)
        return give_up(ec, std::move(why));
    // A first connection: tried again as the hooks say (a sentinel link: 6 times), or while
    // first_connect_wait lasts for a failure that may pass (the server or the new master comes up).
    const bool may_pass = ec == redis_errc::connect_failed || ec == redis_errc::connection_lost ||
                          ec == redis_errc::not_master || ec == redis_errc::no_sentinel ||
                          ec == redis_errc::loading || ec == redis_errc::master_down;
    const auto first_left = first_started_ + opts_.first_connect_wait - std::chrono::steady_clock::now();
    // A negative first_connect_wait: one attempt, without the hooks' retries either.
    const bool retry_first = opts_.first_connect_wait.count() >= 0 && hooks_.retry_first &&
                             hooks_.retry_first(ec, ++first_failures_);
    if (!ever_connected_ && !retry_first && !(may_pass && first_left > std::chrono::milliseconds(0)))
        return give_up(ec, std::move(why));
    // A drop after the link had connected: reconnect with backoff (commands sent on the old
    // context have failed with connection_lost; queued ones wait).
    backoff_ = backoff_.count() == 0 ? opts_.reconnect_min : std::min(backoff_ * 2, opts_.reconnect_max);
    if (!ever_connected_ && !retry_first)
        backoff_ = std::min(backoff_, std::chrono::ceil<std::chrono::milliseconds>(first_left));
    if (opts_.log)
        opts_.log(log_level::warn, fmt::format("redis {}:{}: {}; reconnecting in {} ms", url_.host, url_.port,
                                               attempt_error_.empty() ? "connection dropped" : attempt_error_,
                                               backoff_.count()));
    set_state(redis_state::reconnecting);
    timer_.expires_after(backoff_);
    timer_.async_wait([w = weak_from_this()](error_code tec) {
        auto l = w.lock();
        if (!tec && l && !l->closing_ && !l->ac_)
            l->attempt();
    });
}

void redis_link::give_up(error_code ec, std::string why)
{
    last_code_ = ec;
    last_error_ = std::move(why);
    if (opts_.log)
        opts_.log(log_level::error, "redis: " + last_error_);
    set_state(redis_state::closed);
    auto q = std::move(queue_);
    queue_.clear();
    for (auto& item : q)
        item.op->fail(ec);
    push_queue_.clear();
}

void redis_link::attempt()
{
    ready_ = false;
    attempt_error_.clear();
    attempt_code_ = {};
    if (!hooks_.resolve)
        return connect_to({url_.host, url_.port});
    if (resolving_)
        return;
    resolving_ = true;
    hooks_.resolve([w = weak_from_this()](error_code ec, std::string why, redis_url::endpoint e) {
        auto l = w.lock();
        if (!l)
            return;
        l->resolving_ = false;
        if (l->closing_ || l->ac_)
            return;
        if (ec) {
            l->fail_attempt(ec, std::move(why));
            return l->on_context_gone();
        }
        l->connect_to(e);
    });
}

}  // namespace zkcoro::detail
