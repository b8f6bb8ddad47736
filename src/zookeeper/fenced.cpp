// Transactions fenced by a lock node: a check on the node first, so that the transaction commits
// only while the lock's session (and so the lock) is alive.
#include "engine/lease.hpp"

#include <zkcoro/client.hpp>
#include <zkcoro/guard.hpp>

namespace zkcoro::detail {

void fenced_multi_impl(std::shared_ptr<lease> l, std::vector<multi_op> ops,
                       any_handler<void(error_code, std::vector<multi_result>)> handler)
{
    if (!l)
        return fail_empty_handle(std::move(handler), client_errc::empty_guard);
    auto op = make_pooled<op_state<std::vector<multi_result>>>(std::move(handler), l->executor());
    client* zk = l->zookeeper();
    if (!zk)
        return void(op->complete(client_errc::not_supported, std::vector<multi_result>{}));
    if (l->lost())
        return void(op->complete(client_errc::lock_lost, std::vector<multi_result>{}));
    ops.insert(ops.begin(), check_op{l->resource(), -1});
    // The caller's cancellation completes it at once; the transaction, once sent, goes on.
    op->bind_cancellation();
    zk->async_multi(std::move(ops), [op, l](error_code ec, std::vector<multi_result> results) {
        if (!results.empty()) {
            // The check on our node failed: the lock is gone, nothing was applied.
            if (results.front().ec == zk_errc::no_node)
                ec = client_errc::lock_lost;
            results.erase(results.begin());
        }
        op->complete(ec, std::move(results));
    });
}

}  // namespace zkcoro::detail
