// The read-write lock: two lock objects on one path, with the read and write rules.
#include "engine/lock_object.hpp"

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
    recipe_params write_params;
    write_params.base_name = std::string(write_marker);
    write_params.sort = sort_read_write;
    write_params.rule = write_rule;
    write_params.listing_holds = listing;
    // No in-memory handoff between our writers: it would let them pass readers (ours or
    // others') queued before them, breaking the arrival order between the two sides.
    write_params.local_handoff_allowed = false;
    write_params.markers = markers;
    recipe_params read_params;
    read_params.base_name = std::string(read_marker);
    read_params.sort = sort_read_write;
    read_params.rule = read_rule;
    read_params.listing_holds = listing;
    read_params.local_handoff_allowed = false;
    read_params.markers = markers;

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
    auto write_state = std::make_shared<lock_object>(c, path, opts, std::move(write_params));
    auto read_state = std::make_shared<lock_object>(c, path, opts, std::move(read_params));
    links->write = write_state;
    links->read = read_state;
    writer_ = std::make_unique<mutex>(access::make_mutex(write_state));
    reader_ = std::make_unique<mutex>(access::make_mutex(read_state));
}

}  // namespace zkcoro
