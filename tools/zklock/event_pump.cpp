// The event sources of a run, each pumped into run_events' queue (event_pump.hpp).
#include "event_pump.hpp"

#include <zkcoro/error.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <chrono>

#include <signal.h>

namespace zklock {

namespace {

asio::awaitable<void> pump_signal_set(std::shared_ptr<run_events> ev, asio::signal_set* set, event_kind kind)
{
    for (;;) {
        auto [ec, sig] = co_await set->async_wait(asio::as_tuple(asio::use_awaitable));
        if (ec)
            co_return;  // cancelled: the run is over
        ev->push(event{kind, sig});
    }
}

asio::awaitable<void> pump_lost(std::shared_ptr<run_events> ev, zkcoro::guard& g)
{
    // g is used only to start the wait (the operation keeps what it needs).
    auto [ec] = co_await g.async_wait_lost(
        asio::bind_cancellation_slot(ev->stop_lost.slot(), asio::as_tuple(asio::use_awaitable)));
    if (ec == zkcoro::client_errc::lock_lost)
        ev->push(event{event_kind::lost});
}

// A revocation request (--revocable) becomes an event.
asio::awaitable<void> pump_revoke(std::shared_ptr<run_events> ev, zkcoro::guard& g)
{
    auto [ec] = co_await g.async_wait_revocation(
        asio::bind_cancellation_slot(ev->stop_revoke.slot(), asio::as_tuple(asio::use_awaitable)));
    if (!ec)
        ev->push(event{event_kind::revoke});
}

}  // namespace

void restart_interrupted_calls(std::initializer_list<int> sigs)
{
    for (int sig : sigs) {
        struct sigaction sa {};
        if (::sigaction(sig, nullptr, &sa) == 0 && (sa.sa_flags & SA_RESTART) == 0) {
            sa.sa_flags |= SA_RESTART;
            ::sigaction(sig, &sa, nullptr);
        }
    }
}

void pump_signals(const std::shared_ptr<run_events>& ev)
{
    const auto ex = ev->wake.get_executor();
    asio::co_spawn(ex, pump_signal_set(ev, &ev->sigs, event_kind::signal), asio::detached);
    asio::co_spawn(ex, pump_signal_set(ev, &ev->sigchld, event_kind::child), asio::detached);
}

void pump_while_held(const std::shared_ptr<run_events>& ev, zkcoro::guard& g, bool revocable)
{
    const auto ex = ev->wake.get_executor();
    asio::co_spawn(ex, pump_lost(ev, g), asio::detached);
    for (int sig : {SIGTSTP, SIGTTIN, SIGTTOU})
        ev->stops.add(sig);
    restart_interrupted_calls({SIGTSTP, SIGTTIN, SIGTTOU});
    asio::co_spawn(ex, pump_signal_set(ev, &ev->stops, event_kind::stop), asio::detached);
    if (revocable)
        asio::co_spawn(ex, pump_revoke(ev, g), asio::detached);
}

asio::awaitable<int> queued_signal(std::shared_ptr<run_events> ev)
{
    for (;;) {
        for (const auto& e : ev->queue)
            if (e.kind == event_kind::signal)
                co_return e.sig;
        const auto cs = co_await asio::this_coro::cancellation_state;
        if (cs.cancelled() != asio::cancellation_type::none)
            throw boost::system::system_error(asio::error::operation_aborted);  // the other side won
        ev->wake.expires_at(std::chrono::steady_clock::time_point::max());
        co_await ev->wake.async_wait(asio::as_tuple(asio::use_awaitable));  // a push, or cancelled
    }
}

int first_queued_signal(const run_events& ev)
{
    for (const auto& e : ev.queue)
        if (e.kind == event_kind::signal)
            return e.sig;
    return 0;
}

stop_events::~stop_events()
{
    ev->sigchld.cancel();
    ev->sigs.cancel();
    ev->stops.cancel();
    ev->stop_lost.emit(asio::cancellation_type::terminal);
    ev->stop_revoke.emit(asio::cancellation_type::terminal);
}

}  // namespace zklock
