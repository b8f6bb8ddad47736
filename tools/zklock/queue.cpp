// The queue at a lock path, for `zklock status` and for the waiting line: zkcoro's and Curator's
// nodes alike (same layouts), holder(s) first. Who holds is the library's answer
// (async_participants of the recipe objects), not restated here.
//   mutex:      <path>/_c_<uuid>-lock-<seq>                 sorted by the text after "lock-"
//   read-write: <path>/_c_<uuid>-__READ__<seq> / __WRIT__   zkcoro::sort_read_write
//   semaphore:  <path>/leases/_c_<uuid>-lease-<seq>          the leases, then the entry queue
//               <path>/locks/_c_<uuid>-lock-<seq>            (a mutex) of those still waiting
//   latch:      <path>/_c_<uuid>-latch-<seq>                Curator's LeaderLatch, zkcoro's
//               leader_latch: the first leads; data is the participant id
// A leader selector (Curator's LeaderSelector, zkcoro::run_as_leader) is a mutex whose holder
// leads and whose data is the participant id: it shows as a mutex.
#include "zklock.hpp"

#include <zkcoro/leader_latch.hpp>
#include <zkcoro/mutex.hpp>
#include <zkcoro/path.hpp>
#include <zkcoro/semaphore.hpp>
#include <zkcoro/shared_mutex.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <limits>
#include <cmath>
#include <chrono>
#include <string_view>

