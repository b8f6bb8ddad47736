// The simulated Redis's data and commands (redis_world.hpp).
#include "redis_world.hpp"

#include "redis/lock_scripts.hpp"
#include "redis/semaphore_scripts.hpp"
#include "redis/shared_scripts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>

namespace zkcoro::detail {
std::string script_sha1(const std::string& script);  // src/redis (the library's own, exported)
}

namespace zksim {

std::string sha1_hex(const std::string& text)
{
    return zkcoro::detail::script_sha1(text);
}

std::string resp::encode() const
{
    switch (type) {
    case kind::nil: return "$-1\r\n";
    case kind::status: return "+" + str + "\r\n";
    case kind::error: return "-" + str + "\r\n";
    case kind::integer: return fmt::format(":{}\r\n", integer);
    case kind::bulk: return fmt::format("${}\r\n{}\r\n", str.size(), str);
    case kind::array: {
        auto out = fmt::format("*{}\r\n", elements.size());
        for (auto& e : elements)
            out += e.encode();
        return out;
    }
    }
    return {};
}

std::string resp::show() const
{
    switch (type) {
    case kind::nil: return "(nil)";
    case kind::status: return "+" + str;
    case kind::error: return "-" + str;
    case kind::integer: return std::to_string(integer);
    case kind::bulk: return "\"" + str + "\"";
    case kind::array: {
        std::string out = "[";
        for (std::size_t i = 0; i < elements.size(); ++i)
            out += (i ? ", " : "") + elements[i].show();
        return out + "]";
    }
    }
    return {};
}

namespace {

std::string upper(std::string s)
{
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    return s;
}

resp wrong_args(const std::string& cmd)
{
    return resp::error(fmt::format("ERR wrong number of arguments for '{}' command", cmd));
}

const resp ok = resp::status("OK");

// Lua's string.match(f, '^%d+$'): one or more ASCII digits, nothing else.
bool all_digits(const std::string& s)
{
    return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::optional<std::int64_t> integer_of(const std::string& s)
{
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || p != s.data() + s.size() || s.empty())
        return std::nullopt;
    return v;
}

redis_world::entry* redis_world::find(const std::string& key)
{
    auto it = keys_.find(key);
    if (it == keys_.end())
        return nullptr;
    if (it->second.expires_ms >= 0 && it->second.expires_ms <= now_ms()) {
        keys_.erase(it);  // expired (Redis deletes it on access, or in its sweep: no one can tell)
        return nullptr;
    }
    return &it->second;
}

void redis_world::set(const std::string& key, std::string value, std::int64_t expires_ms)
{
    entry e;
    e.value = std::move(value);
    e.expires_ms = expires_ms;
    put(key, e);
}

void redis_world::put(const std::string& key, const entry& e)
{
    if ((e.type == entry::kind::list && e.list.empty()) || (e.type == entry::kind::zset && e.zset.empty()))
        return del(key);  // Redis deletes an empty list or set
    keys_[key] = e;
    if (batch_)
        batch_->emplace_back(key, e);
    else
        log_.push_back({{key, e}});
}

void redis_world::del(const std::string& key)
{
    keys_.erase(key);
    if (batch_)
        batch_->emplace_back(key, std::nullopt);
    else
        log_.push_back({{key, std::nullopt}});
}

std::int64_t redis_world::pttl(const std::string& key)
{
    auto* e = find(key);
    if (!e)
        return -2;
    if (e->expires_ms < 0)
        return -1;
    return e->expires_ms - now_ms();
}

std::optional<std::string> redis_world::get(const std::string& key)
{
    auto* e = find(key);
    if (!e || e->type != entry::kind::string)
        return std::nullopt;
    return e->value;
}

std::map<std::string, std::string> redis_world::live_keys()
{
    std::map<std::string, std::string> out;
    std::vector<std::string> names;
    for (auto& [k, e] : keys_)
        names.push_back(k);
    for (auto& k : names)
        if (auto* e = find(k)) {
            std::string v = e->value;
            if (e->type == entry::kind::list)
                v = fmt::format("[{}]", fmt::join(e->list, ", "));
            if (e->type == entry::kind::zset) {
                std::vector<std::string> ms;
                for (auto& [m, score] : e->zset)
                    ms.push_back(fmt::format("{} {}", m, score));
                v = fmt::format("{{{}}}", fmt::join(ms, ", "));
            }
            out.emplace(k, std::move(v));
        }
    return out;
}

void redis_world::roll_back_to(std::int64_t n)
{
    n = std::clamp<std::int64_t>(n, 0, writes());
    log_.resize(static_cast<std::size_t>(n));
    keys_.clear();
    for (auto& writes : log_)
        for (auto& [k, e] : writes) {
            if (e)
                keys_[k] = *e;
            else
                keys_.erase(k);
        }
    scripts_.clear();
}

std::vector<std::pair<int, resp>> redis_world::take_published()
{
    auto out = std::move(published_);
    published_.clear();
    return out;
}

bool redis_world::subscribed(int conn) const
{
    auto it = subs_of_.find(conn);
    return it != subs_of_.end() && !it->second.empty();
}

void redis_world::drop_connection(int conn)
{
    auto it = subs_of_.find(conn);
    if (it == subs_of_.end())
        return;
    for (auto& ch : it->second) {
        auto c = channels_.find(ch);
        if (c == channels_.end())
            continue;
        c->second.erase(conn);
        if (c->second.empty())
            channels_.erase(c);
    }
    subs_of_.erase(it);
}

resp redis_world::publish(const std::string& channel, const std::string& message)
{
    auto it = channels_.find(channel);
    if (it == channels_.end())
        return resp::number(0);
    for (int c : it->second)
        published_.emplace_back(c, resp::array({resp::bulk("message"), resp::bulk(channel), resp::bulk(message)}));
    return resp::number(static_cast<std::int64_t>(it->second.size()));
}

// The lock's scripts (src/redis/lock_scripts.cpp), step by step as their Lua runs. A script sees
// the clock of its start (Redis 7 freezes it for the keys' expiry during a script).
resp redis_world::run_script(const std::string& text, const std::vector<std::string>& keys,
                             const std::vector<std::string>& argv)
{
    using namespace zkcoro::detail;
    if (text == acquire_script().text) {
        if (keys.size() < 2 || argv.size() < 2)
            return resp::error("ERR the acquire script's model needs 2 keys and 2 arguments");
        auto f = get(keys[1]);
        if (f) {
            bool counter = all_digits(*f) && f->size() <= 16;
            if (counter && std::strtod(f->c_str(), nullptr) >= 9007199254740992.0)
                counter = false;
            if (!counter)
                return resp::error(fmt::format("ZKFENCING {} holds a value that is not a fencing counter (an integer "
                                               "below 2^53)",
                                               keys[1]));
        }
        auto held = get(keys[0]);
        if (held && *held != argv[0] && !broken_acquire)
            return resp::array({resp::number(0), resp::number(pttl(keys[0])), resp::bulk(*held)});
        std::int64_t n = now_us_;
        if (f) {
            const auto counter = std::strtoll(f->c_str(), nullptr, 10);
            if (counter + 1 > n)
                n = counter + 1;
        }
        set(keys[1], std::to_string(n), -1);
        const auto ttl = integer_of(argv[1]);
        if (!ttl || *ttl <= 0)
            return resp::error("ERR invalid expire time in 'set' command (the acquire script's model)");
        set(keys[0], argv[0], now_ms() + *ttl);
        auto& last = last_grant_token[keys[1]];  // per fencing counter: each lock's own
        if (n <= last && token_drop.empty())
            token_drop = fmt::format("the grant of {} to {} got token {} after a grant with token {}", keys[0], argv[0],
                                     n, last);
        last = std::max(last, n);
        return resp::array({resp::number(1), resp::number(n)});
    }
    if (text == release_script().text) {
        if (keys.size() < 1 || argv.size() < 2)
            return resp::error("ERR the release script's model needs 1 key and 2 arguments");
        auto held = get(keys[0]);
        if (held && *held == argv[0] && !broken_release) {
            del(keys[0]);
            publish(argv[1], "released");
            return resp::number(1);
        }
        return resp::number(0);
    }
    if (text == fair_acquire_script().text)
        return fair_acquire(keys, argv);
    if (text == fair_release_script().text)
        return fair_release(keys, argv);
    if (text == renew_script().text) {
        if (keys.size() < 1 || argv.size() < 2)
            return resp::error("ERR the renew script's model needs 1 key and 2 arguments");
        auto held = get(keys[0]);
        if (held && *held == argv[0]) {
            const auto ttl = integer_of(argv[1]);
            if (!ttl || *ttl <= 0)
                return resp::error("ERR invalid expire time in 'pexpire' command (the renew script's model)");
            set(keys[0], *held, now_ms() + *ttl);
            return resp::number(1);
        }
        return resp::number(0);
    }
    if (auto r = sem_script(text, keys, argv))
        return *r;
    if (auto r = rw_script(text, keys, argv))
        return *r;
    return resp::error("ERR the simulated Redis runs only the lock's scripts");
}

std::vector<resp> redis_world::exec(int conn, const std::vector<std::string>& args)
{
    ++commands;
    if (args.empty())
        return {resp::error("ERR empty command")};
    const auto cmd = upper(args[0]);
    const auto n = args.size();
    // A subscribed connection may only (UN)SUBSCRIBE and PING (RESP2).
    if (subscribed(conn) && cmd != "SUBSCRIBE" && cmd != "UNSUBSCRIBE" && cmd != "PING")
        return {resp::error(fmt::format("ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / "
                                        "QUIT / RESET are allowed in this context",
                                        args[0]))};
    if (cmd == "PING") {
        if (subscribed(conn))
            return {resp::array({resp::bulk("pong"), resp::bulk(n > 1 ? args[1] : "")})};
        return {n > 1 ? resp::bulk(args[1]) : resp::status("PONG")};
    }
    if (cmd == "AUTH")
        return {resp::error("ERR AUTH <password> called without any password configured for the default user. Are "
                            "you sure your configuration is correct?")};
    if (cmd == "SELECT")
        return {n == 2 && integer_of(args[1]) && *integer_of(args[1]) >= 0 && *integer_of(args[1]) < 16
                    ? ok
                    : resp::error("ERR DB index is out of range")};
    if (cmd == "CLIENT")
        return {ok};
    if (cmd == "ROLE")
        return {resp::array({resp::bulk("master"), resp::number(writes()), resp::array({})})};
    if (cmd == "INFO")
        return {resp::bulk(fmt::format("# Replication\r\nrole:master\r\nconnected_slaves:{}\r\n", replicas))};
    if (cmd == "TIME")
        return {resp::array({resp::bulk(std::to_string(now_us_ / 1'000'000)), resp::bulk(std::to_string(now_us_ % 1'000'000))})};
    if (cmd == "GET") {
        if (n != 2)
            return {wrong_args("get")};
        if (auto* e = find(args[1]); e && e->type != entry::kind::string)
            return {resp::error("WRONGTYPE Operation against a key holding the wrong kind of value")};
        auto v = get(args[1]);
        return {v ? resp::bulk(*v) : resp::nil()};
    }
    if (cmd == "SET") {
        if (n < 3)
            return {wrong_args("set")};
        bool nx = false, xx = false;
        std::int64_t expires = -1;
        for (std::size_t i = 3; i < n; ++i) {
            const auto o = upper(args[i]);
            if (o == "NX")
                nx = true;
            else if (o == "XX")
                xx = true;
            else if ((o == "PX" || o == "EX") && i + 1 < n) {
                auto t = integer_of(args[++i]);
                if (!t || *t <= 0)
                    return {resp::error("ERR invalid expire time in 'set' command")};
                expires = now_ms() + (o == "EX" ? *t * 1000 : *t);
            } else
                return {resp::error("ERR syntax error")};
        }
        const bool there = find(args[1]) != nullptr;
        if ((nx && there) || (xx && !there))
            return {resp::nil()};
        set(args[1], args[2], expires);
        return {ok};
    }
    if (cmd == "DEL" || cmd == "EXISTS") {
        if (n < 2)
            return {wrong_args(cmd == "DEL" ? "del" : "exists")};
        std::int64_t count = 0;
        for (std::size_t i = 1; i < n; ++i)
            if (find(args[i])) {
                ++count;
                if (cmd == "DEL")
                    del(args[i]);
            }
        return {resp::number(count)};
    }
    if (cmd == "PTTL") {
        if (n != 2)
            return {wrong_args("pttl")};
        return {resp::number(pttl(args[1]))};
    }
    if (cmd == "PEXPIRE") {
        if (n != 3)
            return {wrong_args("pexpire")};
        auto t = integer_of(args[2]);
        if (!t)
            return {resp::error("ERR value is not an integer or out of range")};
        auto* e = find(args[1]);
        if (!e)
            return {resp::number(0)};
        if (*t <= 0) {
            del(args[1]);
        } else {
            entry c = *e;
            c.expires_ms = now_ms() + *t;
            put(args[1], c);
        }
        return {resp::number(1)};
    }
    if (cmd == "SCRIPT") {
        const auto sub = n > 1 ? upper(args[1]) : std::string();
        if (sub == "LOAD" && n == 3) {
            auto sha = sha1_hex(args[2]);
            scripts_.insert(sha);
            return {resp::bulk(sha)};
        }
        if (sub == "FLUSH") {
            scripts_.clear();
            return {ok};
        }
        return {resp::error("ERR unknown subcommand or wrong number of arguments for 'script' in the simulation")};
    }
    if (cmd == "EVAL" || cmd == "EVALSHA") {
        if (n < 3)
            return {wrong_args(cmd == "EVAL" ? "eval" : "evalsha")};
        auto nkeys = integer_of(args[2]);
        if (!nkeys || *nkeys < 0)
            return {resp::error("ERR value is not an integer or out of range")};
        if (static_cast<std::size_t>(*nkeys) > n - 3)
            return {resp::error("ERR Number of keys can't be greater than number of args")};
        std::string text;
        if (cmd == "EVAL") {
            text = args[1];
            scripts_.insert(sha1_hex(text));
        } else {
            auto sha = args[1];
            std::transform(sha.begin(), sha.end(), sha.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
            if (!scripts_.count(sha))
                return {resp::error("NOSCRIPT No matching script. Please use EVAL.")};
            using namespace zkcoro::detail;
            for (auto* s : {&acquire_script(), &release_script(), &renew_script(), &fair_acquire_script(),
                            &fair_release_script()})
                if (s->sha == sha)
                    text = s->text;
            for (auto* s : {&semaphore_acquire_script(), &semaphore_release_script(), &semaphore_renew_script()})
                if (s->sha == sha)
                    text = s->text;
            for (auto* s : {&rw_read_script(), &rw_write_script(), &rw_release_script(), &rw_renew_script()})
                if (s->sha == sha)
                    text = s->text;
        }
        const auto k = static_cast<std::size_t>(*nkeys);
        std::vector<std::string> keys(args.begin() + 3, args.begin() + static_cast<std::ptrdiff_t>(3 + k));
        std::vector<std::string> argv(args.begin() + static_cast<std::ptrdiff_t>(3 + k), args.end());
        return {run_script(text, keys, argv)};
    }
    if (cmd == "PUBLISH") {
        if (n != 3)
            return {wrong_args("publish")};
        return {publish(args[1], args[2])};
    }
    if (cmd == "SUBSCRIBE" || cmd == "UNSUBSCRIBE") {
        const bool sub = cmd == "SUBSCRIBE";
        if (sub && n < 2)
            return {wrong_args("subscribe")};
        std::vector<std::string> chans(args.begin() + 1, args.end());
        auto& mine = subs_of_[conn];
        if (!sub && chans.empty())
            chans.assign(mine.begin(), mine.end());
        std::vector<resp> out;
        for (auto& ch : chans) {
            if (sub) {
                mine.insert(ch);
                channels_[ch].insert(conn);
            } else {
                mine.erase(ch);
                if (auto c = channels_.find(ch); c != channels_.end()) {
                    c->second.erase(conn);
                    if (c->second.empty())
                        channels_.erase(c);
                }
            }
            out.push_back(resp::array({resp::bulk(sub ? "subscribe" : "unsubscribe"), resp::bulk(ch),
                                       resp::number(static_cast<std::int64_t>(mine.size()))}));
        }
        if (out.empty())  // UNSUBSCRIBE with nothing subscribed
            out.push_back(resp::array({resp::bulk("unsubscribe"), resp::nil(), resp::number(0)}));
        if (mine.empty())
            subs_of_.erase(conn);
        return out;
    }
    if (cmd == "WAIT") {
        if (n != 3)
            return {wrong_args("wait")};
        return {resp::number(replicas)};
    }
    if (auto r = exec_collection(cmd, args))
        return {*r};
    return {resp::error(fmt::format("ERR unknown command '{}' (the simulated Redis does not model it)", args[0]))};
}

}  // namespace zksim
