// zkcoro::watch: waiting for a watch that the registry (driver/registry.cpp) delivers.
#include "driver/client_impl.hpp"

#include <zkcoro/detail/access.hpp>
#include <zkcoro/watch.hpp>

#include <boost/asio/system_executor.hpp>

namespace zkcoro {

namespace detail {

void async_watch_wait_impl(std::shared_ptr<watch_state> st, any_handler<void(error_code, watch_event)> h)
{
    if (!st)
        return fail_empty_handle(std::move(h), client_errc::invalid_argument);
    auto op = detail::make_pooled<op_state<watch_event>>(std::move(h), st->fallback_ex);
    std::unique_lock lk(st->m);
    if (st->fired) {
        auto ec = st->ec;
        auto ev = st->event;
        lk.unlock();
        return void(op->complete(ec, std::move(ev)));
    }
    if (st->waiter && !st->waiter->done) {
        lk.unlock();
        return void(op->complete(client_errc::invalid_argument, watch_event{}));
    }
    op->bind_cancellation();
    st->waiter = op;
}

}  // namespace detail

asio::any_io_executor watch::get_executor() const noexcept
{
    return st_ ? st_->fallback_ex : asio::any_io_executor(asio::system_executor());
}

bool watch::ready() const noexcept
{
    if (!st_)
        return false;
    std::lock_guard lk(st_->m);
    return st_->fired;
}

namespace detail {

watch access::make_watch(std::shared_ptr<watch_state> st) { return watch(std::move(st)); }

}  // namespace detail

}  // namespace zkcoro
