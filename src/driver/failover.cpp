// Failover: which member the C library tries next after a failed connection, and our own ping,
// which notices a silent (stopped, hung) member long before the library does.
//
// The C library (3.8, read at its source: zookeeper.c, addrvec.c) keeps a list of addresses and
// an index `next`. Connecting takes the address at `next` and advances it (zoo_cycle_next_server
// from zookeeper_interest). After a failure, handle_error() advances the index once more before
// zookeeper_interest() takes the next address: two steps per failure (ZOOKEEPER-2466), so with an
// even count of addresses the library never goes back to half of them. The first connection of a
// handle is special: it is made in the library's "reconfig" mode, from a second list, without
// moving `next`; the first failure after it then moves by one step only.
//
// Both are corrected the same way, from outside: when the library has just dropped its connection
// (zoo_state() == 0, before the zookeeper_interest call that picks the next address), the address
// handle_error() stepped over is zoo_get_current_server(). If it is the address of the failed
// attempt (the first connection's case), the library's next pick is already the following one.
// Otherwise we step the library round its list once more, less one (count - 1 calls of
// zoo_cycle_next_server): its next pick is then the address right after the failed one. Every
// failure moves by one address, and every member is tried in turn, whatever the count.
// zoo_set_servers() cannot do this: the same set in another order is a no-op.
#include "driver/client_impl.hpp"

#include <zkcoro/error.hpp>

#include <fmt/format.h>

#include <sys/socket.h>

#include <algorithm>

namespace zkcoro::detail {

namespace {

std::string current_server(zhandle_t* zh)
{
    const char* s = zoo_get_current_server(zh);
    return s ? std::string(s) : std::string();
}

void ignore_reply(int, const Stat*, const void*) {}

}  // namespace

// Lock held, outside any library call, before zookeeper_interest.
void client_impl::steer_next_server()
{
    if (!zh_ || !established_ || steered_ || server_count_ < 2 || zoo_state(zh_) != 0)
        return;
    steered_ = true;
    const std::string stepped_over = current_server(zh_);
    if (!attempt_.empty() && stepped_over == attempt_) {
        log(log_level::debug, fmt::format("failover: after {} the C client tries the next address", attempt_));
        return;
    }
    for (std::size_t i = 0; i + 1 < server_count_; ++i)
        zoo_cycle_next_server(zh_);
    log(log_level::debug, fmt::format("failover: after {} the C client tries {} next (ZOOKEEPER-2466 corrected)",
                                      attempt_.empty() ? std::string("a failed attempt") : attempt_, stepped_over));
    attempt_.clear();
}

// Lock held, right after zookeeper_interest: notes the attempt it started, if any.
void client_impl::note_attempt(int interest_rc)
{
    if (!zh_)
        return;
    const int st = zoo_state(zh_);
    if (st != 0 && st != ZOO_NOTCONNECTED_STATE) {
        // An attempt (or the connection) is under way: the next failure needs a correction.
        if (steered_ || attempt_.empty())
            attempt_ = current_server(zh_);
        steered_ = false;
    } else if (interest_rc == ZCONNECTIONLOSS || interest_rc == ZOPERATIONTIMEOUT || interest_rc == ZSYSTEMERROR) {
        // The attempt failed inside this call (a refused connect, a timeout): a new failure.
        steered_ = false;
    }
}

// Lock held: the session is established on this handle (the library left its initial mode).
void client_impl::on_established()
{
    established_ = true;
    steered_ = false;
    attempt_ = current_server(zh_);
    start_pinger();
}

// ---------------------------------------------------------------------------------------------
// Our ping

void client_impl::start_pinger()
{
    ping_sent_ns_ = 0;
    auto gen = ++ping_gen_;
    if (cfg.ping_interval.count() < 0)
        return;
    const auto timeout = std::chrono::milliseconds(negotiated_timeout_ms.load());
    const auto interval = cfg.ping_interval.count() > 0 ? cfg.ping_interval : timeout / 6;
    if (interval.count() <= 0)
        return;
    ping_timer_.expires_after(interval);
    ping_timer_.async_wait([self = shared_from_this(), gen](const error_code& ec) { self->on_ping_timer(gen, ec); });
}

void client_impl::on_ping_timer(std::uint64_t gen, const error_code& ec)
{
    zk_guard g(this);
    if (ec || gen != ping_gen_ || closed_ || !zh_ || zoo_state(zh_) != ZOO_CONNECTED_STATE)
        return;  // a new connection starts the pinger again
    using std::chrono::milliseconds;
    const milliseconds timeout(negotiated_timeout_ms.load());
    const auto interval = cfg.ping_interval.count() > 0 ? cfg.ping_interval : timeout / 6;
    const auto deadline = cfg.ping_timeout.count() > 0 ? cfg.ping_timeout : timeout / 6;
    const std::int64_t now = now_ns();
    const std::int64_t heard = last_heard_ns.load(std::memory_order_relaxed);
    const auto interval_ns = std::chrono::nanoseconds(interval).count();
    const auto deadline_ns = std::chrono::nanoseconds(deadline).count();
    if (ping_sent_ns_ != 0 && heard >= ping_sent_ns_)
        ping_sent_ns_ = 0;  // answered (or anything else heard since)
    std::int64_t wake;
    if (ping_sent_ns_ != 0 && now - ping_sent_ns_ >= deadline_ns) {
        const std::string server = current_server(zh_);
        log(log_level::warn, fmt::format("no reply from {} within {} ms (silent for {} ms; stopped or hung?): "
                                         "moving to the next member with session 0x{:x}",
                                         server, deadline.count(), (now - heard) / 1'000'000, fsm_.session_id()));
        ping_sent_ns_ = 0;
        // The library sees the end of the stream at its next read, fails the connection as if the
        // server had closed it and connects to the next member (steered above). shutdown(), not
        // close(): the descriptor stays the library's.
        if (desc_.is_open())
            ::shutdown(desc_.native_handle(), SHUT_RDWR);
        rearm();
        return;
    }
    if (ping_sent_ns_ == 0 && now - heard >= interval_ns) {
        // Any reply proves the server alive, and ZooKeeper answers a session's requests in order:
        // the cheapest request that reaches the server's request pipeline.
        int rc = zoo_aexists(zh_, "/", 0, &ignore_reply, nullptr);
        if (rc == ZOK) {
            ping_sent_ns_ = now;
            rearm();
        }
        wake = now + deadline_ns;
    } else if (ping_sent_ns_ != 0) {
        wake = ping_sent_ns_ + deadline_ns;
    } else {
        wake = heard + interval_ns;
    }
    ping_timer_.expires_after(std::chrono::nanoseconds(std::max<std::int64_t>(wake - now_ns(), 1'000'000)));
    ping_timer_.async_wait([self = shared_from_this(), gen](const error_code& e) { self->on_ping_timer(gen, e); });
}

}  // namespace zkcoro::detail
