// Helpers for the library's own coroutines (internal): the completion token they await with,
// whether the running one was cancelled, and running one to complete an operation with its result.
#ifndef ZKCORO_SRC_ASYNC_COROUTINE_HPP
#define ZKCORO_SRC_ASYNC_COROUTINE_HPP

#include <zkcoro/detail/config.hpp>
#include <zkcoro/error.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <exception>
#include <memory>
#include <tuple>
#include <utility>

namespace zkcoro::detail {

// The token the library's coroutines await with: the error code comes back as the first element
// of a tuple instead of as an exception, since most failures are results the caller handles. One
// definition for every file: in a unity build (src/meson.build) each file's own copy would clash.
inline constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// True once the running coroutine has been asked to stop (any cancellation type). For coroutines
// that turned throw_if_cancelled off and look at their cancellation after each wait.
inline asio::awaitable<bool> cancelled()
{
    auto cs = co_await asio::this_coro::cancellation_state;
    co_return cs.cancelled() != asio::cancellation_type::none;
}

// Runs `coro` on `ex` and calls `done(ec, result)` with what it returns; an exception out of it is
// reported as client_errc::internal_error with a default result. A connected `slot` cancels the
// coroutine (the caller's per-operation cancellation); an unconnected one leaves it alone.
// The completion of a coroutine spawned by spawn_with: `done(ec, result)`, an exception reported
// as client_errc::internal_error with a default result.
template <class R, class Done>
auto spawned_completion(Done done)
{
    return [done = std::move(done)](std::exception_ptr e, std::tuple<error_code, R> r) mutable {
        if (e)
            return done(make_error_code(client_errc::internal_error), R{});
        done(std::get<0>(r), std::move(std::get<1>(r)));
    };
}

template <class R, class Done>
void spawn_with(const asio::any_io_executor& ex, asio::awaitable<std::tuple<error_code, R>> coro,
                asio::cancellation_slot slot, Done done)
{
    auto finish = spawned_completion<R>(std::move(done));
    if (!slot.is_connected())
        return asio::co_spawn(ex, std::move(coro), std::move(finish));
    // The caller's cancellation reaches the coroutine through a signal of ours that lives as long
    // as the coroutine's completion or a cancellation on its way to `ex`, whichever is later. (Asio
    // 1.26's co_spawn, given the caller's slot itself, posts the emission to `ex` with a raw pointer
    // to a signal that the coroutine's completion frees: when the caller cancels from outside
    // `ex`, as zklock's signal handling does on a Redis lock's strand, just as the grant
    // completes, the posted emission used freed memory.)
    auto signal = std::make_shared<asio::cancellation_signal>();
    slot.assign([signal, ex](asio::cancellation_type type) {
        asio::dispatch(ex, [signal, type] { signal->emit(type); });
    });
    asio::co_spawn(ex, std::move(coro),
                   asio::bind_cancellation_slot(signal->slot(), [signal, finish = std::move(finish)](
                                                                    std::exception_ptr e, std::tuple<error_code, R> r) mutable {
                       finish(std::move(e), std::move(r));
                   }));
}

// As above, cancelled through `signal`, a signal of the caller's own: for an operation that
// connected the caller's slot before the coroutine existed (an uncontended first attempt that
// goes on as a coroutine). The caller keeps `signal` alive until `done` has run, and emits it on
// `ex`.
template <class R, class Done>
void spawn_with(const asio::any_io_executor& ex, asio::awaitable<std::tuple<error_code, R>> coro,
                asio::cancellation_signal& signal, Done done)
{
    asio::co_spawn(ex, std::move(coro), asio::bind_cancellation_slot(signal.slot(), spawned_completion<R>(std::move(done))));
}

}  // namespace zkcoro::detail

#endif
