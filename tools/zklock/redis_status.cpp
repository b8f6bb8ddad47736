// `zklock -c redis://... status KEY` (and redis+sentinel://, redis+cluster://): what the keys of
// the Redis recipes named KEY hold, read with plain commands (TIME, TYPE, GET, PTTL, LRANGE,
// ZRANGE WITHSCORES; nothing is written), shown as the ZooKeeper status shows a queue.
// The key layout (docs/redis.md; src/redis/lock_scripts.cpp, shared_scripts.cpp,
// semaphore_scripts.cpp): K is the holder's key, KEY itself (on a cluster: {KEY} when KEY has no
// hash tag, for every recipe: recipe_key in src/redis/slot.cpp); P is KEY when it has a hash tag,
// else {KEY}.
//   mutex       K (the holder's value, with a TTL), K:fencing
//   fair        K, P:fencing, P:queue (the waiters in order), P:timeouts (each waiter's timeout)
//   read-write  KEY (the writer's value), P:fencing, P:readers (each reader's lease end),
//               P:writers (each waiting writer's mark, until when)
//   semaphore   P:leases (each holder's value ending in :s<count>, its leases' end), P:queue,
//               P:timeouts, P:max, P:fencing
#ifdef ZKLOCK_REDIS
#include "exit_codes.hpp"
#include "zklock.hpp"

#include <zkcoro/redis.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zklock {

namespace {

// P: the key itself when it has a hash tag (a non-empty {...}), else {key}.
bool has_hash_tag(std::string_view key)
{
    const auto open = key.find('{');
    if (open == std::string_view::npos)
        return false;
    const auto close = key.find('}', open + 1);
    return close != std::string_view::npos && close > open + 1;
}

std::string tagged(const std::string& key) { return has_hash_tag(key) ? key : "{" + key + "}"; }

// One holder, reader, lease or waiter.
struct redis_entry {
    std::string value;  // its member or the key's value (the holder's random token)
    std::string key;    // where it is: K, P:readers, P:writers, P:leases, P:queue
    std::string mode;   // "" (mutex holder), "read", "write", "lease", "queued"
    bool holding = false;
    std::optional<double> left_s;  // the TTL, the lease's or the mark's end, the waiter's timeout
    int leases = 0;                // a semaphore's: the count in the value
};

struct redis_listing {
    std::string key;
    std::vector<std::string> recipes;
    std::vector<redis_entry> entries;
    std::map<std::string, std::string> fencing;  // counter key -> value
    std::optional<std::string> max;              // the semaphore's P:max
    std::string max_key;
    std::vector<std::string> notes;
};

// The leases a semaphore value names (":s<n>" at its end); 0 if it does not.
int value_leases(std::string_view v)
{
    const auto at = v.rfind(":s");
    if (at == std::string_view::npos || at + 2 >= v.size())
        return 0;
    int n = 0;
    for (char c : v.substr(at + 2)) {
        if (c < '0' || c > '9' || n > 100000000)
            return 0;
        n = n * 10 + (c - '0');
    }
    return n;
}

// A read-write lock's writer value: "...:<object n>w".
bool rw_writer_value(std::string_view v)
{
    if (v.size() < 3 || v.back() != 'w')
        return false;
    std::size_t i = v.size() - 1;
    while (i > 0 && v[i - 1] >= '0' && v[i - 1] <= '9')
        --i;
    return i < v.size() - 1 && i > 0 && v[i - 1] == ':';
}

void add_recipe(redis_listing& l, const std::string& r)
{
    if (std::find(l.recipes.begin(), l.recipes.end(), r) == l.recipes.end())
        l.recipes.push_back(r);
}

// A command's words (a braced list inside co_await trips g++ 12).
template <class... A>
std::vector<std::string> words(const A&... a)
{
    return {std::string(a)...};
}

class key_reader {
public:
    explicit key_reader(zkcoro::redis_client& rc) : rc_(rc) {}

    asio::awaitable<zkcoro::redis_reply> run(std::vector<std::string> args)
    {
        const std::string what = args[0] + (args.size() > 1 ? " " + args[1] : std::string());
        auto [ec, reply] = co_await rc_.async_exec(std::move(args), asio::as_tuple(asio::use_awaitable));
        if (ec)
            throw boost::system::system_error(ec, what + (reply.str.empty() ? "" : ": the server said: " + reply.str));
        co_return reply;
    }

