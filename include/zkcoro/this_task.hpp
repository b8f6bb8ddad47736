// The identity of the current task: the co_spawn'd coroutine chain a coroutine runs in.
#ifndef ZKCORO_THIS_TASK_HPP
#define ZKCORO_THIS_TASK_HPP

#include <zkcoro/detail/config.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <cstdint>
#include <utility>

// The task id is read through a hook of Asio's awaitable frames (await_transform of a function
// called with the frame after suspension), and a task's end is seen by a frame of ours put under
// its first coroutine (the frames' caller links): Asio internals. `meson setup` compiles and runs a probe
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
// deliberate sharing between tasks: any value the caller picks, not 0 and without the top bit
// (task ids have it set), e.g. an object's address.
using owner_id = std::uintptr_t;

namespace this_task {

namespace detail {
// The ids of live tasks (src/task_ids.cpp). A task is known by the frame of ours that sits between
// Asio's entry point and the task's first coroutine (see task_of); it gets the next id of a
// counter when it first asks, and its record goes when that frame runs, as the task ends. So an id
// is never given twice in a process, where a frame address would be given again to the next task
// (Asio recycles frames): a guard kept past the end of the task that acquired it (a child's guard
// its parent keeps, the losing side of `||`) must not lend its hold to a later task.
ZKCORO_API owner_id known_task(const void* frame) noexcept;
ZKCORO_API owner_id new_task(const void* end_frame, void (*destroy)(const void*));  // may throw bad_alloc
ZKCORO_API void task_ended(const void* end_frame) noexcept;
ZKCORO_API std::size_t live_tasks() noexcept;  // for the probe and the tests

struct frame_peek;

// Gives access to the frame's attached thread and caller, protected members of Asio's frame base.
template <class Executor>
struct frame_access : boost::asio::detail::awaitable_frame_base<Executor> {
    using base = boost::asio::detail::awaitable_frame_base<Executor>;
    static boost::asio::detail::awaitable_thread<Executor>* thread_of(base* f) noexcept
    {
        return f->*(&frame_access::attached_thread_);
    }
    static base*& caller_of(base* f) noexcept { return f->*(&frame_access::caller_); }
};
}  // namespace detail
}  // namespace this_task
}  // namespace zkcoro

namespace boost::asio::detail {
// Takes the frame out of an awaitable (awaitable::frame_ is private; every awaitable_frame is its
// friend): the task's end frame is owned by the task-id records, not by an awaitable object.
template <class Executor>
class awaitable_frame<zkcoro::this_task::detail::frame_peek, Executor> {
public:
    static awaitable_frame_base<Executor>* release(awaitable<void, Executor>& a) noexcept
    {
        return std::exchange(a.frame_, nullptr);
    }
};
}  // namespace boost::asio::detail

namespace zkcoro {
namespace this_task {
namespace detail {

// Runs in the end frame when the task's first coroutine has returned (or thrown): takes the end
// frame off the stack (Asio then resumes its entry point, which finishes the task) and forgets the
// task, which destroys the end frame and this object with it: nothing is touched after.
template <class Executor>
struct end_task {
    boost::asio::detail::awaitable_thread<Executor>* operator()(
        boost::asio::detail::awaitable_frame_base<Executor>* self) const noexcept
    {
        auto* thread = frame_access<Executor>::thread_of(self);
        self->pop_frame();
        task_ended(self);
        return thread;
    }
};

template <class Executor>
boost::asio::awaitable<void, Executor> end_frame()
{
    co_await end_task<Executor>{};
}

template <class Executor>
void destroy_frame(const void* f)
{
    static_cast<boost::asio::detail::awaitable_frame_base<Executor>*>(const_cast<void*>(f))->destroy();
}

// The id of the task whose coroutine `top` runs in. Walks down the callers to the frame that
// Asio's entry point (co_spawn's) awaits: our end frame when the task has an id, else its first
// coroutine, under which an end frame is put now. 0 when memory runs out (an acquisition with
// owner 0 fails with invalid_argument) or the chain is not co_spawn's.
template <class Executor>
owner_id task_of(boost::asio::detail::awaitable_frame_base<Executor>* top,
                 boost::asio::detail::awaitable_frame_base<Executor>* entry) noexcept
{
    using access = frame_access<Executor>;
    auto* first = top;
    for (auto* f = access::caller_of(top); f != entry; f = access::caller_of(f)) {
        if (f == nullptr)
            return 0;
        first = f;
    }
    if (const owner_id id = known_task(first))
        return id;
    boost::asio::detail::awaitable_frame_base<Executor>* end = nullptr;
    try {
        auto a = end_frame<Executor>();
        end = boost::asio::detail::awaitable_frame<frame_peek, Executor>::release(a);
        const owner_id id = new_task(end, &destroy_frame<Executor>);
        access::caller_of(end) = entry;
        access::caller_of(first) = end;
        return id;
    } catch (...) {
        if (end != nullptr)
            end->destroy();
        return 0;
    }
}

template <class Executor>
struct read_id {
    owner_id* out;
    boost::asio::detail::awaitable_thread<Executor>* operator()(
        boost::asio::detail::awaitable_frame_base<Executor>* frame) const noexcept
    {
        auto* thread = frame_access<Executor>::thread_of(frame);
        // The same for every nested coroutine of one co_spawn, across thread hops; different for
        // two co_spawns, also when one starts after the other ended.
        *out = task_of<Executor>(frame, thread->entry_point());
        return thread;
    }
};
}  // namespace detail

// The current task's id: `owner_id me = co_await zkcoro::this_task::id();`. Never given to another
// task of this process, also after this one ends; it has the top bit set.
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
