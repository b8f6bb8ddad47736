// The members of zkcoro::basic_mutex, once for every backend: the lock object (engine/) does the
// work; its backend (ZooKeeper's in engine/lock_object.cpp, Redis' in redis/lock.cpp) lists the
// participants and words a failure.
#include "engine/acquisition.hpp"
#include "engine/lock_object.hpp"

#include <zkcoro/basic_mutex.hpp>

#include <boost/asio/deferred.hpp>
#include <boost/system/system_error.hpp>

#include <mutex>

namespace zkcoro::detail {

asio::any_io_executor lock_executor(const std::shared_ptr<lock_object>& s) noexcept { return s->ex; }

void start_lock_acquire(const std::shared_ptr<lock_object>& s, owner_id owner, std::chrono::steady_clock::duration timeout,
                        any_handler<void(error_code, std::optional<guard>)> handler)
{
    s->acquire(owner, deadline_after(timeout), make_pooled<op_state<std::optional<guard>>>(std::move(handler), s->ex));
}

void start_lock_participants(const std::shared_ptr<lock_object>& s,
                             any_handler<void(error_code, std::vector<participant>)> handler)
{
    s->participants(make_pooled<op_state<std::vector<participant>>>(std::move(handler), s->ex));
}

namespace {

// The acquisition as an asynchronous operation that lock_acquire_for awaits as it is (a deferred
// operation): Asio 1.26 runs such an operation from the awaiting frame, with no coroutine frame of
// its own, where use_awaitable's initiation is a coroutine whose frame (its initiation, the
// executor, the arguments, the result) lived as long as the task waited: 288 bytes per waiting
// task (heaptrack, the bench's scale). No executor is carried: the handler names the task's.
struct acquire_initiation {
    const std::shared_ptr<lock_object>* s;
    template <class Handler>
    void operator()(Handler&& handler, owner_id owner, std::chrono::steady_clock::duration timeout) const
    {
        start_bound(std::forward<Handler>(handler),
                    [&](auto&& h) { start_lock_acquire(*s, owner, timeout, std::forward<decltype(h)>(h)); });
    }
};

// The acquisition of `owner` as that deferred operation (it refers to `s`, which must outlive its
// await: the awaiting coroutine's parameter).
auto acquisition(const std::shared_ptr<lock_object>& s, owner_id owner, std::chrono::steady_clock::duration timeout)
{
    return asio::async_initiate<const asio::deferred_t&, void(error_code, std::optional<guard>)>(
        acquire_initiation{&s}, asio::deferred, owner, timeout);
}

// An acquisition's error, thrown again with the lock's context (the what() of the system_error).
[[noreturn]] void throw_in_context(const std::shared_ptr<lock_object>& s, const boost::system::system_error& e)
{
    throw boost::system::system_error(e.code(), s->backend->failure_context("acquire", s->path, e.code()));
}

}  // namespace

asio::awaitable<std::optional<guard>> lock_acquire_for(const std::shared_ptr<lock_object>& s,
                                                       std::chrono::steady_clock::duration timeout)
{
    // The task's id read in this frame (this_task::id() is a coroutine of its own: a frame more
    // to allocate for every acquisition).
    owner_id me = 0;
    co_await this_task::detail::read_id<asio::any_io_executor>{&me};
    // The error as an exception (as the await of a deferred operation gives it) and a catch, not
    // as_tuple: as_tuple made the frame of every waiting task about 100 bytes larger (the bench's
    // scale).
    try {
        co_return co_await acquisition(s, me, timeout);
    } catch (const boost::system::system_error& e) {
        throw_in_context(s, e);
    }
}

asio::awaitable<guard> lock_acquire(const std::shared_ptr<lock_object>& s)
{
    // lock_acquire_for's steps in this frame: awaiting lock_acquire_for made a second coroutine
    // frame (allocated, resumed and freed) for every acquisition.
    owner_id me = 0;
    co_await this_task::detail::read_id<asio::any_io_executor>{&me};
    std::optional<guard> g;
    try {
        g = co_await acquisition(s, me, std::chrono::steady_clock::duration::max());
    } catch (const boost::system::system_error& e) {
        throw_in_context(s, e);
    }
    co_return std::move(*g);
}

std::uint64_t lock_local_handoffs(const std::shared_ptr<lock_object>& s)
{
    return s->metrics_snapshot().local_handoffs;
}

lock_metrics lock_metrics_of(const std::shared_ptr<lock_object>& s) { return s->metrics_snapshot(); }

std::size_t lock_hold_count(const std::shared_ptr<lock_object>& s, owner_id owner) { return s->held_count(owner); }

}  // namespace zkcoro::detail