    // The type of each key ("none" when absent), read first: the listing then tests them.
    asio::awaitable<void> read_types(const std::vector<std::string>& keys)
    {
        for (const auto& k : keys) {
            auto r = co_await run(words("TYPE", k));
            types_[k] = r.str;
        }
    }

    // Whether the key is of type `want`; a key of another type is noted (and not read).
    bool is(redis_listing& l, const std::string& key, std::string_view want) const
    {
        const auto it = types_.find(key);
        const std::string t = it == types_.end() ? "none" : it->second;
        if (t == want)
            return true;
        if (t != "none")
            l.notes.push_back(fmt::format("{} is a {}, not the {} a zkcoro lock keeps there: not read", escape(key),
                                          t, want));
        return false;
    }

    // A sorted set's members with their scores.
    asio::awaitable<std::vector<std::pair<std::string, double>>> zset(const std::string& key)
    {
        auto r = co_await run(words("ZRANGE", key, "0", "-1", "WITHSCORES"));
        std::vector<std::pair<std::string, double>> out;
        for (std::size_t i = 0; i + 1 < r.elements.size(); i += 2)
            out.emplace_back(r.elements[i].str, std::strtod(r.elements[i + 1].str.c_str(), nullptr));
        co_return out;
    }

private:
    zkcoro::redis_client& rc_;
    std::map<std::string, std::string> types_;
};

// What the keys of KEY hold, by recipe.
asio::awaitable<redis_listing> read_listing(zkcoro::redis_client& rc, const std::string& name)
{
    key_reader rd(rc);
    redis_listing l;
    l.key = name;
    const bool cluster = !rc.url().cluster_nodes.empty();
    const std::string p = tagged(name);
    // The holder's key (on a cluster: KEY's tag), and on a cluster KEY itself too (the read-write
    // lock's writer key there until every recipe took the tag rule; same slot).
    const std::string k = cluster ? tagged(name) : name;
    std::vector<std::string> holder_keys{k};
    if (k != name)
        holder_keys.push_back(name);
    // Scores are the server's clock (ms): TIME (on a cluster, any master's; a cluster shares a clock
    // only as far as its hosts do).
    const auto t = co_await rd.run(words("TIME"));
    const double now_ms = t.elements.size() == 2
                              ? std::strtod(t.elements[0].str.c_str(), nullptr) * 1000.0 +
                                    std::strtod(t.elements[1].str.c_str(), nullptr) / 1000.0
                              : 0.0;
    auto left = [now_ms](double score_ms) { return (score_ms - now_ms) / 1000.0; };
    std::vector<std::string> all_keys = holder_keys;
    for (const char* suffix : {":queue", ":timeouts", ":readers", ":writers", ":leases", ":max", ":fencing"})
        all_keys.push_back(p + suffix);
    if (k + ":fencing" != p + ":fencing")
        all_keys.push_back(k + ":fencing");
    co_await rd.read_types(all_keys);

    // Who waits, and as what: the fair lock's or the semaphore's queue (their values tell which).
    std::vector<std::string> queue;
    std::map<std::string, double> timeouts;
    if (rd.is(l, p + ":queue", "list")) {
        auto r = co_await rd.run(words("LRANGE", p + ":queue", "0", "-1"));
        for (auto& e : r.elements)
            queue.push_back(std::move(e.str));
    }
    if (rd.is(l, p + ":timeouts", "zset")) {
        const auto members = co_await rd.zset(p + ":timeouts");
        for (const auto& [v, s] : members)
            timeouts[v] = s;
    }
    bool sem_queue = false, fair_queue = false;
    for (const auto& v : queue)
        (value_leases(v) > 0 ? sem_queue : fair_queue) = true;

    // The holder's key: a mutex's, a fair lock's or a read-write lock's writer.
    for (const auto& hk : holder_keys) {
        if (!rd.is(l, hk, "string"))
            continue;
        auto v = co_await rd.run(words("GET", hk));
        auto ttl = co_await rd.run(words("PTTL", hk));
        if (v.type != zkcoro::redis_reply::kind::string || ttl.integer == -2)
            continue;  // gone since its TYPE was read (released, expired)
        redis_entry e;
        e.value = v.str;
        e.key = hk;
        e.holding = true;
        if (ttl.integer >= 0)  // -1: none
            e.left_s = static_cast<double>(ttl.integer) / 1000.0;
        else
            l.notes.push_back(fmt::format("{} has no TTL: it is no zkcoro lock's (each sets one), and stays until "
                                          "deleted",
                                          escape(hk)));
        if (v.str.ends_with(":q") || fair_queue)
            add_recipe(l, "fair");
        else if (rw_writer_value(v.str)) {
            add_recipe(l, "read-write");
            e.mode = "write";
        } else
            add_recipe(l, "mutex");
        l.entries.push_back(std::move(e));
    }

    // The read-write lock's readers and waiting writers.
    if (rd.is(l, p + ":readers", "zset")) {
        add_recipe(l, "read-write");
        const auto members = co_await rd.zset(p + ":readers");
        for (const auto& [v, s] : members)
            l.entries.push_back({v, p + ":readers", "read", true, left(s), 0});
    }
    if (rd.is(l, p + ":writers", "zset")) {
        add_recipe(l, "read-write");
        const auto members = co_await rd.zset(p + ":writers");
        for (const auto& [v, s] : members)
            l.entries.push_back({v, p + ":writers", "write", false, left(s), 0});
    }

    // The semaphore's holders and max.
    bool sem = sem_queue;
    if (rd.is(l, p + ":leases", "zset")) {
        sem = true;
        const auto members = co_await rd.zset(p + ":leases");
        for (const auto& [v, s] : members)
            l.entries.push_back({v, p + ":leases", "lease", true, left(s), value_leases(v)});
    }
    l.max_key = p + ":max";
    if (rd.is(l, l.max_key, "string")) {
        sem = true;
        l.max = (co_await rd.run(words("GET", l.max_key))).str;
    }
    if (sem)
        add_recipe(l, "semaphore");
    if (fair_queue)
        add_recipe(l, "fair");

    // The waiters, in queue order, each with its timeout.
    for (const auto& v : queue) {
        redis_entry e{v, p + ":queue", value_leases(v) > 0 ? "queued" : "", false, std::nullopt, value_leases(v)};
        if (auto it = timeouts.find(v); it != timeouts.end())
            e.left_s = left(it->second);
        l.entries.push_back(std::move(e));
    }

    // The fencing counters: the mutex's K:fencing, the other recipes' P:fencing (one key when K has
    // a tag).
    const std::vector<std::string> fencing_keys{k + ":fencing", p + ":fencing"};
    for (const auto& fk : fencing_keys)
        if (!l.fencing.contains(fk) && rd.is(l, fk, "string"))
            l.fencing[fk] = (co_await rd.run(words("GET", fk))).str;

    if (l.recipes.size() > 1)
        l.notes.push_back("keys of several recipes under one name: they do not exclude each other (a mutex "
                          "excludes a read-write lock's writer only)");
    const bool held = std::any_of(l.entries.begin(), l.entries.end(), [](const redis_entry& e) { return e.holding; });
    if (!held)
        l.notes.push_back(l.fencing.empty() ? "free: no key of a zkcoro lock at this name"
                                            : "free: nobody holds it (the fencing counter stays after the last "
                                              "release)");
    for (const auto& e : l.entries)
        if (e.left_s && *e.left_s < 0)
            l.notes.push_back(fmt::format("'{}' in {} is past its time: the next script drops it",
                                          escape(e.value), escape(e.key)));
    co_return l;
}

std::string recipe_of(const redis_listing& l)
{
    std::string r;
    for (const auto& x : l.recipes)
        r += (r.empty() ? "" : "+") + x;
    return r.empty() ? "none" : r;
}

std::string render_redis_text(const redis_listing& l)
{
    std::string out = fmt::format("{} ({}): {} entr{}\n", escape(l.key), recipe_of(l), l.entries.size(),
                                  l.entries.size() == 1 ? "y" : "ies");
    for (std::size_t i = 0; i < l.entries.size(); ++i) {
        const auto& e = l.entries[i];
        const std::string state = e.holding ? "holds" : "waits";
        std::string mode = e.mode.empty() ? state : e.mode + ", " + state;
        if (e.leases > 0)
            mode += fmt::format(" x{}", e.leases);
        // A holder's TTL or lease end; a waiter's timeout (a waiting writer: its mark's end).
        const std::string when = e.left_s ? fmt::format("{:.1f}s", *e.left_s) : std::string("-");
        out += fmt::format("{:3} {:<16} {} {:>7}  value '{}'  {}\n", i + 1, mode, e.holding ? "expires in" : "timeout in",
                           when, escape(e.value), escape(e.key));
    }
    if (l.max)
        out += fmt::format("max: {} leases ({})\n", escape(*l.max), escape(l.max_key));
    for (const auto& [k, v] : l.fencing)
        out += fmt::format("fencing counter: {} ({})\n", escape(v), escape(k));
    for (const auto& n : l.notes)
        out += fmt::format("note: {}\n", n);
    return out;
}

// The ZooKeeper status's JSON shape ({path, recipe, participants: [{node, session, data, age_s,
// mode?, holding?, recipe?}], notes}), with what Redis adds: each participant's key, expires_in_s
// (a holder's TTL or lease end, a waiter's timeout) and leases; fencing and max. Redis keeps no
// session nor creation time (null) and no holder data ("").
std::string render_redis_json(const redis_listing& l)
{
    nlohmann::ordered_json j;
    j["path"] = l.key;
    j["recipe"] = recipe_of(l);
    j["participants"] = nlohmann::ordered_json::array();
    for (const auto& e : l.entries) {
        nlohmann::ordered_json p;
        p["node"] = e.value;
        p["session"] = nullptr;
        p["data"] = "";
        p["age_s"] = nullptr;
        if (!e.mode.empty())
            p["mode"] = e.mode;
        p["holding"] = e.holding;
        p["key"] = e.key;
        if (e.left_s)
            p["expires_in_s"] = std::round(*e.left_s * 1000.0) / 1000.0;
        else
            p["expires_in_s"] = nullptr;
        if (e.leases > 0)
            p["leases"] = e.leases;
        j["participants"].push_back(std::move(p));
    }
    j["fencing"] = nlohmann::ordered_json::object();
    for (const auto& [k, v] : l.fencing)
        j["fencing"][k] = v;
    if (l.max)
        j["max"] = *l.max;
    j["notes"] = l.notes;
    return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

asio::awaitable<int> redis_status_main(zkcoro::redis_client& rc, const options& o)
{
    auto [ec] = co_await rc.async_connect(asio::as_tuple(asio::use_awaitable));
    if (ec) {
        tell("zklock: cannot connect to Redis ({}): {}\n", o.connect_origin,
                   escape(rc.last_error().empty() ? ec.message() : rc.last_error()));
        co_return exit_for_connect(ec);
    }
    say(o, fmt::format("connected to Redis at {}", escape(rc.server())));
    const auto l = co_await read_listing(rc, o.lock_path);
    const std::string out = o.json ? render_redis_json(l) : render_redis_text(l);
    std::fwrite(out.data(), 1, out.size(), stdout);
    co_return 0;
}

}  // namespace

int run_redis_status(const options& o)
{
    asio::io_context ioc;
    zkcoro::redis_options ropts;
    ropts.connect_timeout = redis_connect_timeout(o);
    zkcoro::redis_client rc(ioc.get_executor(), o.connect, ropts);
    int rc_exit = exit_code::refused;
    bool done = false;
    asio::co_spawn(ioc, redis_status_main(rc, o), [&](std::exception_ptr e, int r) {
        done = true;
        rc_exit = r;
        if (e) {
            std::string text;
            rc_exit = exit_for_exception(e, text);
            tell("zklock: status of {}: {}\n", escape(o.lock_path), escape(text));
        }
    });
    while (!done && ioc.run_one() > 0) {
    }
    rc.close();
    ioc.restart();
    ioc.run_for(std::chrono::milliseconds(1000));
    std::fflush(stdout);
    return rc_exit;
}

}  // namespace zklock
#endif
