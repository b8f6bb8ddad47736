// zkcoro::async_request_revoke: Curator's Revoker.attemptRevoke, a setData of "__REVOKE__".
#include "async/op_state.hpp"

#include <zkcoro/path.hpp>
#include <zkcoro/revocation.hpp>

namespace zkcoro::detail {

void start_request_revoke(client& c, std::string node_path, any_handler<void(error_code)> handler)
{
    auto op = make_pooled<op_state<>>(std::move(handler), c.get_executor());
    if (auto pc = check_path(node_path); !pc.ok())
        return void(op->complete(pc.ec));
    op->bind_cancellation();
    c.async_set_data(node_path, revoke_message, -1, [op](error_code ec, node_stat) {
        // Gone already: the holder let go (or was never there); Curator ignores it too.
        op->complete(ec == zk_errc::no_node ? error_code{} : ec);
    });
}

}  // namespace zkcoro::detail
