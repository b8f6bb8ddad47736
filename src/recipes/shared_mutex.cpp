// The read-write lock: two recipes of the lock queue engine on one path.
#include "engine/lock_engine.hpp"

#include <zkcoro/error.hpp>
#include <zkcoro/path.hpp>
#include <zkcoro/shared_mutex.hpp>

#include <algorithm>

namespace zkcoro {

namespace {

constexpr std::string_view read_marker = "__READ__";
constexpr std::string_view write_marker = "__WRIT__";

bool is_write(std::string_view name) { return name.find(write_marker) != std::string_view::npos; }

std::string_view rw_key(std::string_view name)
{
    if (auto pos = name.rfind(read_marker); pos != std::string_view::npos)
        return name.substr(pos + read_marker.size());
    if (auto pos = name.rfind(write_marker); pos != std::string_view::npos)
        return name.substr(pos + write_marker.size());
    return name;
}

// A reader holds when no writer sorts before it, and otherwise watches the first such writer.
detail::queue_decision read_rule(const std::vector<std::string>& sorted, std::size_t ours)
{
    std::size_t first_writer = sorted.size(), writers_before = 0;
    for (std::size_t i = 0; i < ours; ++i)
        if (is_write(sorted[i])) {
            first_writer = std::min(first_writer, i);
            ++writers_before;
        }
    if (writers_before == 0)
        return {true, 0, false};
    return {false, first_writer, writers_before == 1};
}

// A writer holds when first. Unlike the mutex, its predecessor's deletion does not grant by
// itself: a downgrade inserts a read node at an older sequence, possibly before us, so re-read.
detail::queue_decision write_rule(const std::vector<std::string>& sorted, std::size_t ours)
{
    auto d = detail::mutex_rule(sorted, ours);
    d.deletion_grants = false;
    return d;
}

}  // namespace

void sort_read_write(std::vector<std::string>& names)
{
    std::stable_sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
        auto ka = rw_key(a), kb = rw_key(b);
        if (ka != kb)
            return ka < kb;
        // Same sequence (a downgrade's read node): the write node first.
        return is_write(a) && !is_write(b);
    });
}

shared_mutex::shared_mutex(client& c, std::string path, mutex_options opts)
{
    auto write_params = detail::recipe_params{};
    write_params.base_name = std::string(write_marker);
    write_params.sort = sort_read_write;
    write_params.rule = write_rule;
    // No in-memory handoff between our writers: it would let them pass readers (ours or
    // others') queued before them, breaking the arrival order between the two sides.
    write_params.local_handoff_allowed = false;
    write_params.markers = {std::string(read_marker), std::string(write_marker)};
    auto read_params = detail::recipe_params{};
    read_params.base_name = std::string(read_marker);
    read_params.sort = sort_read_write;
    read_params.rule = read_rule;
    read_params.local_handoff_allowed = false;
    read_params.markers = write_params.markers;

    // Each side's hooks look at the other side, made after them.
    struct sides {
        std::weak_ptr<detail::mutex_state> read, write;
    };
    auto links = std::make_shared<sides>();
    // Upgrade would deadlock: the write node would queue behind our own read node.
    write_params.precheck = [links](owner_id owner) -> error_code {
        auto r = links->read.lock();
        if (r && detail::held_count(*r, owner) > 0)
            return client_errc::upgrade_not_supported;
        return {};
    };
    // Downgrade: the write holder reads at once, with a read node at the write node's sequence.
    read_params.immediate_node = [links](owner_id owner) -> std::optional<std::string> {
        auto w = links->write.lock();
        if (!w)
            return std::nullopt;
        auto node = detail::held_node(*w, owner);
        if (!node)
            return std::nullopt;
        std::string name(node_name(*node));
        auto pos = name.rfind(write_marker);
        name.replace(pos, write_marker.size(), read_marker);
        return name;
    };
    auto write_state = detail::make_mutex_state(c, path, opts, std::move(write_params));
    auto read_state = detail::make_mutex_state(c, path, opts, std::move(read_params));
    links->write = write_state;
    links->read = read_state;
    writer_ = std::make_unique<mutex>(detail::mutex_access::make(write_state));
    reader_ = std::make_unique<mutex>(detail::mutex_access::make(read_state));
}

}  // namespace zkcoro
