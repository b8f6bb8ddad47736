// Revocation: the state a revocable acquisition shares with its lease (the watch on the node's
// data that turns Curator's "__REVOKE__" into a request: zookeeper/revocation_watch.cpp).
#include "engine/revocation.hpp"

namespace zkcoro::detail {

void revocation_state::async_wait(any_handler<void(error_code)> handler)
{
    auto op = make_pooled<op_state<>>(std::move(handler), ex_);
    error_code ec;
    {
        std::lock_guard lk(m_);
        if (!requested_ && !ended_) {
            op->bind_cancellation();
            waiters_.push_back(std::move(op));
            return;
        }
        ec = requested_ ? error_code{} : end_ec_;
    }
    op->complete(ec);
}

void revocation_state::request()
{
    std::vector<std::shared_ptr<op_state<>>> waiters;
    {
        std::lock_guard lk(m_);
        if (requested_ || ended_)
            return;
        requested_ = true;
        waiters.swap(waiters_);
    }
    signal_.emit(asio::cancellation_type::terminal);
    for (auto& w : waiters)
        w->complete({});
}

void revocation_state::end(error_code ec)
{
    std::vector<std::shared_ptr<op_state<>>> waiters;
    {
        std::lock_guard lk(m_);
        if (ended_)
            return;
        ended_ = true;
        end_ec_ = ec;
        if (!requested_)
            waiters.swap(waiters_);
    }
    for (auto& w : waiters)
        w->complete(ec);
}

}  // namespace zkcoro::detail
