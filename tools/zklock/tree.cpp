// `zklock status -r ROOT`: every lock under ROOT (zkcoro::async_scan), its holders and waiters
// with their ages and data; the wait-for graph between sessions and its cycles (--cycles,
// --dot); --older-than to keep only long holds and waits; --json.
#include "zklock.hpp"

#include <zkcoro/scan.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

namespace zklock {

std::optional<double> parse_duration(std::string_view text)
{
    double value = 0;
    const char* end = text.data() + text.size();
    auto [p, ec] = std::from_chars(text.data(), end, value);
    if (ec != std::errc{} || p == text.data() || !std::isfinite(value) || value < 0)
        return std::nullopt;
    const std::string_view unit(p, static_cast<std::size_t>(end - p));
    static const std::map<std::string_view, double> units{{"", 1}, {"ms", 0.001}, {"s", 1}, {"m", 60},
                                                          {"h", 3600}, {"d", 86400}};
    auto u = units.find(unit);
    if (u == units.end())
        return std::nullopt;
    return value * u->second;
}

namespace {

std::string mode_text(const zkcoro::participant& p, bool holds)
{
    std::string m;
    switch (p.mode) {
    case zkcoro::lock_mode::read: m = "read "; break;
    case zkcoro::lock_mode::write: m = "write "; break;
    case zkcoro::lock_mode::lease: m = "lease "; break;
    case zkcoro::lock_mode::foreign: return "foreign";
    case zkcoro::lock_mode::exclusive: break;
    }
    return m + (holds ? "holds" : "waits");
}

std::string age_text(std::int64_t ctime_ms)
{
    return ctime_ms > 0 ? fmt::format("{:.1f}s", age_seconds(ctime_ms)) : std::string("-");
}

// Keeps only participants at least `min_age_s` old (by their node's ctime); drops empty locks.
void keep_older(std::vector<zkcoro::lock_info>& locks, double min_age_s)
{
    auto old = [min_age_s](const zkcoro::participant& p) { return p.ctime > 0 && age_seconds(p.ctime) >= min_age_s; };
    std::vector<zkcoro::lock_info> out;
    for (auto& l : locks) {
        std::erase_if(l.holders, [&](const auto& p) { return !old(p); });
        std::erase_if(l.waiters, [&](const auto& p) { return !old(p); });
        if (!l.holders.empty() || !l.waiters.empty())
            out.push_back(std::move(l));
    }
    locks = std::move(out);
}

// The data of each session, from any of its nodes (the first non-empty one).
std::map<std::int64_t, std::string> session_data(const std::vector<zkcoro::lock_info>& locks)
{
    std::map<std::int64_t, std::string> out;
    for (const auto& l : locks)
        for (const auto* list : {&l.holders, &l.waiters})
            for (const auto& p : *list)
                if (p.session_id != 0 && out[p.session_id].empty())
                    out[p.session_id] = p.data;
    return out;
}

std::string render_tree_text(const zkcoro::scan_result& r, const std::vector<zkcoro::wait_cycle>& cycles,
                             bool cycles_only)
{
    std::string out;
    if (!cycles_only) {
        for (const auto& l : r.locks) {
            out += fmt::format("{} ({}): {} holder{}, {} waiter{}\n", escape(l.path), zkcoro::to_string(l.kind),
                               l.holders.size(), l.holders.size() == 1 ? "" : "s", l.waiters.size(),
                               l.waiters.size() == 1 ? "" : "s");
            for (const auto* list : {&l.holders, &l.waiters})
                for (const auto& p : *list)
                    out += fmt::format("  {:<11} session {:<18} age {:>9}  {}  {}\n",
                                       mode_text(p, list == &l.holders), session_hex(p.session_id), age_text(p.ctime),
                                       p.data_unreadable ? std::string("data unreadable (no READ permission)")
                                                         : fmt::format("data '{}'", escape(p.data)),
                                       escape(p.name));
        }
        if (r.locks.empty())
            out += "no lock nodes\n";
    }
    const auto data = session_data(r.locks);
    for (const auto& c : cycles) {
        std::vector<std::string> who;
        for (auto s : c.sessions)
            who.push_back(fmt::format("{} '{}'", session_hex(s), escape(data.count(s) ? data.at(s) : "")));
        out += fmt::format("deadlock candidate: sessions {} wait for each other\n", fmt::join(who, ", "));
        for (const auto& e : c.edges)
            out += fmt::format("  {} waits for {} on {}\n", session_hex(e.waiter_session), session_hex(e.holder_session),
                               escape(e.lock));
    }
    if (cycles_only && cycles.empty())
        out += fmt::format("no wait-for cycle among the {} lock{} under the root\n", r.locks.size(),
                           r.locks.size() == 1 ? "" : "s");
    for (const auto& p : r.problems)
        out += fmt::format("note: {} not read: {}\n", escape(p.path), escape(p.ec.message()));
    return out;
}

nlohmann::ordered_json participant_json(const zkcoro::participant& p)
{
    nlohmann::ordered_json j;
    j["node"] = p.name;
    j["session"] = session_hex(p.session_id);
    if (p.data_unreadable) {
        j["data"] = nullptr;
        j["data_unreadable"] = true;
    } else {
        j["data"] = p.data;
    }
    if (p.ctime > 0)
        j["age_s"] = std::round(age_seconds(p.ctime) * 1000.0) / 1000.0;
    else
        j["age_s"] = nullptr;
    if (p.mode == zkcoro::lock_mode::read)
        j["mode"] = "read";
    else if (p.mode == zkcoro::lock_mode::write)
        j["mode"] = "write";
    else if (p.mode == zkcoro::lock_mode::lease)
        j["mode"] = "lease";
    else if (p.mode == zkcoro::lock_mode::foreign)
        j["mode"] = "foreign";
    return j;
}

std::string render_tree_json(const std::string& root, const zkcoro::scan_result& r,
                             const std::vector<zkcoro::wait_cycle>& cycles)
{
    nlohmann::ordered_json j;
    j["root"] = root;
    j["locks"] = nlohmann::ordered_json::array();
    for (const auto& l : r.locks) {
        nlohmann::ordered_json lj;
        lj["path"] = l.path;
        lj["recipe"] = std::string(zkcoro::to_string(l.kind));
        lj["holders"] = nlohmann::ordered_json::array();
        lj["waiters"] = nlohmann::ordered_json::array();
        for (const auto& p : l.holders)
            lj["holders"].push_back(participant_json(p));
        for (const auto& p : l.waiters)
            lj["waiters"].push_back(participant_json(p));
        j["locks"].push_back(std::move(lj));
    }
    const auto data = session_data(r.locks);
    j["cycles"] = nlohmann::ordered_json::array();
    for (const auto& c : cycles) {
        nlohmann::ordered_json cj;
        cj["sessions"] = nlohmann::ordered_json::array();
        for (auto s : c.sessions)
            cj["sessions"].push_back({{"session", session_hex(s)}, {"data", data.count(s) ? data.at(s) : ""}});
        cj["edges"] = nlohmann::ordered_json::array();
        for (const auto& e : c.edges)
            cj["edges"].push_back({{"lock", e.lock},
                                   {"waiter", session_hex(e.waiter_session)},
                                   {"holder", session_hex(e.holder_session)},
                                   {"waiter_node", e.waiter_node},
                                   {"holder_node", e.holder_node}});
        j["cycles"].push_back(std::move(cj));
    }
    j["problems"] = nlohmann::ordered_json::array();
    for (const auto& p : r.problems)
        j["problems"].push_back({{"path", p.path}, {"error", p.ec.message()}});
    j["requests"] = r.requests;
    return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

// Graphviz: one node per session (labelled with its data), one edge per waiter -> holder and
// lock; the edges of cycles in red.
std::string render_dot(const zkcoro::scan_result& r, const std::vector<zkcoro::wait_edge>& edges,
                       const std::vector<zkcoro::wait_cycle>& cycles)
{
    // Inside a DOT string: our escapes' backslashes and quotes escaped again.
    auto inner = [](std::string_view s) {
        std::string q;
        for (char c : escape(s)) {
            if (c == '"' || c == '\\')
                q += '\\';
            q += c;
        }
        return q;
    };
    auto quote = [&inner](std::string_view s) { return "\"" + inner(s) + "\""; };
    std::set<std::pair<std::int64_t, std::int64_t>> red;
    for (const auto& c : cycles)
        for (const auto& e : c.edges)
            red.emplace(e.waiter_session, e.holder_session);
    const auto data = session_data(r.locks);
    std::string out = "digraph waits_for {\n  rankdir=LR;\n  node [shape=box];\n";
    for (const auto& [s, d] : data)
        out += fmt::format("  {} [label=\"{}\\n{}\"];\n", quote(session_hex(s)), inner(session_hex(s)), inner(d));
    for (const auto& e : edges)
        out += fmt::format("  {} -> {} [label={}{}];\n", quote(session_hex(e.waiter_session)),
                           quote(session_hex(e.holder_session)), quote(e.lock),
                           red.count({e.waiter_session, e.holder_session}) ? ", color=red" : "");
    out += "}\n";
    return out;
}

}  // namespace

asio::awaitable<int> tree_status(zkcoro::client& zk, const options& o)
{
    auto [ec, r] = co_await zkcoro::async_scan(zk, o.lock_path, asio::as_tuple(asio::use_awaitable));
    if (ec) {
        std::string msg = fmt::format("zklock: status -r {}: {}", escape(o.lock_path), escape(ec.message()));
        if (is_noauth(ec))
            msg += "; " + noauth_hint(o);
        tell("{}\n", msg);
        co_return exit_for_error(ec);
    }
    if (o.older_than_s)
        keep_older(r.locks, *o.older_than_s);
    const auto edges = zkcoro::wait_for_graph(r.locks);
    const auto cycles = zkcoro::find_cycles(edges);
    std::string out = o.dot    ? render_dot(r, edges, cycles)
                      : o.json ? render_tree_json(o.lock_path, r, cycles)
                               : render_tree_text(r, cycles, o.cycles);
    std::fwrite(out.data(), 1, out.size(), stdout);
    if (o.verbose)
        tell("zklock: scanned {}: {} locks, {} nodes listed, {} requests\n", escape(o.lock_path),
                   r.locks.size(), r.nodes_listed, r.requests);
    co_return o.cycles && !cycles.empty() ? 1 : 0;
}

}  // namespace zklock
