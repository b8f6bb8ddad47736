// The backend-neutral part of a lease, and zkcoro::guard, which is a lease held by its user.
#include "engine/lease.hpp"

#include "engine/revocation.hpp"

#include <zkcoro/detail/access.hpp>
#include <zkcoro/guard.hpp>

#include <boost/asio/system_executor.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace zkcoro {
namespace detail {

void lease::async_wait_lost(any_handler<void(error_code)> handler)
{
    auto op = detail::make_pooled<op_state<>>(std::move(handler), ex_);
    {
        std::lock_guard lk(m_);
        if (!ended_) {
            op->bind_cancellation();
            lost_waiters_.push_back(std::move(op));
            return;
        }
    }
    op->complete(lost_.load() ? make_error_code(client_errc::lock_lost) : make_error_code(asio::error::operation_aborted));
}

bool lease::set_lost() { return end(true); }

bool lease::set_released() { return end(false); }

bool lease::end(bool lost)
{
    std::vector<std::shared_ptr<op_state<>>> waiters;
    {
        std::lock_guard lk(m_);
        if (ended_)
            return false;
        ended_ = true;
        lost_ = lost;
        waiters.swap(lost_waiters_);
    }
    if (lost)
        lost_signal_.emit(asio::cancellation_type::terminal);
    const error_code ec = lost ? make_error_code(client_errc::lock_lost) : make_error_code(asio::error::operation_aborted);
    if (revocation_)
        revocation_->end(ec);
    for (auto& w : waiters)
        w->complete(ec);
    return true;
}

void async_wait_lost_impl(std::shared_ptr<lease> l, any_handler<void(error_code)> handler)
{
    if (l)
        return l->async_wait_lost(std::move(handler));
    fail_empty_handle(std::move(handler), client_errc::empty_guard);
}

void async_wait_revocation_impl(std::shared_ptr<lease> l, any_handler<void(error_code)> handler)
{
    if (!l)
        return fail_empty_handle(std::move(handler), client_errc::empty_guard);
    if (!l->revocation()) {
        auto op = detail::make_pooled<op_state<>>(std::move(handler), l->executor());
        return void(op->complete(client_errc::not_revocable));
    }
    l->revocation()->async_wait(std::move(handler));
}

bool revocation_requested(const lease* l) noexcept { return l && l->revocation() && l->revocation()->requested(); }

asio::cancellation_slot revocation_slot(lease* l) noexcept
{
    return l && l->revocation() ? l->revocation()->slot() : asio::cancellation_slot();
}

}  // namespace detail

guard::guard(std::shared_ptr<detail::lease> l, owner_id owner) noexcept : lease_(std::move(l)), owner_(owner) {}
guard::guard(guard&& o) noexcept : lease_(std::move(o.lease_)), owner_(o.owner_) {}
guard& guard::operator=(guard&& o) noexcept
{
    if (this != &o) {
        if (lease_)
            release_with([](error_code) {});  // a failure is logged and counted by the backend
        lease_ = std::move(o.lease_);
        owner_ = o.owner_;
    }
    return *this;
}

guard::~guard()
{
    if (lease_)
        release_with([](error_code) {});  // a failure is logged and counted by the backend
}

guard::executor_type guard::get_executor() const noexcept
{
    return lease_ ? lease_->executor() : executor_type(asio::system_executor());
}

std::int64_t guard::fencing_token() const noexcept { return lease_ ? lease_->fencing_token() : 0; }
const std::string& guard::node_path() const noexcept
{
    static const std::string empty;
    return lease_ ? lease_->resource() : empty;
}
std::int64_t guard::session_id() const noexcept { return lease_ ? lease_->session_id() : 0; }
bool guard::lost() const noexcept { return lease_ && lease_->lost(); }
asio::cancellation_slot guard::lost_slot() noexcept { return lease_ ? lease_->lost_slot() : asio::cancellation_slot(); }

bool guard::revocable() const noexcept { return lease_ && lease_->revocation(); }
bool guard::revocation_requested() const noexcept { return detail::revocation_requested(lease_.get()); }
asio::cancellation_slot guard::revocation_slot() noexcept { return detail::revocation_slot(lease_.get()); }

asio::awaitable<void> guard::release()
{
    co_await async_release(asio::use_awaitable);
}

void guard::release_with(detail::any_handler<void(error_code)> handler)
{
    if (!lease_)
        return detail::fail_empty_handle(std::move(handler), client_errc::empty_guard);
    std::exchange(lease_, nullptr)->release(std::move(handler));
}

namespace detail {

guard access::make_guard(std::shared_ptr<lease> l, owner_id owner) { return guard(std::move(l), owner); }

const std::shared_ptr<lease>& access::lease_of(const guard& g) noexcept { return g.lease_; }

}  // namespace detail

}  // namespace zkcoro
