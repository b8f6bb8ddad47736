// The read-write lock: two lock objects on one path, with the read and write rules.
#include "zookeeper/lock.hpp"

#include <zkcoro/detail/access.hpp>
#include <zkcoro/error.hpp>
#include <zkcoro/path.hpp>
#include <zkcoro/shared_mutex.hpp>

namespace zkcoro {

shared_mutex::shared_mutex(client& c, std::string path, mutex_options opts)
{
    using namespace detail;
    std::vector<std::string> markers{std::string(read_marker), std::string(write_marker)};
    auto listing = [markers](const std::vector<std::string>& sorted, std::size_t i) {
        return holds_at(sorted, i, read_write_rule, markers);
    };
    // Both sides share the sort, the markers and the listing; neither hands over in memory: a
    // handoff between our writers would let them pass readers (ours or others') queued before
    // them, breaking the arrival order between the two sides.
    auto side = [&](std::string_view marker, queue_rule rule) {
        recipe_params p;
        p.base_name = std::string(marker);
        p.sort = sort_read_write;
        p.rule = std::move(rule);
        p.listing_holds = listing;
        p.local_handoff_allowed = false;
        p.markers = markers;
        return p;
    };
    auto write_params = side(write_marker, write_rule);
    auto read_params = side(read_marker, read_rule);

    // Each side's hooks look at the other side, made after them.
    struct sides {
        std::weak_ptr<lock_object> read, write;
    };
    auto links = std::make_shared<sides>();
    // Upgrade would deadlock: the write node would queue behind our own read node.
    write_params.precheck = [links](owner_id owner) -> error_code {
        auto r = links->read.lock();
        if (r && r->held_count(owner) > 0)
            return client_errc::upgrade_not_supported;
        return {};
    };
    // Downgrade: the write holder reads at once, with a read node at the write node's sequence.
    read_params.immediate_node = [links](owner_id owner) -> std::optional<std::string> {
        auto w = links->write.lock();
        if (!w)
            return std::nullopt;
        auto node = w->held_node(owner);
        if (!node)
            return std::nullopt;
        std::string name(node_name(*node));
        auto pos = name.rfind(write_marker);
        name.replace(pos, write_marker.size(), read_marker);
        return name;
    };
    auto write_state = make_zk_lock(c, path, opts, std::move(write_params));
    auto read_state = make_zk_lock(c, path, opts, std::move(read_params));
    links->write = write_state;
    links->read = read_state;
    writer_ = std::make_unique<mutex>(access::make_mutex(write_state));
    reader_ = std::make_unique<mutex>(access::make_mutex(read_state));
}

}  // namespace zkcoro
