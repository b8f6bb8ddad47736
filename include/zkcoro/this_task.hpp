// The identity of the current task: the co_spawn'd coroutine chain a coroutine runs in.
#ifndef ZKCORO_THIS_TASK_HPP
#define ZKCORO_THIS_TASK_HPP

#include <zkcoro/detail/config.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <cstdint>

// The task id is read through a hook of Asio's awaitable frames (await_transform of a function
// called with the frame after suspension): Asio internals. `meson setup` compiles and runs a probe
// of this hook (config/asio_hook_probe.cpp) against the Boost it finds and stops if it fails; when
// it passes it writes <zkcoro/config.hpp> (installed with these headers) with the Asio version it
// verified. A program built against another Asio than the one the library was probed and built
// with is stopped here: rebuild zkcoro with that Boost (the probe runs again). Without the
// generated header (the headers used straight from a source checkout), the Asio versions verified
// by the probe so far are accepted (docs/boost.md). ZKCORO_ASIO_HOOK_UNCHECKED skips the check.
#if __has_include(<zkcoro/config.hpp>) && !defined(ZKCORO_ASIO_HOOK_PROBE)
#include <zkcoro/config.hpp>
#endif
#include <boost/asio/version.hpp>
#if !defined(ZKCORO_ASIO_HOOK_UNCHECKED) && !defined(ZKCORO_ASIO_HOOK_PROBE)
#if defined(ZKCORO_ASIO_HOOK_VERIFIED)
static_assert(BOOST_ASIO_VERSION == ZKCORO_ASIO_HOOK_VERIFIED,
              "zkcoro was built against another Boost.Asio (see ZKCORO_ASIO_HOOK_VERIFIED in "
              "zkcoro/config.hpp): rebuild zkcoro with this Boost; its meson setup probes the task-identity hook");
#else
static_assert(BOOST_ASIO_VERSION == 102600,
              "zkcoro/config.hpp (written by meson setup after probing Asio) is missing, and the task-identity "
              "hook was verified on Asio 1.26 (Boost 1.81) only: build zkcoro with Meson, or define "
              "ZKCORO_ASIO_HOOK_UNCHECKED once config/asio_hook_probe.cpp passes on this Boost");
#endif
#endif

namespace zkcoro {

// Who holds a reentrant lock. For coroutines: the task id below. For callbacks, futures or a
// deliberate sharing between tasks: any value the caller picks (not 0).
using owner_id = std::uintptr_t;

namespace this_task {

namespace detail {
// Gives access to the frame's attached thread, a protected member of Asio's frame base.
template <class Executor>
struct frame_access : boost::asio::detail::awaitable_frame_base<Executor> {
    static boost::asio::detail::awaitable_thread<Executor>* thread_of(
        boost::asio::detail::awaitable_frame_base<Executor>* f) noexcept
    {
        return f->*(&frame_access::attached_thread_);
    }
};

template <class Executor>
struct read_id {
    owner_id* out;
    boost::asio::detail::awaitable_thread<Executor>* operator()(
        boost::asio::detail::awaitable_frame_base<Executor>* frame) const noexcept
    {
        auto* thread = frame_access<Executor>::thread_of(frame);
        // The bottom frame of the chain: the same for every nested coroutine of one co_spawn,
        // across thread hops; different for two co_spawns.
        *out = reinterpret_cast<owner_id>(thread->entry_point());
        return thread;
    }
};
}  // namespace detail

// The current task's id: `owner_id me = co_await zkcoro::this_task::id();`. Ids of finished
// tasks are reused (they are frame addresses): do not keep them past the task's end.
template <class Executor = boost::asio::any_io_executor>
boost::asio::awaitable<owner_id, Executor> id()
{
    owner_id result = 0;
    co_await detail::read_id<Executor>{&result};
    co_return result;
}

}  // namespace this_task
}  // namespace zkcoro

#endif
