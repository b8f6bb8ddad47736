// The simulated Redis's read-write lock (redis_world.hpp): the four scripts of
// zkcoro::redis_shared_mutex (src/redis/shared_scripts.cpp: rw_read_script, rw_write_script,
// rw_release_script, rw_renew_script) as C++ models of what their Lua does, step by step.
//
// The Lua they model, in short. KEYS: K (the writer's key), P:fencing, P:readers, P:writers (the
// release: K, readers, writers; the renewal: K, readers). The read and write scripts begin with
// the fencing counter's check (ZKFENCING), then the types (K a string, both sets sorted sets, or
// absent: one WRONGTYPE text naming the three), then the purge (`now` = TIME in ms; readers and
// waiting writers with score <= now removed). Read: a reader is granted when K holds a value of
// our owner through our lock object (prefix ARGV[3], suffix ARGV[4]: a downgrade), or we are a
// reader already, or K is free and no writer waits; else {0, PTTL K, K, -1} when K is held, or
// {0, -1, '', the earliest writer's mark - now}. The grant: the token max(counter + 1, TIME in
// us) written to the counter, ZADD readers now + ttl, the readers' TTL 1 ms past the latest
// lease (PEXPIRE max(top - now, 0) + 1), {1, token}. Write: granted when K holds our value, or K
// is free and no reader holds: ZREM our mark, the token, SET K PX ttl, {1, token}; else ZADD our
// mark now + ARGV[3], the writers' TTL likewise, {0, PTTL K or -1, K or '', the earliest
// reader's lease end - now or -1}. Release (types, no purge): DEL K if ours, ZREM readers, ZREM
// writers; PUBLISH ARGV[2] 'released' when any was removed; 1 when a hold (K or a lease) ended.
// Renew: PEXPIRE K when ours (its reply); else, readers a sorted set holding us with a score
// above now: ZADD now + ttl, the readers' TTL, 1; a lease past its time is removed, 0.
//
// Each script's writes are one element of the write log (as the fair lock's: Redis replicates
// a script's effects together), so a failover keeps all of a script's writes or none.
#include "redis_world.hpp"

#include "redis/shared_scripts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>

