#include "engine/rules.hpp"

#include <algorithm>

namespace zkcoro {

std::string_view sequence_key(std::string_view name, std::string_view marker) noexcept
{
    auto pos = name.rfind(marker);
    return pos == std::string_view::npos ? name : name.substr(pos + marker.size());
}

namespace {

// Sorts `names` stably by key(name), each key found once per name, not once per comparison: the
// comparator that searched both names for the marker made a waiter behind 1 000 nodes spend most
// of its CPU in rfind (two sorted listings per acquisition, about 40 000 searches each; bench/
// scale.sh). Of two names with equal keys, one for which first(name) holds goes first.
template <class Key, class First>
void sort_by_key(std::vector<std::string>& names, Key key, First first)
{
    if (names.size() < 2)
        return;  // the uncontended listing: nothing to allocate
    struct entry {
        std::string_view key;
        std::size_t index;
        bool first;
    };
    std::vector<entry> order;
    order.reserve(names.size());
    for (std::size_t i = 0; i < names.size(); ++i)
        order.push_back({key(names[i]), i, first(names[i])});
    std::stable_sort(order.begin(), order.end(), [](const entry& a, const entry& b) {
        if (a.key != b.key)
            return a.key < b.key;
        return a.first && !b.first;
    });
    std::vector<std::string> sorted;
    sorted.reserve(names.size());
    for (const auto& e : order)
        sorted.push_back(std::move(names[e.index]));  // the keys are not read after the sort
    names = std::move(sorted);
}

std::string_view rw_key(std::string_view name)
{
    if (auto pos = name.rfind(detail::read_marker); pos != std::string_view::npos)
        return name.substr(pos + detail::read_marker.size());
    if (auto pos = name.rfind(detail::write_marker); pos != std::string_view::npos)
        return name.substr(pos + detail::write_marker.size());
    return name;
}

}  // namespace

void sort_by_sequence(std::vector<std::string>& names, std::string_view marker)
{
    sort_by_key(
        names, [marker](std::string_view n) { return sequence_key(n, marker); },
        [](std::string_view) { return false; });
}

// Same sequence (a downgrade's read node): the write node first.
void sort_read_write(std::vector<std::string>& names)
{
    sort_by_key(names, rw_key, [](std::string_view n) { return detail::is_write_node(n); });
}

namespace detail {

queue_decision mutex_rule(const std::vector<std::string>&, std::size_t ours)
{
    if (ours == 0)
        return {true, 0, false, false};
    return {false, ours - 1, ours == 1, false};
}

queue_decision read_rule(const std::vector<std::string>& sorted, std::size_t ours)
{
    std::size_t first_writer = sorted.size(), writers_before = 0;
    for (std::size_t i = 0; i < ours && i < sorted.size(); ++i)
        if (is_write_node(sorted[i])) {
            first_writer = std::min(first_writer, i);
            ++writers_before;
        }
    if (writers_before == 0)
        return {true, 0, false, false};
    return {false, first_writer, writers_before == 1, false};
}

queue_decision write_rule(const std::vector<std::string>& sorted, std::size_t ours)
{
    auto d = mutex_rule(sorted, ours);
    d.deletion_grants = false;
    return d;
}

queue_decision read_write_rule(const std::vector<std::string>& sorted, std::size_t i)
{
    if (i < sorted.size() && is_write_node(sorted[i]))
        return write_rule(sorted, i);
    return read_rule(sorted, i);
}

bool lease_holds(const std::vector<std::string>& sorted, std::size_t i, int max_leases) noexcept
{
    return i < sorted.size() && i < static_cast<std::size_t>(std::max(0, max_leases));
}

queue_decision lease_rule(const std::vector<std::string>& sorted, std::size_t, int max_leases)
{
    queue_decision d;
    d.holds = sorted.size() <= static_cast<std::size_t>(std::max(0, max_leases));
    d.watch_children = !d.holds;
    return d;
}

bool is_write_node(std::string_view name) noexcept { return name.find(write_marker) != std::string_view::npos; }
bool is_read_node(std::string_view name) noexcept { return name.find(read_marker) != std::string_view::npos; }

bool is_foreign(std::string_view name, const std::vector<std::string>& markers) noexcept
{
    return std::none_of(markers.begin(), markers.end(),
                        [&](const std::string& m) { return name.find(m) != std::string_view::npos; });
}

lock_mode mode_of(std::string_view name, const std::vector<std::string>& markers) noexcept
{
    if (is_foreign(name, markers))
        return lock_mode::foreign;
    if (is_write_node(name))
        return lock_mode::write;
    if (is_read_node(name))
        return lock_mode::read;
    if (name.find(lease_marker) != std::string_view::npos)
        return lock_mode::lease;
    return lock_mode::exclusive;
}

std::optional<std::size_t> position_of(const std::vector<std::string>& sorted, std::string_view our_name) noexcept
{
    auto it = std::find(sorted.begin(), sorted.end(), our_name);
    if (it == sorted.end())
        return std::nullopt;
    return static_cast<std::size_t>(it - sorted.begin());
}

bool holds_at(const std::vector<std::string>& sorted, std::size_t i, const queue_rule& rule,
              const std::vector<std::string>& markers)
{
    return i < sorted.size() && !is_foreign(sorted[i], markers) && rule(sorted, i).holds;
}

}  // namespace detail
}  // namespace zkcoro
