// The members of zkcoro::basic_mutex, once for every backend: the lock object (engine/) does the
// work; its backend (ZooKeeper's in engine/lock_object.cpp, Redis' in redis/lock.cpp) lists the
// participants and words a failure.
#include "engine/acquisition.hpp"
#include "engine/lock_object.hpp"

#include <zkcoro/basic_mutex.hpp>

#include <boost/asio/use_awaitable.hpp>
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

// The operation of acquire(), for use_awaitable. Not written inside lock_acquire_for: g++ keeps
// the temporaries of a co_await's full expression (the initiation and its executor) in the
// coroutine's frame, which made every waiting task 112 bytes larger (the bench's scale).
asio::awaitable<std::optional<guard>> initiate_acquire(const std::shared_ptr<lock_object>& s, owner_id owner,
                                                       std::chrono::steady_clock::duration timeout)
{
    return asio::async_initiate<const asio::use_awaitable_t<>&, void(error_code, std::optional<guard>)>(
        make_initiation(s->ex,
                        [&s](auto handler, owner_id o, std::chrono::steady_clock::duration t) {
                            start_lock_acquire(s, o, t, std::move(handler));
                        }),
        asio::use_awaitable, owner, timeout);
}

}  // namespace

asio::awaitable<std::optional<guard>> lock_acquire_for(const std::shared_ptr<lock_object>& s,
                                                       std::chrono::steady_clock::duration timeout)
{
    // The task's id read in this frame (this_task::id() is a coroutine of its own: a frame more
    // to allocate for every acquisition).
    owner_id me = 0;
    co_await this_task::detail::read_id<asio::any_io_executor>{&me};
    // use_awaitable and a catch, not as_tuple: the coroutine frame of every waiting task stays as
    // small as it was (as_tuple made it about 100 bytes larger, measured by the bench's scale).
    try {
        co_return co_await initiate_acquire(s, me, timeout);
    } catch (const boost::system::system_error& e) {
        throw boost::system::system_error(e.code(), s->backend->failure_context("acquire", s->path, e.code()));
    }
}

asio::awaitable<guard> lock_acquire(const std::shared_ptr<lock_object>& s)
{
    auto g = co_await lock_acquire_for(s, std::chrono::steady_clock::duration::max());
    co_return std::move(*g);
}

std::uint64_t lock_local_handoffs(const std::shared_ptr<lock_object>& s)
{
    return s->metrics_snapshot().local_handoffs;
}

lock_metrics lock_metrics_of(const std::shared_ptr<lock_object>& s) { return s->metrics_snapshot(); }

std::size_t lock_hold_count(const std::shared_ptr<lock_object>& s, owner_id owner) { return s->held_count(owner); }

}  // namespace zkcoro::detail