namespace zklock {

namespace {

bool contains(std::string_view s, std::string_view part)
{
    return s.find(part) != std::string_view::npos;
}

bool is_rw_node(std::string_view n)
{
    return contains(n, "__READ__") || contains(n, "__WRIT__");
}

bool is_latch_node(std::string_view n)
{
    return contains(n, "latch-");
}

bool is_semaphore_dir(std::string_view n)
{
    return n == "leases" || n == "locks";
}

// A child that belongs to no recipe zklock knows at a lock path. Curator does not filter them:
// they take their place in its order (by the whole name), so one that sorts first blocks.
bool is_foreign(std::string_view n)
{
    return !contains(n, "lock-") && !is_rw_node(n) && !is_semaphore_dir(n) && !is_latch_node(n);
}

std::string mode_name(zkcoro::lock_mode m)
{
    switch (m) {
    case zkcoro::lock_mode::exclusive: return "";
    case zkcoro::lock_mode::read: return "read";
    case zkcoro::lock_mode::write: return "write";
    case zkcoro::lock_mode::lease: return "lease";
    case zkcoro::lock_mode::foreign: return "foreign";
    }
    return "";
}

// The queue as the recipe object reports it (holders first, by the library's own rules), as
// status entries of `recipe_name`. Children that another recipe's section lists are skipped.
template <class Lock>
asio::awaitable<void> add_participants(Lock& lock, std::string recipe_name, std::string mode_override,
                                       const std::function<bool(std::string_view)>& skip, queue_listing& q)
{
    auto parts = co_await lock.async_participants(asio::use_awaitable);  // throws system_error
    for (auto& p : parts) {
        if (skip && skip(p.name))
            continue;
        queue_entry e;
        e.node = p.name;
        e.path = p.path;
        e.data = std::move(p.data);
        e.session = p.session_id;
        e.ctime_ms = p.ctime;
        e.recipe = recipe_name;
        e.mode = p.mode == zkcoro::lock_mode::foreign || mode_override.empty() ? mode_name(p.mode) : mode_override;
        if (p.mode != zkcoro::lock_mode::foreign && p.mode != zkcoro::lock_mode::lease)
            e.holding = p.holds;
        q.entries.push_back(std::move(e));
    }
}

// The mutex at `path`, in Curator's order, foreign children included.
asio::awaitable<void> list_mutex(zkcoro::client& zk, const std::string& path, queue_listing& q,
                                 const std::function<bool(std::string_view)>& skip)
{
    zkcoro::mutex m(zk, path);
    const std::size_t first = q.entries.size();
    co_await add_participants(m, "mutex", "", skip, q);
    if (first < q.entries.size() && q.entries[first].mode == "foreign")
        q.notes.push_back(fmt::format("foreign node {} sorts first and blocks the lock (Curator's order; "
                                      "delete it if nobody owns it)",
                                      escape(q.entries[first].node)));
}

asio::awaitable<void> list_read_write(zkcoro::client& zk, const std::string& path, queue_listing& q,
                                      const std::function<bool(std::string_view)>& skip)
{
    zkcoro::shared_mutex rw(zk, path);
    const std::size_t first = q.entries.size();
    co_await add_participants(rw, "read-write", "", skip, q);
    // A foreign node ahead of every writer blocks the writers (not the readers: they only look
    // for writers). Holders come first, and a writer holds only when it is first in the queue.
    for (std::size_t i = first; i < q.entries.size(); ++i) {
        if (q.entries[i].mode == "write")
            break;
        if (q.entries[i].mode == "foreign") {
            q.notes.push_back(fmt::format("foreign node {} sorts before every writer and blocks the write lock",
                                          escape(q.entries[i].node)));
            break;
        }
    }
}

// A leader latch: the participants in order, the leader first (holding), each with its id.
asio::awaitable<void> list_latch(zkcoro::client& zk, const std::string& path, queue_listing& q)
{
    zkcoro::leader_latch latch(zk, path);  // not started: it only lists
    co_await add_participants(latch, "leader-latch", "", [](std::string_view n) { return !is_latch_node(n); }, q);
}

asio::awaitable<void> list_semaphore(zkcoro::client& zk, const std::string& path, queue_listing& q)
{
    // Every child of leases/ counts as a lease taken (Curator counts them all), whatever the
    // semaphore's size, which is not stored: list it as unbounded.
    zkcoro::semaphore leases(zk, path, std::numeric_limits<int>::max());
    const std::size_t first = q.entries.size();
    co_await add_participants(leases, "semaphore", "", nullptr, q);
    for (std::size_t i = first; i < q.entries.size(); ++i)
        if (q.entries[i].mode == "foreign")
            q.notes.push_back(fmt::format("foreign node leases/{} counts as a lease taken", escape(q.entries[i].node)));
    // Those still waiting queue on the entry mutex at <path>/locks.
    zkcoro::mutex entry(zk, zkcoro::join_path(path, "locks"));
    const std::size_t second = q.entries.size();
    co_await add_participants(entry, "semaphore", "queued", nullptr, q);
    for (std::size_t i = second; i < q.entries.size(); ++i)
        q.entries[i].holding.reset();
    if (second < q.entries.size() && q.entries[second].mode == "foreign")
        q.notes.push_back(fmt::format("foreign node locks/{} sorts first and blocks the semaphore's entry",
                                      escape(q.entries[second].node)));
}

}  // namespace

asio::awaitable<queue_listing> list_queue_as(zkcoro::client& zk, std::string path, recipe r)
{
    queue_listing q;
    q.path = path;
    if (r == recipe::semaphore) {
        q.recipe = "semaphore";
        co_await list_semaphore(zk, path, q);
    } else if (r == recipe::read || r == recipe::write) {
        q.recipe = "read-write";
        co_await list_read_write(zk, path, q,
                                 [](std::string_view n) { return contains(n, "lock-") || is_semaphore_dir(n); });
    } else {
        q.recipe = "mutex";
        co_await list_mutex(zk, path, q, nullptr);
    }
    co_return q;
}

asio::awaitable<queue_listing> list_queue(zkcoro::client& zk, std::string path)
{
    queue_listing q;
    q.path = path;
    auto [ec, r] = co_await zk.async_get_children(path, asio::as_tuple(asio::use_awaitable));
    if (ec && ec != zkcoro::zk_errc::no_node)
        throw boost::system::system_error(ec, "listing " + path);
    const auto& names = r.children;
    const bool semaphore = std::any_of(names.begin(), names.end(), [](const std::string& n) { return is_semaphore_dir(n); });
    const bool rw = std::any_of(names.begin(), names.end(), [](const std::string& n) { return is_rw_node(n); });
    const bool mtx = std::any_of(names.begin(), names.end(), [](const std::string& n) { return contains(n, "lock-"); });
    const bool foreign = std::any_of(names.begin(), names.end(), [](const std::string& n) { return is_foreign(n); });
    const bool latch = std::any_of(names.begin(), names.end(), [](const std::string& n) { return is_latch_node(n); });
    std::vector<std::string> recipes;
    // Foreign children are listed once, in the first recipe's order that they affect.
    if (mtx) {
        recipes.emplace_back("mutex");
        co_await list_mutex(zk, path, q,
                            [](std::string_view n) { return is_rw_node(n) || is_semaphore_dir(n) || is_latch_node(n); });
    }
    if (rw) {
        recipes.emplace_back("read-write");
        co_await list_read_write(zk, path, q, [mtx](std::string_view n) {
            return contains(n, "lock-") || is_semaphore_dir(n) || (mtx && is_foreign(n));
        });
    }
    if (semaphore) {
        recipes.emplace_back("semaphore");
        co_await list_semaphore(zk, path, q);
    }
    if (latch) {
        recipes.emplace_back("leader-latch");
        co_await list_latch(zk, path, q);
    }
    if (!mtx && !rw && foreign) {
        // No lock yet, but a mutex or a writer taken here would queue behind the first of these.
        const std::size_t first = q.entries.size();
        const std::size_t notes = q.notes.size();
        co_await list_mutex(zk, path, q, [](std::string_view n) { return !is_foreign(n); });
        for (std::size_t i = first; i < q.entries.size(); ++i)
            q.entries[i].recipe = "none";
        q.notes.resize(notes);
        if (first < q.entries.size())
            q.notes.push_back(fmt::format("foreign node {} sorts first and would block a mutex or a writer taken here",
                                          escape(q.entries[first].node)));
    }
    if (recipes.size() > 1)
        q.notes.push_back(fmt::format("the {} on this path do not exclude each other: use one kind of lock per path",
                                      fmt::join(recipes, " and ")));
    q.recipe = recipes.empty() ? "none" : fmt::format("{}", fmt::join(recipes, "+"));
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

std::string escape(std::string_view text)
{
    std::string out;
    out.reserve(text.size());
    const auto* p = reinterpret_cast<const unsigned char*>(text.data());
    const std::size_t n = text.size();
    for (std::size_t i = 0; i < n;) {
        const unsigned char c = p[i];
        if (c == '\\') {
            out += "\\\\";
            ++i;
        } else if (c >= 0x20 && c < 0x7f) {
            out += static_cast<char>(c);
            ++i;
        } else if (c == '\n') {
            out += "\\n";
            ++i;
        } else if (c == '\t') {
            out += "\\t";
            ++i;
        } else if (c == '\r') {
            out += "\\r";
            ++i;
        } else if (c < 0x80) {
            out += fmt::format("\\x{:02x}", c);
            ++i;
        } else {
            // A well-formed UTF-8 sequence that is not a C1 control (U+0080..U+009F) passes.
            std::size_t len = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
            bool ok = len > 0 && i + len <= n;
            for (std::size_t k = 1; ok && k < len; ++k)
                ok = (p[i + k] & 0xc0) == 0x80;
            if (ok && len == 3)  // no overlong forms, no surrogates
                ok = !(c == 0xe0 && p[i + 1] < 0xa0) && !(c == 0xed && p[i + 1] >= 0xa0);
            if (ok && len == 4)
                ok = !(c == 0xf0 && p[i + 1] < 0x90) && !(c == 0xf4 && p[i + 1] >= 0x90);
            if (ok && len == 2 && c == 0xc2 && p[i + 1] < 0xa0)
                ok = false;
            if (ok) {
                out.append(text.substr(i, len));
                i += len;
            } else {
                out += fmt::format("\\x{:02x}", c);
                ++i;
            }
        }
    }
    return out;
}

std::string render_text(const queue_listing& q)
{
    std::string out = fmt::format("{} ({}): {} node{}\n", escape(q.path), q.recipe, q.entries.size(),
                                  q.entries.size() == 1 ? "" : "s");
    for (std::size_t i = 0; i < q.entries.size(); ++i) {
        const auto& e = q.entries[i];
        std::string state;
        if (e.holding)
            state = *e.holding ? "holds" : "waits";
        std::string mode = e.mode.empty() ? state : (state.empty() ? e.mode : e.mode + ", " + state);
        // A node with ctime 0 (those ZooKeeper makes at start, e.g. /zookeeper) has no age to show.
        const std::string age = e.ctime_ms > 0 ? fmt::format("{:.1f}s", age_seconds(e.ctime_ms)) : std::string("-");
        out += fmt::format("{:3} {:<7} session {:<18} age {:>9}  data '{}'  {}\n", i + 1, mode,
                           session_hex(e.session), age, escape(e.data), escape(e.node));
    }
    for (const auto& n : q.notes)
        out += fmt::format("note: {}\n", n);
    return out;
}

std::string render_json(const queue_listing& q)
{
    nlohmann::ordered_json j;
    j["path"] = q.path;
    j["recipe"] = q.recipe;
    const bool mixed = contains(q.recipe, "+");
    j["participants"] = nlohmann::ordered_json::array();
    for (const auto& e : q.entries) {
        nlohmann::ordered_json p;
        p["node"] = e.node;
        p["session"] = session_hex(e.session);
        p["data"] = e.data;
        if (e.ctime_ms > 0)
            p["age_s"] = std::round(age_seconds(e.ctime_ms) * 1000.0) / 1000.0;
        else
            p["age_s"] = nullptr;  // no creation time (ctime 0: a node ZooKeeper made at start)
        if (!e.mode.empty())
            p["mode"] = e.mode;
        if (e.holding)
            p["holding"] = *e.holding;
        if (mixed)
            p["recipe"] = e.recipe;
        j["participants"].push_back(std::move(p));
    }
    j["notes"] = q.notes;
    // Data read from ZooKeeper need not be UTF-8: replace what is not, rather than throw.
    return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace zklock
