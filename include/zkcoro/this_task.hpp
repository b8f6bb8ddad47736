// The identity of the current task: the co_spawn'd coroutine chain a coroutine runs in.
#ifndef ZKCORO_THIS_TASK_HPP
#define ZKCORO_THIS_TASK_HPP

#include <zkcoro/detail/config.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <cstdint>

// The task id is read through a hook of Asio's awaitable frames (await_transform of a function
// called with the frame after suspension). It touches Asio internals: the versions it was tested
// on are listed here; a newer Asio must pass tests/unit/test_this_task.cpp before being added.
static_assert(BOOST_ASIO_VERSION >= 102600 && BOOST_ASIO_VERSION <= 103400,
              "zkcoro's task identity is tested on Asio 1.26 to 1.34: run test_this_task and extend this range");

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
