// The Redis lock's Lua scripts and its waiting policy.
#include "redis/lock_scripts.hpp"

#include "redis/fencing_lua.hpp"
#include "redis/redis_impl.hpp"
#include "redis/slot.hpp"

#include "async/random_seed.hpp"

#include <boost/uuid/random_generator.hpp>
#include <boost/uuid/uuid_io.hpp>

#include <algorithm>
#include <random>

#include <pthread.h>

namespace zkcoro::detail {

namespace {

lua_script with_sha(std::string text)
{
    auto sha = script_sha1(text);
    return {std::move(text), std::move(sha)};
}

std::string& process_name_storage()
{
    static std::string name = boost::uuids::to_string(boost::uuids::random_generator()());
    return name;
}

}  // namespace

// Drawn anew in a forked child's fork handler, where the child runs alone (its parent's other
// threads do not exist there); never changed in a process with threads.
const std::string& process_name()
{
    static const int registered = ::pthread_atfork(nullptr, nullptr, [] {
        process_name_storage() = boost::uuids::to_string(boost::uuids::random_generator()());
    });
    (void)registered;
    return process_name_storage();
}

// The fencing counter's rule (ZKCORO_FENCING_CHECK, ZKCORO_FENCED_GRANT): redis/fencing_lua.hpp.

// KEYS: key, fencing key. ARGV: our value, ttl ms. {1, fencing token} when we hold it (also when
// an earlier attempt of ours set it and its reply was lost), else {0, pttl, the holder's value}.
// Every check comes before the first write: a failing command does not undo the writes before
// it. The token is max(counter + 1, the server's clock in microseconds), so it never goes back
// when the counter is lost (a restart without persistence) unless the clock went back further
// than the time between the grants. The counter is written before the key: if the second write
// fails, only the counter has moved on (harmless). The clock (TIME) is allowed in a script since
// Redis 5 replicates a script's effects, not the script.
const lua_script& acquire_script()
{
    static const lua_script s = with_sha(ZKCORO_FENCING_CHECK R"lua(local held = redis.call('get', KEYS[1])
if held and held ~= ARGV[1] then
  return {0, redis.call('pttl', KEYS[1]), held}
end
local t = redis.call('time')
)lua" ZKCORO_FENCED_GRANT);
    return s;
}

// KEYS: key. ARGV: our value, channel. Deletes the key only while it holds our value, and tells
// the waiters of every process: 1, or 0 when the key is not ours. The PUBLISH comes after the
// delete, which a failing command would not undo: a refused one (an ACL user without PUBLISH)
// does not fail the release, whose delete happened; its error's text is the reply instead.
const lua_script& release_script()
{
    static const lua_script s = with_sha(R"lua(if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('del', KEYS[1])
  local p = redis.pcall('publish', ARGV[2], 'released')
  if type(p) == 'table' and p.err then
    return p.err
  end
  return 1
end
return 0)lua");
    return s;
}

// KEYS: key. ARGV: our value, ttl ms. 1 when extended, 0 when the key is gone or not ours.
const lua_script& renew_script()
{
    static const lua_script s = with_sha(R"lua(if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0)lua");
    return s;
}

// Lua shared by the fair lock's scripts: the server's time in ms (`now`, from `t` = TIME), and
// the waiters whose timeout passed taken out of the queue (KEYS[q], KEYS[z]), at most 100 a call.
#define ZKCORO_FAIR_PURGE(q, z)                                                                    \
    "local t = redis.call('time')\n"                                                              \
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"                     \
    "for _, w in ipairs(redis.call('zrangebyscore', KEYS[" #z "], '-inf', now, 'LIMIT', 0, 100)) do\n" \
    "  redis.call('lrem', KEYS[" #q "], 0, w)\n"                                                  \
    "  redis.call('zrem', KEYS[" #z "], w)\n"                                                     \
    "end\n"
// Every check before the first write (a failing command does not undo the writes before it).
#define ZKCORO_FAIR_TYPES(q, z)                                                                    \
    "local qt = redis.call('type', KEYS[" #q "]).ok\n"                                            \
    "local zt = redis.call('type', KEYS[" #z "]).ok\n"                                            \
    "if (qt ~= 'none' and qt ~= 'list') or (zt ~= 'none' and zt ~= 'zset') then\n"                \
    "  return redis.error_reply('WRONGTYPE ' .. KEYS[" #q "] .. ' must be a list and ' .. KEYS[" #z "] .. ' a sorted set: the fair lock queue')\n" \
    "end\n"

// A head without a timeout (written by someone else) is dropped too: nothing would ever time it
// out. The head is told on `prefix .. <its process name>` (the value up to its first ':'), with its
// value: only the process that queued it hears it, and there only that waiter tries again. The
// queue and the timeouts expire 1 ms after the latest timeout, by when a purge would have emptied
// them: a waiter that never comes back (its process crashed, its client closed while it waited,
// its leave lost) leaves no key behind although nobody runs a script on the lock again.
const lua_script& fair_acquire_script()
{
    static const lua_script s = with_sha(ZKCORO_FENCING_CHECK R"lua(local held = redis.call('get', KEYS[1])
)lua" ZKCORO_FAIR_TYPES(3, 4) ZKCORO_FAIR_PURGE(3, 4) R"lua(local head = redis.call('lindex', KEYS[3], 0)
for _ = 1, 100 do
  if not head or redis.call('zscore', KEYS[4], head) then
    break
  end
  redis.call('lpop', KEYS[3])
  head = redis.call('lindex', KEYS[3], 0)
end
if held == ARGV[1] or (not held and (not head or head == ARGV[1])) then
  if redis.call('zrem', KEYS[4], ARGV[1]) == 1 then
    redis.call('lrem', KEYS[3], 1, ARGV[1])
  end
)lua" ZKCORO_FENCED_GRANT R"lua(
end
if not redis.call('zscore', KEYS[4], ARGV[1]) then
  redis.call('rpush', KEYS[3], ARGV[1])
end
redis.call('zadd', KEYS[4], now + tonumber(ARGV[3]), ARGV[1])
local last = tonumber(redis.call('zrange', KEYS[4], -1, -1, 'WITHSCORES')[2])
redis.call('pexpire', KEYS[3], last - now + 1)
redis.call('pexpire', KEYS[4], last - now + 1)
local left = -1
if head then
  local hs = redis.call('zscore', KEYS[4], head)
  if hs then
    left = tonumber(hs) - now
  end
  if not held then
    redis.pcall('publish', ARGV[4] .. string.match(head, '^[^:]*'), head)
  end
end
return {0, redis.call('pttl', KEYS[1]), held or '', redis.call('lpos', KEYS[3], ARGV[1]), left})lua");
    return s;
}

const lua_script& fair_release_script()
{
    static const lua_script s = with_sha(R"lua(local held = redis.call('get', KEYS[1])
)lua" ZKCORO_FAIR_TYPES(2, 3) R"lua(local r = 0
if held == ARGV[1] then
  redis.call('del', KEYS[1])
  r = 1
end
if redis.call('zrem', KEYS[3], ARGV[1]) == 1 then
  redis.call('lrem', KEYS[2], 0, ARGV[1])
end
)lua" ZKCORO_FAIR_PURGE(2, 3) R"lua(if redis.call('exists', KEYS[1]) == 0 then
  local head = redis.call('lindex', KEYS[2], 0)
  if head then
    local p = redis.pcall('publish', ARGV[2] .. string.match(head, '^[^:]*'), head)
    if type(p) == 'table' and p.err then
      return p.err
    end
  end
end
return r)lua");
    return s;
}

#undef ZKCORO_FAIR_PURGE
#undef ZKCORO_FAIR_TYPES

std::string fair_prefix(std::string_view name) { return cluster_lock_key(name); }

bool fair_holder(std::string_view v)
{
    return v.size() > 2 && v.ends_with(":q") && publishing_holder(v.substr(0, v.size() - 2));
}

bool publishing_holder(std::string_view v)
{
    if (v.size() < 40 || v[36] != ':')
        return false;
    auto rest = v.substr(37);
    auto colon = rest.find(':');
    return colon != std::string_view::npos && colon > 0 && colon + 1 < rest.size() &&
           rest.find_first_not_of("0123456789abcdef") == colon &&
           rest.substr(colon + 1).find_first_not_of("0123456789") == std::string_view::npos;
}

std::chrono::milliseconds next_poll(std::chrono::milliseconds& backoff)
{
    static thread_local std::minstd_rand rng{random_seed()};
    backoff = std::clamp(backoff * 2, std::chrono::milliseconds{5}, std::chrono::milliseconds{50});
    std::uniform_int_distribution<long> d(backoff.count() * 3 / 4, backoff.count() * 5 / 4);
    return std::chrono::milliseconds{d(rng)};
}

std::chrono::milliseconds next_retry(std::chrono::milliseconds& backoff)
{
    static thread_local std::minstd_rand rng{random_seed()};
    backoff = std::clamp(backoff * 2, std::chrono::milliseconds{50}, std::chrono::milliseconds{1000});
    std::uniform_int_distribution<long> d(backoff.count() / 2, backoff.count());
    return std::chrono::milliseconds{d(rng)};
}

bool transient_acquire_error(const error_code& ec) noexcept
{
    // The Redis errors classify() calls retriable, but OOM: memory is freed by an operator, not
    // by a failover or a moment's wait.
    return ec.category() == redis_category() && is_retriable(ec) && ec != redis_errc::out_of_memory;
}

}  // namespace zkcoro::detail
