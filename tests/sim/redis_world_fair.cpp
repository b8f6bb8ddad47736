// The simulated Redis's fair lock (redis_world.hpp): the fair lock's two scripts
// (src/redis/lock_scripts.cpp: fair_acquire_script, fair_release_script) as C++ models of what
// their Lua does, step by step, and the list and sorted-set commands that the differential test
// and the fair lock's participants() use (TYPE, RPUSH, LRANGE, ZADD, ZRANGE, ZSCORE).
//
// The Lua they model, in short. Both begin with their checks (the fencing counter's, the queue's
// and the timeouts' types), then purge: `now` = TIME in ms; at most 100 members of the timeouts
// whose score is <= now leave the list (LREM 0) and the set. The acquire drops, at most 100
// times, a queue head that has no timeout (LPOP); then grants (ZREM ours, and LREM 1 ours if it
// was there; the fencing grant: max(counter + 1, TIME in us), the counter then the key with PX)
// when the key holds our value, or is free and the queue is empty or headed by us; else queues
// us (RPUSH unless we have a timeout), sets our timeout (ZADD now + ARGV[3]), makes the queue and
// the timeouts expire 1 ms after the latest timeout (PEXPIRE both), and, the key being free,
// tells the head (PUBLISH ARGV[4] .. the head's value up to its first ':', the head's
// value); answers {0, PTTL, holder or '', LPOS of us, the head's timeout - now or -1}. The
// release deletes the key while it holds our value (1, else 0), takes us out of the set and (if
// we were in it) the list (LREM 0), purges, and when the key is gone tells the head.
#include "redis_world.hpp"

#include "redis/lock_scripts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>

