// The simulated Redis's counting semaphore (redis_world.hpp): the three scripts of
// zkcoro::redis_semaphore (src/redis/semaphore_scripts.cpp) as C++ models of what their Lua does,
// step by step. KEYS: P:leases (zset: holder -> expiry in ms), P:fencing, P:queue (list), P:timeouts
// (zset: waiter -> timeout in ms), P:max. ARGV: value ("...:s<n>"), TTL ms, waiter timeout ms, the
// wake channels' prefix, max_leases, n.
//
// The Lua they model, in short. The acquire first checks the fencing counter (GET P:fencing), then
// every script checks the four keys' types (a WRONGTYPE error naming them), takes `now` (TIME in
// ms); the acquire checks P:max against ARGV[5] (ZKMAXLEASES). Purge (acquire, release): the
// holders whose expiry <= now go (ZREMRANGEBYSCORE), at most 100 waiters whose timeout <= now leave
// the list (LREM 0) and the set, at most 100 queue heads without a timeout are popped; `changed`
// says whether any of that happened; `free` = ARGV[5] less the leases of every holder. The
// acquire grants when the value holds already, or when its n plus the leases of the queue entries
// before it (the first ARGV[5] + 1 entries walked; all of them when it is not queued) fit in
// `free`: ZREM its timeout (and LREM 1 its entry), the token max(counter + 1, TIME in us) written,
// ZADD its expiry now + TTL, SET P:max, and when `changed` tells the head waiters that fit in
// what is left; else it queues (RPUSH once, ZADD its timeout now + waiter timeout, SET P:max, tell
// when `changed`) and answers {0, LPOS, first holder's expiry - now or -1, head's timeout - now or
// -1}. `tell(room)`: LRANGE 0 room-1, adding each one's n until the sum passes `room`, PUBLISH
// its value on prefix .. its process (up to its first ':') but not to ourselves. The release
// ZREMs its leases (1 if it held), its timeout (and LREM 0 its entry), purges, tells `free`. The
// renewal ZADDs now + TTL while its expiry is still ahead (1), else 0. Each ends with `tidy`:
// P:leases expires 1 s after the latest expiry, P:timeouts and P:queue 1 s after the latest
// timeout (P:queue deleted when there is none), P:max 1 s after the later of the two (deleted when
// neither). PEXPIREAT at a time not ahead deletes the key. A script's writes are one entry of the
// write log (a failover keeps all of them or none).
#include "redis_world.hpp"

#include "redis/semaphore_scripts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <numeric>

namespace zksim {

namespace {

// leases(v): math.max(1, tonumber(string.match(v, ':s(%d+)$') or '1')).
std::int64_t leases_of(const std::string& v)
{
    const auto at = v.rfind(":s");
    if (at == std::string::npos || at + 2 == v.size())
        return 1;
    const auto digits = v.substr(at + 2);
    if (!std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return c >= '0' && c <= '9'; }))
        return 1;
    return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::strtod(digits.c_str(), nullptr)));
}

}  // namespace