namespace zksim {

namespace {

// Lua's string.sub(s, 1, n) and string.sub(s, -n) (n = 0: the whole string, as -0 is 0).
std::string lua_prefix(const std::string& s, std::size_t n) { return s.substr(0, std::min(n, s.size())); }
std::string lua_suffix(const std::string& s, std::size_t n)
{
    if (n == 0 || n >= s.size())
        return s;
    return s.substr(s.size() - n);
}

}  // namespace

std::optional<resp> redis_world::rw_script(const std::string& text, const std::vector<std::string>& keys,
                                           const std::vector<std::string>& argv)
{
    using namespace zkcoro::detail;
    const bool read = text == rw_read_script().text, writing = text == rw_write_script().text;
    const bool release = text == rw_release_script().text, renew = text == rw_renew_script().text;
    if (!read && !writing && !release && !renew)
        return std::nullopt;
    const std::size_t nkeys = read || writing ? 4 : release ? 3 : 2;
    const std::size_t nargs = read ? 4 : writing ? 3 : 2;
    if (keys.size() < nkeys || argv.size() < nargs)
        return resp::error(fmt::format("ERR the read-write script's model needs {} keys and {} arguments", nkeys, nargs));
    batch_.emplace();
    struct flush {
        redis_world& w;
        ~flush()
        {
            if (!w.batch_->empty())
                w.log_.push_back(std::move(*w.batch_));
            w.batch_.reset();
        }
    } flush_at_end{*this};
    const auto& value = argv[0];
    const auto& key = keys[0];
    if (renew)
        return rw_renew(key, keys[1], value, argv[1]);
    const auto& readers = release ? keys[1] : keys[2];
    const auto& writers = release ? keys[2] : keys[3];
    std::optional<std::string> f;
    if (read || writing) {
        // ZKCORO_FENCING_CHECK (a counter that is not a string: GET's WRONGTYPE).
        if (auto* fe = find(keys[1]); fe && fe->type != entry::kind::string)
            return resp::error("WRONGTYPE Operation against a key holding the wrong kind of value");
        f = get(keys[1]);
        if (f) {
            bool counter = !f->empty() && f->size() <= 16 &&
                           std::all_of(f->begin(), f->end(), [](unsigned char c) { return c >= '0' && c <= '9'; });
            if (counter && std::strtod(f->c_str(), nullptr) >= 9007199254740992.0)
                counter = false;
            if (!counter)
                return resp::error(fmt::format("ZKFENCING {} holds a value that is not a fencing counter (an integer "
                                               "below 2^53)",
                                               keys[1]));
        }
    }
    // ZKCORO_RW_TYPES
    {
        auto* ke = find(key);
        auto* re = find(readers);
        auto* we = find(writers);
        if ((ke && ke->type != entry::kind::string) || (re && re->type != entry::kind::zset) ||
            (we && we->type != entry::kind::zset))
            return resp::error(fmt::format("WRONGTYPE {} must be a string, {} and {} sorted sets: the read-write lock",
                                           key, readers, writers));
    }
    const auto held = get(key);
    if (release) {
        std::int64_t r = 0;
        if (held == value && !broken_rw_release) {
            del(key);
            r = 1;
        }
        if (zrem(readers, value))
            r = 1;
        const bool left = zrem(writers, value);
        if (r == 1 || left)
            publish(argv[1], "released");
        return resp::number(r);
    }
    // ZKCORO_RW_PURGE
    for (const auto* z : {&readers, &writers})
        if (auto* ze = find_zset(*z)) {
            entry c = *ze;
            std::erase_if(c.zset, [&](const auto& m) { return m.second <= now_ms(); });
            if (c.zset.size() != ze->zset.size())
                put(*z, c);
        }
    // ZKCORO_RW_FIRST: ms until the earliest member runs out, or -1.
    auto first = [&](const std::string& z) -> std::int64_t {
        auto* ze = find_zset(z);
        if (!ze)
            return -1;
        std::int64_t low = ze->zset.begin()->second;
        for (auto& [m, s] : ze->zset)
            low = std::min(low, s);
        return std::max<std::int64_t>(low - now_ms(), 0);
    };
    // ZKCORO_RW_KEEP: the set's TTL 1 ms past its highest score.
    auto keep = [&](const std::string& z) {
        if (auto* ze = find_zset(z)) {
            std::int64_t top = ze->zset.begin()->second;
            for (auto& [m, s] : ze->zset)
                top = std::max(top, s);
            entry c = *ze;
            c.expires_ms = now_ms() + std::max<std::int64_t>(top - now_ms(), 0) + 1;
            put(z, c);
        }
    };
    auto zadd = [&](const std::string& z, std::int64_t score) {
        entry c;
        if (auto* ze = find_zset(z))
            c = *ze;
        c.type = entry::kind::zset;
        c.zset[value] = score;
        put(z, c);
    };
    // ZKCORO_FENCED_TOKEN
    auto token = [&] {
        std::int64_t n = now_us_;
        if (f) {
            const auto counter = std::strtoll(f->c_str(), nullptr, 10);
            if (counter + 1 > n)
                n = counter + 1;
        }
        set(keys[1], std::to_string(n), -1);
        auto& last = last_grant_token[keys[1]];
        if (n <= last && token_drop.empty())
            token_drop = fmt::format("the {} grant of {} to {} got token {} after a grant with token {}",
                                     read ? "read" : "write", key, value, n, last);
        last = std::max(last, n);
        return n;
    };
    auto in = [&](const std::string& z) {
        auto* ze = find_zset(z);
        return ze && ze->zset.count(value) > 0;
    };
    const auto ttl = integer_of(argv[1]);
    if (!ttl)
        return resp::error("ERR the read-write script's model: the TTL is not an integer");
    if (read) {
        const bool mine = held && lua_prefix(*held, argv[2].size()) == argv[2] &&
                          lua_suffix(*held, argv[3].size()) == argv[3];
        if (!mine && !in(readers) && !broken_rw_read) {
            if (held)
                return resp::array({resp::number(0), resp::number(pttl(key)), resp::bulk(*held), resp::number(-1)});
            if (const auto left = first(writers); left >= 0)
                return resp::array({resp::number(0), resp::number(-1), resp::bulk(""), resp::number(left)});
        }
        const auto n = token();
        zadd(readers, now_ms() + *ttl);
        keep(readers);
        return resp::array({resp::number(1), resp::number(n)});
    }
    // write
    auto* re = find_zset(readers);
    if (held == value || (!held && (!re || re->zset.empty()))) {
        zrem(writers, value);
        const auto n = token();
        if (*ttl <= 0)
            return resp::error("ERR invalid expire time in 'set' command (the write script's model)");
        set(key, value, now_ms() + *ttl);
        return resp::array({resp::number(1), resp::number(n)});
    }
    const auto mark = integer_of(argv[2]);
    if (!mark)
        return resp::error("ERR the write script's model: the writer timeout is not an integer");
    zadd(writers, now_ms() + *mark);
    keep(writers);
    const auto left = first(readers);
    if (held)
        return resp::array({resp::number(0), resp::number(pttl(key)), resp::bulk(*held), resp::number(left)});
    return resp::array({resp::number(0), resp::number(-1), resp::bulk(""), resp::number(left)});
}

resp redis_world::rw_renew(const std::string& key, const std::string& readers, const std::string& value,
                           const std::string& ttl_text)
{
    auto* ke = find(key);
    if (ke && ke->type != entry::kind::string)
        return resp::error("WRONGTYPE Operation against a key holding the wrong kind of value");
    const auto ttl = integer_of(ttl_text);
    if (!ttl)
        return resp::error("ERR the renew script's model: the TTL is not an integer");
    if (get(key) == value) {
        if (*ttl <= 0) {
            del(key);
        } else {
            entry c = *find(key);
            c.expires_ms = now_ms() + *ttl;
            put(key, c);
        }
        return resp::number(1);
    }
    auto* re = find_zset(readers);
    if (!re || !re->zset.count(value))
        return resp::number(0);
    if (re->zset.at(value) <= now_ms()) {
        zrem(readers, value);
        return resp::number(0);
    }
    entry c = *re;
    c.zset[value] = now_ms() + *ttl;
    std::int64_t top = c.zset.begin()->second;
    for (auto& [m, s] : c.zset)
        top = std::max(top, s);
    c.expires_ms = now_ms() + std::max<std::int64_t>(top - now_ms(), 0) + 1;
    put(readers, c);
    return resp::number(1);
}

}  // namespace zksim