namespace zksim {

namespace {

const char* const wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value";

}  // namespace

redis_world::entry* redis_world::find_list(const std::string& key)
{
    auto* e = find(key);
    return e && e->type == entry::kind::list ? e : nullptr;
}

redis_world::entry* redis_world::find_zset(const std::string& key)
{
    auto* e = find(key);
    return e && e->type == entry::kind::zset ? e : nullptr;
}

void redis_world::lrem(const std::string& key, std::int64_t count, const std::string& v)
{
    auto* e = find_list(key);
    if (!e)
        return;
    entry c = *e;
    std::int64_t removed = 0;
    for (auto it = c.list.begin(); it != c.list.end() && (count == 0 || removed < count);) {
        if (*it == v) {
            it = c.list.erase(it);
            ++removed;
        } else {
            ++it;
        }
    }
    if (removed > 0)
        put(key, c);
}

bool redis_world::zrem(const std::string& key, const std::string& member)
{
    auto* e = find_zset(key);
    if (!e || !e->zset.count(member))
        return false;
    entry c = *e;
    c.zset.erase(member);
    put(key, c);
    return true;
}

// ZKCORO_FAIR_TYPES: the queue a list (or none), the timeouts a sorted set (or none).
std::optional<resp> redis_world::fair_types(const std::string& q, const std::string& z)
{
    auto* qe = find(q);
    auto* ze = find(z);
    if ((qe && qe->type != entry::kind::list) || (ze && ze->type != entry::kind::zset))
        return resp::error(fmt::format("WRONGTYPE {} must be a list and {} a sorted set: the fair lock queue", q, z));
    return std::nullopt;
}

// ZKCORO_FAIR_PURGE: ZRANGEBYSCORE z -inf now LIMIT 0 100, each LREM q 0 w and ZREM z w.
void redis_world::fair_purge(const std::string& q, const std::string& z)
{
    std::vector<std::pair<std::int64_t, std::string>> due;
    if (auto* ze = find_zset(z))
        for (auto& [m, score] : ze->zset)
            if (score <= now_ms())
                due.emplace_back(score, m);
    std::sort(due.begin(), due.end());  // by score, then member (bytes): ZRANGEBYSCORE's order
    if (due.size() > 100)
        due.resize(100);
    auto& order = fair[q];
    for (auto& [score, w] : due) {
        lrem(q, 0, w);
        zrem(z, w);
        if (order.waiting.erase(w))
            ++order.purged;
    }
    // The order's bookkeeping: a waiter without a timeout now has departed too (the timeouts
    // expired with their TTL, 1 ms after the latest timeout: every one of them would have been
    // purged here).
    auto* ze = find_zset(z);
    for (auto it = order.waiting.begin(); it != order.waiting.end();)
        if (!ze || !ze->zset.count(it->first)) {
            it = order.waiting.erase(it);
            ++order.purged;
        } else {
            ++it;
        }
}

// A grant of the acquire script to `value` that it did not hold already: the FIFO order.
void redis_world::fair_grant_order(const std::string& q, const std::string& value)
{
    auto& order = fair[q];
    ++order.granted;
    auto it = order.waiting.find(value);
    const auto mine = it == order.waiting.end() ? order.next++ : it->second;
    if (it == order.waiting.end())
        ++order.arrived;  // granted at its arrival
    for (auto& [w, n] : order.waiting)
        if (n < mine && fifo_break.empty())
            fifo_break = fmt::format("{} granted (arrival {}) while {} (arrival {}) still waited in {}", value, mine, w,
                                     n, q);
    if (it != order.waiting.end())
        order.waiting.erase(it);
}

resp redis_world::fair_acquire(const std::vector<std::string>& keys, const std::vector<std::string>& argv)
{
    if (keys.size() < 4 || argv.size() < 4)
        return resp::error("ERR the fair acquire script's model needs 4 keys and 4 arguments");
    const auto &key = keys[0], &fence = keys[1], &q = keys[2], &z = keys[3];
    const auto& value = argv[0];
    if (auto* fe = find(fence); fe && fe->type != entry::kind::string)
        return resp::error(wrongtype);
    auto f = get(fence);
    if (f) {
        bool counter = std::all_of(f->begin(), f->end(), [](unsigned char c) { return c >= '0' && c <= '9'; }) &&
                       !f->empty() && f->size() <= 16;
        if (counter && std::strtod(f->c_str(), nullptr) >= 9007199254740992.0)
            counter = false;
        if (!counter)
            return resp::error(fmt::format("ZKFENCING {} holds a value that is not a fencing counter (an integer "
                                           "below 2^53)",
                                           fence));
    }
    if (auto* ke = find(key); ke && ke->type != entry::kind::string)
        return resp::error(wrongtype);
    const auto held = get(key);
    if (auto bad = fair_types(q, z))
        return *bad;
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
    fair_purge(q, z);
    auto& order = fair[q];
    auto head_of = [&]() -> std::optional<std::string> {
        auto* l = find_list(q);
        if (!l)
            return std::nullopt;
        return l->list.front();
    };
    auto score_of = [&](const std::string& m) -> std::optional<std::int64_t> {
        auto* ze = find_zset(z);
        if (!ze)
            return std::nullopt;
        auto it = ze->zset.find(m);
        if (it == ze->zset.end())
            return std::nullopt;
        return it->second;
    };
    auto head = head_of();
    for (int i = 0; i < 100; ++i) {
        if (!head || score_of(*head))
            break;
        entry c = *find_list(q);  // LPOP
        const auto gone = c.list.front();
        c.list.erase(c.list.begin());
        put(q, c);
        if (order.waiting.erase(gone))
            ++order.dropped;
        head = head_of();
    }
    if (held == value || (!held && (!head || head == value || broken_fair_order))) {
        if (zrem(z, value))
            lrem(q, 1, value);
        std::int64_t n = now_us_;
        if (f) {
            const auto counter = std::strtoll(f->c_str(), nullptr, 10);
            if (counter + 1 > n)
                n = counter + 1;
        }
        set(fence, std::to_string(n), -1);
        const auto ttl = integer_of(argv[1]);
        if (!ttl || *ttl <= 0)
            return resp::error("ERR invalid expire time in 'set' command (the fair acquire script's model)");
        set(key, value, now_ms() + *ttl);
        auto& last = last_grant_token[fence];
        if (n <= last && token_drop.empty())
            token_drop = fmt::format("the grant of {} to {} got token {} after a grant with token {}", key, value, n,
                                     last);
        last = std::max(last, n);
        if (held != value)
            fair_grant_order(q, value);
        return resp::array({resp::number(1), resp::number(n)});
    }
    const auto wt = integer_of(argv[2]);
    if (!wt)
        return resp::error("ERR the fair acquire script's model: ARGV[3] is not an integer");
    if (!score_of(value)) {
        entry c;
        if (auto* l = find_list(q))
            c = *l;
        c.type = entry::kind::list;
        c.list.push_back(value);
        put(q, c);
    }
    {
        entry c;
        if (auto* ze = find_zset(z))
            c = *ze;
        c.type = entry::kind::zset;
        c.zset[value] = now_ms() + *wt;
        put(z, c);
        // The queue and the timeouts expire 1 ms after the latest timeout (ZRANGE z -1 -1
        // WITHSCORES, then PEXPIRE on each, which does nothing to a missing key).
        std::int64_t last = 0;
        for (auto& [m, score] : c.zset)
            last = std::max(last, score);
        for (auto* k : {&q, &z})
            if (auto* e = find(*k)) {
                entry x = *e;
                x.expires_ms = now_ms() + (last - now_ms() + 1);
                put(*k, x);
            }
    }
    if (!order.waiting.count(value)) {
        order.waiting.emplace(value, order.next++);
        ++order.arrived;
    }
    std::int64_t left = -1;
    if (head) {
        if (auto hs = score_of(*head))
            left = *hs - now_ms();
        if (!held)
            publish(argv[3] + process_of(*head), *head);
    }
    std::vector<resp> out{resp::number(0), resp::number(pttl(key)), resp::bulk(held ? *held : std::string())};
    // LPOS: nil when we are not in the list (a timeout without a queue entry). The table
    // {0, pttl, held, nil, left} then has a hole, which Redis 7 answers as a nil element (seen
    // by the differential test), not as the end of the array.
    out.push_back(resp::nil());
    if (auto* l = find_list(q)) {
        auto it = std::find(l->list.begin(), l->list.end(), value);
        if (it != l->list.end())
            out.back() = resp::number(it - l->list.begin());
    }
    out.push_back(resp::number(left));
    return resp::array(std::move(out));
}

resp redis_world::fair_release(const std::vector<std::string>& keys, const std::vector<std::string>& argv)
{
    if (keys.size() < 3 || argv.size() < 2)
        return resp::error("ERR the fair release script's model needs 3 keys and 2 arguments");
    const auto &key = keys[0], &q = keys[1], &z = keys[2];
    const auto& value = argv[0];
    if (auto* ke = find(key); ke && ke->type != entry::kind::string)
        return resp::error(wrongtype);
    const auto held = get(key);
    if (auto bad = fair_types(q, z))
        return *bad;
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
    std::int64_t r = 0;
    if (held == value) {
        del(key);
        r = 1;
    }
    if (zrem(z, value)) {
        lrem(q, 0, value);
        auto& order = fair[q];
        if (order.waiting.erase(value))
            ++order.left;
    }
    fair_purge(q, z);
    if (!find(key))
        if (auto* l = find_list(q))
            publish(argv[1] + process_of(l->list.front()), l->list.front());
    return resp::number(r);
}

// TYPE, RPUSH, LRANGE, ZADD (integer scores), ZRANGE (by index, WITHSCORES), ZSCORE; nullopt for
// any other command.
std::optional<resp> redis_world::exec_collection(const std::string& cmd, const std::vector<std::string>& args)
{
    const auto n = args.size();
    auto wrong = [](const char* c) {
        return resp::error(fmt::format("ERR wrong number of arguments for '{}' command", c));
    };
    if (cmd == "TYPE") {
        if (n != 2)
            return wrong("type");
        auto* e = find(args[1]);
        return resp::status(!e ? "none" : e->type == entry::kind::list ? "list" : e->type == entry::kind::zset ? "zset" : "string");
    }
    const bool list_cmd = cmd == "RPUSH" || cmd == "LRANGE";
    const bool zset_cmd = cmd == "ZADD" || cmd == "ZRANGE" || cmd == "ZSCORE";
    if (!list_cmd && !zset_cmd)
        return std::nullopt;
    if (n < 3)
        return wrong(cmd == "RPUSH" ? "rpush" : cmd == "LRANGE" ? "lrange" : cmd == "ZADD" ? "zadd" : cmd == "ZRANGE" ? "zrange" : "zscore");
    auto* e = find(args[1]);
    if (e && e->type != (list_cmd ? entry::kind::list : entry::kind::zset))
        return resp::error(wrongtype);
    if (cmd == "RPUSH") {
        entry c;
        if (e)
            c = *e;
        c.type = entry::kind::list;
        c.list.insert(c.list.end(), args.begin() + 2, args.end());
        put(args[1], c);
        return resp::number(static_cast<std::int64_t>(c.list.size()));
    }
    if (cmd == "ZSCORE") {
        if (n != 3)
            return wrong("zscore");
        if (!e || !e->zset.count(args[2]))
            return resp::nil();
        return resp::bulk(std::to_string(e->zset.at(args[2])));
    }
    if (cmd == "ZADD") {
        if (n < 4 || (n - 2) % 2 != 0)
            return resp::error("ERR syntax error");
        entry c;
        if (e)
            c = *e;
        c.type = entry::kind::zset;
        std::int64_t added = 0;
        for (std::size_t i = 2; i + 1 < n; i += 2) {
            auto s = integer_of(args[i]);
            if (!s)
                return resp::error("ERR value is not a valid float");
            added += c.zset.count(args[i + 1]) ? 0 : 1;
            c.zset[args[i + 1]] = *s;
        }
        put(args[1], c);
        return resp::number(added);
    }
    // LRANGE key start stop; ZRANGE key start stop [WITHSCORES]
    if (n < 4)
        return wrong(cmd == "LRANGE" ? "lrange" : "zrange");
    auto a = integer_of(args[2]), b = integer_of(args[3]);
    if (!a || !b)
        return resp::error("ERR value is not an integer or out of range");
    const bool scores = n == 5 && (args[4] == "WITHSCORES" || args[4] == "withscores");
    if (n > 5 || (n == 5 && !scores))
        return resp::error("ERR syntax error");
    std::vector<std::pair<std::int64_t, std::string>> items;  // (score, member) or (index, element)
    if (e && e->type == entry::kind::list)
        for (std::size_t i = 0; i < e->list.size(); ++i)
            items.emplace_back(static_cast<std::int64_t>(i), e->list[i]);
    if (e && e->type == entry::kind::zset) {
        for (auto& [m, score] : e->zset)
            items.emplace_back(score, m);
        std::sort(items.begin(), items.end());
    }
    const auto len = static_cast<std::int64_t>(items.size());
    std::int64_t from = *a < 0 ? std::max<std::int64_t>(0, len + *a) : *a;
    std::int64_t to = *b < 0 ? len + *b : std::min(*b, len - 1);
    std::vector<resp> out;
    for (auto i = from; i <= to && i < len; ++i) {
        out.push_back(resp::bulk(items[static_cast<std::size_t>(i)].second));
        if (scores)
            out.push_back(resp::bulk(std::to_string(items[static_cast<std::size_t>(i)].first)));
    }
    return resp::array(std::move(out));
}

}  // namespace zksim