std::optional<resp> redis_world::sem_script(const std::string& text, const std::vector<std::string>& keys,
                                            const std::vector<std::string>& argv)
{
    using namespace zkcoro::detail;
    const bool acquire = text == semaphore_acquire_script().text;
    const bool release = text == semaphore_release_script().text;
    const bool renew = text == semaphore_renew_script().text;
    if (!acquire && !release && !renew)
        return std::nullopt;
    if (keys.size() < 5 || argv.size() < 6)
        return resp::error("ERR the semaphore scripts' model needs 5 keys and 6 arguments");
    const auto &lk = keys[0], &fence = keys[1], &q = keys[2], &z = keys[3], &mk = keys[4];
    const auto& value = argv[0];
    // ZKCORO_FENCING_CHECK (the acquire only).
    std::optional<std::string> f;
    if (acquire) {
        if (auto* fe = find(fence); fe && fe->type != entry::kind::string)
            return resp::error("WRONGTYPE Operation against a key holding the wrong kind of value");
        f = get(fence);
        if (f) {
            bool counter = !f->empty() && f->size() <= 16 &&
                           std::all_of(f->begin(), f->end(), [](unsigned char c) { return c >= '0' && c <= '9'; });
            if (counter && std::strtod(f->c_str(), nullptr) >= 9007199254740992.0)
                counter = false;
            if (!counter)
                return resp::error(fmt::format("ZKFENCING {} holds a value that is not a fencing counter (an integer "
                                               "below 2^53)",
                                               fence));
        }
    }
    // ZKCORO_SEM_BEGIN: the types.
    {
        auto* le = find(lk);
        auto* qe = find(q);
        auto* ze = find(z);
        auto* me = find(mk);
        if ((le && le->type != entry::kind::zset) || (qe && qe->type != entry::kind::list) ||
            (ze && ze->type != entry::kind::zset) || (me && me->type != entry::kind::string))
            return resp::error(fmt::format("WRONGTYPE the semaphore needs a sorted set at {}, a list at {}, a sorted "
                                           "set at {} and a string at {}",
                                           lk, q, z, mk));
    }
    const std::int64_t now = now_ms();
    if (acquire) {
        if (auto mx = get(mk); mx && *mx != argv[4])
            return resp::error(fmt::format("ZKMAXLEASES {} says the semaphore has {} leases; this participant was made "
                                           "with {}",
                                           mk, *mx, argv[4]));
    }
    const auto max_leases = integer_of(argv[4]);
    const auto ttl = integer_of(argv[1]);
    const auto wait = integer_of(argv[2]);
    if (!max_leases || !ttl || !wait)
        return resp::error("ERR the semaphore scripts' model: ARGV[2], ARGV[3] and ARGV[5] must be integers");
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
    auto& order = sem_orders[q];
    auto zscore = [&](const std::string& key, const std::string& m) -> std::optional<std::int64_t> {
        auto* e = find_zset(key);
        if (!e)
            return std::nullopt;
        auto it = e->zset.find(m);
        if (it == e->zset.end())
            return std::nullopt;
        return it->second;
    };
    auto zadd = [&](const std::string& key, std::int64_t score, const std::string& m) {
        entry c;
        if (auto* e = find_zset(key))
            c = *e;
        c.type = entry::kind::zset;
        c.zset[m] = score;
        put(key, c);
    };
    // ZRANGE key -1 -1 WITHSCORES / 0 0 WITHSCORES: the highest / lowest score (by score, then member).
    auto extreme = [&](const std::string& key, bool last) -> std::optional<std::int64_t> {
        auto* e = find_zset(key);
        if (!e || e->zset.empty())
            return std::nullopt;
        std::int64_t best = e->zset.begin()->second;
        for (auto& [m, s] : e->zset)
            best = last ? std::max(best, s) : std::min(best, s);
        return best;
    };
    auto queue = [&]() -> std::vector<std::string> {
        auto* e = find_list(q);
        return e ? e->list : std::vector<std::string>{};
    };
    auto held_leases = [&] {
        std::int64_t sum = 0;
        if (auto* e = find_zset(lk))
            for (auto& [h, s] : e->zset)
                sum += leases_of(h);
        return sum;
    };
    auto pexpireat = [&](const std::string& key, std::int64_t at) {
        auto* e = find(key);
        if (!e)
            return;
        if (at <= now) {
            del(key);
            return;
        }
        entry c = *e;
        c.expires_ms = at;
        put(key, c);
    };
    auto tidy = [&] {
        const auto hl = extreme(lk, true);
        const auto wl = extreme(z, true);
        if (hl)
            pexpireat(lk, *hl + 1000);
        if (wl) {
            pexpireat(z, *wl + 1000);
            pexpireat(q, *wl + 1000);
        } else if (find(q)) {
            del(q);
        }
        if (hl || wl)
            pexpireat(mk, std::max(hl.value_or(0), wl.value_or(0)) + 1000);
        else if (find(mk))
            del(mk);
    };
    auto tell = [&](std::int64_t room) {
        if (room < 1)
            return;
        std::int64_t sum = 0;
        auto l = queue();
        for (std::size_t i = 0; i < l.size() && static_cast<std::int64_t>(i) < room; ++i) {
            sum += leases_of(l[i]);
            if (sum > room)
                break;
            if (l[i] != value)
                publish(argv[3] + process_of(l[i]), l[i]);
        }
    };
    // The order's bookkeeping after a purge or a leave: a waiter without a timeout has departed.
    auto departures = [&] {
        for (auto it = order.waiting.begin(); it != order.waiting.end();)
            if (!zscore(z, it->first)) {
                it = order.waiting.erase(it);
                ++order.departed;
            } else {
                ++it;
            }
    };
    // ZKCORO_SEM_PURGE: `changed`, and `free`.
    auto purge = [&](bool& changed) {
        changed = false;
        if (auto* e = find_zset(lk)) {
            entry c = *e;
            for (auto it = c.zset.begin(); it != c.zset.end();)
                if (it->second <= now) {
                    it = c.zset.erase(it);
                    changed = true;
                } else {
                    ++it;
                }
            if (changed)
                put(lk, c);
        }
        std::vector<std::pair<std::int64_t, std::string>> due;
        if (auto* e = find_zset(z))
            for (auto& [m, s] : e->zset)
                if (s <= now)
                    due.emplace_back(s, m);
        std::sort(due.begin(), due.end());
        if (due.size() > 100)
            due.resize(100);
        for (auto& [s, w] : due) {
            lrem(q, 0, w);
            zrem(z, w);
            changed = true;
        }
        for (int i = 0; i < 100; ++i) {
            auto* l = find_list(q);
            if (!l || zscore(z, l->list.front()))
                break;
            entry c = *l;
            c.list.erase(c.list.begin());
            put(q, c);
            changed = true;
        }
        departures();
        return *max_leases - (broken_sem_leases ? 0 : held_leases());
    };

    if (renew) {
        const auto s = zscore(lk, value);
        if (!s || *s <= now) {
            tidy();
            return resp::number(0);
        }
        zadd(lk, now + *ttl, value);
        tidy();
        return resp::number(1);
    }
    if (release) {
        std::int64_t r = 0;
        if (broken_sem_release)
            return resp::number(1);  // the control: nothing freed, nobody told
        if (zrem(lk, value))
            r = 1;
        if (zrem(z, value)) {
            lrem(q, 0, value);
            if (order.waiting.erase(value))
                ++order.left;
        }
        bool changed = false;
        const auto free = purge(changed);
        tell(free);
        tidy();
        return resp::number(r);
    }
    // The acquire.
    bool changed = false;
    const auto free = purge(changed);
    const auto want = integer_of(argv[5]).value_or(0);
    const bool held = zscore(lk, value).has_value();
    bool fits = true;
    if (!held) {
        std::int64_t ahead = 0;
        auto l = queue();
        for (std::size_t i = 0; i < l.size() && static_cast<std::int64_t>(i) <= *max_leases; ++i) {
            if (l[i] == value)
                break;
            if (!broken_sem_order)
                ahead += leases_of(l[i]);
            if (ahead + want > free)
                break;
        }
        fits = ahead + want <= free;
    }
    if (fits) {
        if (zrem(z, value))
            lrem(q, 1, value);
        std::int64_t n = now_us_;
        if (f) {
            const auto counter = std::strtoll(f->c_str(), nullptr, 10);
            if (counter + 1 > n)
                n = counter + 1;
        }
        set(fence, std::to_string(n), -1);
        zadd(lk, now + *ttl, value);
        set(mk, argv[4], -1);
        if (changed)
            tell(held ? free : free - want);
        tidy();
        auto& last = last_grant_token[fence];
        if (n <= last && token_drop.empty())
            token_drop = fmt::format("the grant of {} to {} got token {} after a grant with token {}", lk, value, n,
                                     last);
        last = std::max(last, n);
        if (!held) {
            // The order: the leases held now, and those wanted by every earlier arrival still
            // waiting, within the count.
            ++order.granted;
            auto it = order.waiting.find(value);
            const auto mine = it == order.waiting.end() ? order.next++ : it->second.first;
            if (it == order.waiting.end())
                ++order.arrived;
            else
                order.waiting.erase(it);
            std::int64_t earlier = 0;
            std::string who;
            for (auto& [w, an] : order.waiting)
                if (an.first < mine) {
                    earlier += an.second;
                    who += fmt::format(" {} (arrival {}, {} leases)", w, an.first, an.second);
                }
            if (!who.empty())
                ++order.passed;
            const auto now_held = held_leases();
            if (now_held > *max_leases && sem_over.empty())
                sem_over = fmt::format("the grant of {} leases to {} at {} ms left {} leases held on the server, of {}",
                                       leases_of(value), value, now, now_held, *max_leases);
            if (now_held + earlier > *max_leases && sem_fifo_break.empty())
                sem_fifo_break = fmt::format("{} (arrival {}, {} leases) granted at {} ms with {} leases held then, "
                                             "while these arrived before it and wait:{} (of {} leases)",
                                             value, mine, leases_of(value), now, now_held, who, *max_leases);
        }
        return resp::array({resp::number(1), resp::number(n)});
    }
    if (!zscore(z, value)) {
        entry c;
        if (auto* l = find_list(q))
            c = *l;
        c.type = entry::kind::list;
        c.list.push_back(value);
        put(q, c);
    }
    zadd(z, now + *wait, value);
    set(mk, argv[4], -1);
    if (changed)
        tell(free);
    tidy();
    if (!order.waiting.count(value)) {
        order.waiting.emplace(value, std::make_pair(order.next++, leases_of(value)));
        ++order.arrived;
    }
    const auto first = extreme(lk, false);
    std::int64_t left = -1;
    auto l = queue();
    if (!l.empty())
        if (auto hs = zscore(z, l.front()))
            left = *hs - now;
    // LPOS: nil when we are not in the list (a timeout without a queue entry, written by
    // someone else): the Lua table {0, nil, first, left} has a hole, answered as a nil element.
    resp pos = resp::nil();
    if (auto it = std::find(l.begin(), l.end(), value); it != l.end())
        pos = resp::number(it - l.begin());
    return resp::array({resp::number(0), pos, resp::number(first ? *first - now : -1), resp::number(left)});
}

}  // namespace zksim
