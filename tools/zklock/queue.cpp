// The queue at a lock path, for `zklock status` and for the waiting line: zkcoro's and Curator's
// nodes alike (same layouts), holder(s) first.
//   mutex:      <path>/_c_<uuid>-lock-<seq>                 sorted by the text after "lock-"
//   read-write: <path>/_c_<uuid>-__READ__<seq> / __WRIT__   zkcoro::sort_read_write
//   semaphore:  <path>/leases/_c_<uuid>-lease-<seq>          the leases, then the entry queue
//               <path>/locks/_c_<uuid>-lock-<seq>            (a mutex) of those still waiting
#include "zklock.hpp"

#include <zkcoro/mutex.hpp>
#include <zkcoro/path.hpp>
#include <zkcoro/shared_mutex.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <string_view>

namespace zklock {

namespace {

constexpr int zk_nonode = -101;  // ZooKeeper's ZNONODE (a node vanished while we looked)

bool is_nonode(const zkcoro::error_code& ec)
{
    return ec.value() == zk_nonode && ec.category() == zkcoro::zookeeper_category();
}

bool contains(std::string_view s, std::string_view part)
{
    return s.find(part) != std::string_view::npos;
}

// The children of `parent`; empty when it does not exist.
asio::awaitable<std::vector<std::string>> children_of(zkcoro::client& zk, std::string parent)
{
    auto [ec, r] = co_await zk.async_get_children(parent, asio::as_tuple(asio::use_awaitable));
    if (is_nonode(ec))
        co_return std::vector<std::string>{};
    if (ec)
        throw boost::system::system_error(ec, "listing " + parent);
    co_return std::move(r.children);
}

// Reads data and Stat of each named child, in order; nodes gone meanwhile are left out.
asio::awaitable<void> read_entries(zkcoro::client& zk, std::string parent, std::vector<std::string> names,
                                   std::string mode, std::vector<queue_entry>& out)
{
    for (auto& name : names) {
        queue_entry e;
        e.node = name;
        e.path = zkcoro::join_path(parent, name);
        e.mode = mode;
        auto [ec, d] = co_await zk.async_get_data(e.path, asio::as_tuple(asio::use_awaitable));
        if (is_nonode(ec))
            continue;
        if (ec)
            throw boost::system::system_error(ec, "reading " + e.path);
        e.data = std::move(d.data);
        e.session = d.stat.ephemeral_owner;
        e.ctime_ms = d.stat.ctime;
        out.push_back(std::move(e));
    }
}

std::vector<std::string> with(const std::vector<std::string>& names, std::string_view marker)
{
    std::vector<std::string> out;
    for (const auto& n : names)
        if (contains(n, marker))
            out.push_back(n);
    return out;
}

asio::awaitable<void> list_mutex(zkcoro::client& zk, const std::string& path, std::vector<std::string> names,
                                 queue_listing& q)
{
    names = with(names, "lock-");
    zkcoro::sort_by_sequence(names, "lock-");
    q.recipe = "mutex";
    co_await read_entries(zk, path, names, "", q.entries);
    for (std::size_t i = 0; i < q.entries.size(); ++i)
        q.entries[i].holding = i == 0;
}

asio::awaitable<void> list_read_write(zkcoro::client& zk, const std::string& path, std::vector<std::string> names,
                                      queue_listing& q)
{
    std::vector<std::string> rw;
    for (const auto& n : names)
        if (contains(n, "__READ__") || contains(n, "__WRIT__"))
            rw.push_back(n);
    zkcoro::sort_read_write(rw);
    q.recipe = "read-write";
    for (const auto& n : rw) {
        std::vector<queue_entry> one;
        std::vector<std::string> single{n};
        std::string mode = contains(n, "__WRIT__") ? "write" : "read";
        co_await read_entries(zk, path, std::move(single), std::move(mode), one);
        for (auto& e : one)
            q.entries.push_back(std::move(e));
    }
    // A writer holds when first; a reader holds when no writer is ahead of it.
    bool writer_ahead = false;
    for (std::size_t i = 0; i < q.entries.size(); ++i) {
        auto& e = q.entries[i];
        if (e.mode == "write") {
            e.holding = i == 0;
            writer_ahead = true;
        } else {
            e.holding = !writer_ahead;
        }
    }
}

asio::awaitable<void> list_semaphore(zkcoro::client& zk, const std::string& path, queue_listing& q)
{
    q.recipe = "semaphore";
    const auto leases_path = zkcoro::join_path(path, "leases");
    const auto locks_path = zkcoro::join_path(path, "locks");
    auto leases = with(co_await children_of(zk, leases_path), "lease-");
    zkcoro::sort_by_sequence(leases, "lease-");
    co_await read_entries(zk, leases_path, leases, "lease", q.entries);
    auto queued = with(co_await children_of(zk, locks_path), "lock-");
    zkcoro::sort_by_sequence(queued, "lock-");
    co_await read_entries(zk, locks_path, queued, "queued", q.entries);
}

}  // namespace

asio::awaitable<queue_listing> list_queue_as(zkcoro::client& zk, std::string path, recipe r)
{
    queue_listing q;
    q.path = path;
    if (r == recipe::semaphore) {
        co_await list_semaphore(zk, path, q);
    } else {
        auto names = co_await children_of(zk, path);
        if (r == recipe::read || r == recipe::write)
            co_await list_read_write(zk, path, std::move(names), q);
        else
            co_await list_mutex(zk, path, std::move(names), q);
    }
    co_return q;
}

asio::awaitable<queue_listing> list_queue(zkcoro::client& zk, std::string path)
{
    queue_listing q;
    q.path = path;
    auto names = co_await children_of(zk, path);
    const bool semaphore = std::find(names.begin(), names.end(), "leases") != names.end();
    const bool rw = std::any_of(names.begin(), names.end(), [](const std::string& n) {
        return contains(n, "__READ__") || contains(n, "__WRIT__");
    });
    const bool mtx = std::any_of(names.begin(), names.end(), [](const std::string& n) { return contains(n, "lock-"); });
    if (semaphore)
        co_await list_semaphore(zk, path, q);
    else if (rw)
        co_await list_read_write(zk, path, std::move(names), q);
    else if (mtx)
        co_await list_mutex(zk, path, std::move(names), q);
    else
        q.recipe = "none";
    co_return q;
}

double age_seconds(std::int64_t ctime_ms)
{
    const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    return std::max<double>(0.0, static_cast<double>(now_ms - ctime_ms) / 1000.0);
}

std::string session_hex(std::int64_t id)
{
    return fmt::format("0x{:x}", static_cast<std::uint64_t>(id));
}

std::string render_text(const queue_listing& q)
{
    std::string out = fmt::format("{} ({}): {} node{}\n", q.path, q.recipe, q.entries.size(),
                                  q.entries.size() == 1 ? "" : "s");
    for (std::size_t i = 0; i < q.entries.size(); ++i) {
        const auto& e = q.entries[i];
        std::string state;
        if (e.holding)
            state = *e.holding ? "holds" : "waits";
        std::string mode = e.mode.empty() ? state : (state.empty() ? e.mode : e.mode + ", " + state);
        out += fmt::format("{:3} {:<6} session {:<18} age {:>8.1f}s  data '{}'  {}\n", i + 1, mode,
                           session_hex(e.session), age_seconds(e.ctime_ms), e.data, e.node);
    }
    return out;
}

std::string render_json(const queue_listing& q)
{
    nlohmann::ordered_json j;
    j["path"] = q.path;
    j["recipe"] = q.recipe;
    j["participants"] = nlohmann::ordered_json::array();
    for (const auto& e : q.entries) {
        nlohmann::ordered_json p;
        p["node"] = e.node;
        p["session"] = session_hex(e.session);
        p["data"] = e.data;
        p["age_s"] = std::round(age_seconds(e.ctime_ms) * 1000.0) / 1000.0;
        if (!e.mode.empty())
            p["mode"] = e.mode;
        if (e.holding)
            p["holding"] = *e.holding;
        j["participants"].push_back(std::move(p));
    }
    // Data read from ZooKeeper need not be UTF-8: replace what is not, rather than throw.
    return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace zklock
