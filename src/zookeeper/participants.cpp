// A listing of a lock's queue, holders first, by the recipe's own rule.
#include "async/coroutine.hpp"
#include "zookeeper/lock.hpp"

#include <zkcoro/path.hpp>

#include <algorithm>

namespace zkcoro::detail {

namespace {

using participants_result = std::tuple<error_code, std::vector<participant>>;

asio::awaitable<participants_result> list_participants(std::shared_ptr<lock_object> s)
{
    if (s->path_error)
        co_return participants_result{s->path_error, {}};
    auto [ec, ch] = co_await zk_of(*s).async_get_children(s->path, use_tuple);
    if (ec == zk_errc::no_node)
        co_return participants_result{};
    if (ec)
        co_return participants_result{ec, {}};
    auto& sorted = ch.children;
    s->recipe.sort(sorted);
    std::vector<participant> out;
    out.reserve(sorted.size());
    for (std::size_t i = 0; i < sorted.size(); ++i) {
        auto& name = sorted[i];
        auto path = join_path(s->path, name);
        auto [dec, d] = co_await zk_of(*s).async_get_data(path, use_tuple);
        if (dec == zk_errc::no_node)
            continue;  // gone since the listing: no longer in the queue
        if (dec)
            co_return participants_result{dec, {}};
        participant p{name, path, std::move(d.data), d.stat.ephemeral_owner, d.stat.ctime, d.stat.czxid,
                      mode_of(name, s->recipe.markers), s->recipe.listing_holds(sorted, i)};
        out.push_back(std::move(p));
    }
    // Holders first, each group in queue order (a read-write lock's readers may hold behind a
    // foreign node or in any position before the first writer).
    std::stable_partition(out.begin(), out.end(), [](const participant& p) { return p.holds; });
    co_return participants_result{error_code{}, std::move(out)};
}

}  // namespace

void list_queue(const std::shared_ptr<lock_object>& s, std::shared_ptr<op_state<std::vector<participant>>> op)
{
    // No slot: a listing (a few reads) is not cancelled.
    spawn_with(zk_of(*s).get_executor(), list_participants(s), {},
               [op](error_code ec, std::vector<participant> parts) { op->complete(ec, std::move(parts)); });
}

}  // namespace zkcoro::detail
