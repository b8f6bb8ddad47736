// The pure part of the tree scan: recipes recognised from names, queues ordered and decided by
// the recipes' own rules, and the wait-for graph between sessions with its cycles.
#include "recipes/scan_rules.hpp"

#include "engine/rules.hpp"

#include <zkcoro/holder_data.hpp>

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

namespace zkcoro {

std::string_view to_string(lock_kind k) noexcept
{
    switch (k) {
    case lock_kind::mutex: return "mutex";
    case lock_kind::read_write: return "read-write";
    case lock_kind::semaphore: return "semaphore";
    case lock_kind::leader_latch: return "leader-latch";
    }
    return "unknown";
}

namespace detail {

namespace {

// Whether `n` is a node of a recipe with `marker`: the marker, then the sequence number the server
// appended (digits only), as in "_c_<uuid>-lock-0000000001". A name that only contains the marker
// ("zklock-test-1", "my-lock-files") is a plain node, and may hold locks below it.
bool has(std::string_view n, std::string_view marker) noexcept
{
    const auto pos = n.rfind(marker);
    if (pos == std::string_view::npos || pos + marker.size() == n.size())
        return false;
    const auto seq = n.substr(pos + marker.size());
    return std::all_of(seq.begin(), seq.end(), [](char c) { return c >= '0' && c <= '9'; });
}
}  // namespace

bool is_lock_node_name(std::string_view n) noexcept
{
    return has(n, lock_marker) || has(n, read_marker) || has(n, write_marker) || has(n, latch_marker) ||
           has(n, lease_marker);
}

dir_kind kind_of(const std::vector<std::string>& names) noexcept
{
    auto any = [&](auto pred) { return std::any_of(names.begin(), names.end(), pred); };
    if (any([](const std::string& n) { return has(n, read_marker) || has(n, write_marker); }))
        return dir_kind::read_write;
    if (any([](const std::string& n) { return has(n, latch_marker); }))
        return dir_kind::leader_latch;
    if (any([](const std::string& n) { return has(n, lease_marker); }))
        return dir_kind::leases;
    if (any([](const std::string& n) { return has(n, lock_marker); }))
        return dir_kind::mutex;
    return dir_kind::none;
}

namespace {

// A directory kind's queue: its markers, its order and who holds in it.
struct queue_rules {
    std::vector<std::string> markers;
    std::function<void(std::vector<std::string>&)> sort;
    std::function<bool(const std::vector<std::string>&, std::size_t)> holds;
};

queue_rules rules_of(dir_kind kind)
{
    queue_rules r;
    switch (kind) {
    case dir_kind::none: break;
    case dir_kind::mutex:
    case dir_kind::leader_latch: {
        const std::string_view marker = kind == dir_kind::mutex ? lock_marker : latch_marker;
        r.markers = {std::string(marker)};
        r.sort = [marker](std::vector<std::string>& v) { sort_by_sequence(v, marker); };
        r.holds = [markers = r.markers](const std::vector<std::string>& s, std::size_t i) {
            return holds_at(s, i, mutex_rule, markers);
        };
        break;
    }
    case dir_kind::read_write:
        r.markers = {std::string(read_marker), std::string(write_marker)};
        r.sort = sort_read_write;
        r.holds = [markers = r.markers](const std::vector<std::string>& s, std::size_t i) {
            return holds_at(s, i, read_write_rule, markers);
        };
        break;
    case dir_kind::leases:
        // The semaphore's size is not stored: every child counts as a lease taken (Curator
        // counts them all), a foreign one included, though it holds for nobody.
        r.markers = {std::string(lease_marker)};
        r.sort = [](std::vector<std::string>& v) { sort_by_sequence(v, lease_marker); };
        r.holds = [markers = r.markers](const std::vector<std::string>& s, std::size_t i) {
            return lease_holds(s, i, std::numeric_limits<int>::max()) && !is_foreign(s[i], markers);
        };
        break;
    }
    return r;
}

}  // namespace

std::vector<std::string> queue_members(dir_kind kind, std::vector<std::string> names)
{
    if (kind == dir_kind::none)
        return {};
    if (kind == dir_kind::leases)
        return names;
    auto r = rules_of(kind);
    r.sort(names);
    std::size_t end = 0;  // one past the last lock node of this kind
    for (std::size_t i = 0; i < names.size(); ++i)
        if (std::any_of(r.markers.begin(), r.markers.end(), [&](const std::string& m) { return has(names[i], m); }))
            end = i + 1;
    names.resize(end);
    return names;
}

void order_queue(dir_kind kind, std::vector<participant> nodes, std::vector<participant>& holders,
                 std::vector<participant>& waiters)
{
    auto [markers, sort, holds] = rules_of(kind);
    if (kind == dir_kind::none)
        return;
    std::vector<std::string> sorted;
    sorted.reserve(nodes.size());
    std::unordered_map<std::string, participant*> by_name;
    for (auto& p : nodes) {
        sorted.push_back(p.name);
        by_name.emplace(p.name, &p);
    }
    sort(sorted);
    for (std::size_t i = 0; i < sorted.size(); ++i) {
        participant& p = *by_name.at(sorted[i]);
        p.mode = mode_of(p.name, markers);
        p.holds = holds(sorted, i);
        const bool occupies = kind == dir_kind::leases;  // a foreign lease node takes a lease
        (p.holds || occupies ? holders : waiters).push_back(std::move(p));
    }
}

}  // namespace detail

std::vector<wait_edge> wait_for_graph(const std::vector<lock_info>& locks)
{
    std::vector<wait_edge> edges;
    for (const auto& l : locks) {
        if (l.kind == lock_kind::leader_latch)
            continue;
        for (const auto& w : l.waiters) {
            if (w.mode == lock_mode::foreign || w.session_id == 0)
                continue;
            // A waiter run inside another lock's holder (zklock in zklock) waits for it too.
            std::int64_t parent = 0;
            if (auto who = parse_holder_data(w.data); who && who->parent_session != w.session_id)
                parent = who->parent_session;
            for (const auto& h : l.holders) {
                if (h.mode == lock_mode::foreign || h.session_id == 0)
                    continue;
                if (h.session_id != w.session_id)
                    edges.push_back(wait_edge{w.session_id, h.session_id, l.path, w.path, h.path, w.data, h.data});
                if (parent != 0 && parent != h.session_id)
                    edges.push_back(wait_edge{parent, h.session_id, l.path, w.path, h.path, w.data, h.data});
            }
        }
    }
    return edges;
}

std::vector<wait_cycle> find_cycles(const std::vector<wait_edge>& edges)
{
    // Tarjan's strongly connected components, iteratively (a graph of many sessions must not
    // overflow the stack).
    std::map<std::int64_t, std::vector<std::int64_t>> adj;
    for (const auto& e : edges) {
        adj[e.waiter_session].push_back(e.holder_session);
        adj.try_emplace(e.holder_session);
    }
    std::map<std::int64_t, int> index, low;
    std::set<std::int64_t> on_stack;
    std::vector<std::int64_t> stack;
    std::vector<std::set<std::int64_t>> components;
    int next = 0;
    for (const auto& [start, _] : adj) {
        if (index.count(start))
            continue;
        std::vector<std::pair<std::int64_t, std::size_t>> work{{start, 0}};
        index[start] = low[start] = next++;
        stack.push_back(start);
        on_stack.insert(start);
        while (!work.empty()) {
            auto& [v, i] = work.back();
            const auto& out = adj[v];
            if (i < out.size()) {
                const std::int64_t w = out[i++];
                if (!index.count(w)) {
                    index[w] = low[w] = next++;
                    stack.push_back(w);
                    on_stack.insert(w);
                    work.emplace_back(w, 0);
                } else if (on_stack.count(w)) {
                    low[v] = std::min(low[v], index[w]);
                }
                continue;
            }
            const std::int64_t done = v;
            work.pop_back();
            if (!work.empty())
                low[work.back().first] = std::min(low[work.back().first], low[done]);
            if (low[done] == index[done]) {
                std::set<std::int64_t> comp;
                std::int64_t x = 0;
                do {
                    x = stack.back();
                    stack.pop_back();
                    on_stack.erase(x);
                    comp.insert(x);
                } while (x != done);
                if (comp.size() > 1)
                    components.push_back(std::move(comp));
            }
        }
    }
    std::vector<wait_cycle> cycles;
    for (auto& comp : components) {
        wait_cycle c;
        c.sessions.assign(comp.begin(), comp.end());
        for (const auto& e : edges)
            if (comp.count(e.waiter_session) && comp.count(e.holder_session))
                c.edges.push_back(e);
        std::stable_sort(c.edges.begin(), c.edges.end(),
                         [](const wait_edge& a, const wait_edge& b) { return a.lock < b.lock; });
        cycles.push_back(std::move(c));
    }
    std::sort(cycles.begin(), cycles.end(),
              [](const wait_cycle& a, const wait_cycle& b) { return a.sessions.front() < b.sessions.front(); });
    return cycles;
}

}  // namespace zkcoro
