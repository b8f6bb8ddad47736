// The Redis semaphore's Lua scripts (redis_semaphore): one per step, each atomic on the server.
#include "redis/semaphore_scripts.hpp"

#include "redis/fencing_lua.hpp"
#include "redis/redis_impl.hpp"

namespace zkcoro::detail {

namespace {

lua_script sem_script(std::string text)
{
    auto sha = script_sha1(text);
    return {std::move(text), std::move(sha)};
}

}  // namespace

// Lua shared by the three scripts, from the top: the keys' types checked (before any write: a
// failing command does not undo the writes before it), `now` (the server's time in ms, from
// `t` = TIME), `leases(value)` (how many leases a value holds or wants: its ":s<n>" suffix, 1
// for a value without one) and `tidy()`, which each script runs after its writes: every key
// expires 1 s after the last lease or waiter timeout it holds (so that crashed holders and
// waiters leave nothing behind for ever), and P:max goes with the last of them.
#define ZKCORO_SEM_BEGIN \
    "local lt = redis.call('type', KEYS[1]).ok\n" \
    "local qt = redis.call('type', KEYS[3]).ok\n" \
    "local zt = redis.call('type', KEYS[4]).ok\n" \
    "local mt = redis.call('type', KEYS[5]).ok\n" \
    "if (lt ~= 'none' and lt ~= 'zset') or (qt ~= 'none' and qt ~= 'list') or (zt ~= 'none' and zt ~= 'zset') or (mt ~= 'none' and mt ~= 'string') then\n" \
    "  return redis.error_reply('WRONGTYPE the semaphore needs a sorted set at ' .. KEYS[1] .. ', a list at ' .. KEYS[3] .. ', a sorted set at ' .. KEYS[4] .. ' and a string at ' .. KEYS[5])\n" \
    "end\n" \
    "local t = redis.call('time')\n" \
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n" \
    "local function leases(v)\n" \
    "  return math.max(1, tonumber(string.match(v, ':s(%d+)$') or '1'))\n" \
    "end\n" \
    "local function tidy()\n" \
    "  local hl = redis.call('zrange', KEYS[1], -1, -1, 'WITHSCORES')[2]\n" \
    "  local wl = redis.call('zrange', KEYS[4], -1, -1, 'WITHSCORES')[2]\n" \
    "  if hl then\n" \
    "    redis.call('pexpireat', KEYS[1], tonumber(hl) + 1000)\n" \
    "  end\n" \
    "  if wl then\n" \
    "    redis.call('pexpireat', KEYS[4], tonumber(wl) + 1000)\n" \
    "    redis.call('pexpireat', KEYS[3], tonumber(wl) + 1000)\n" \
    "  else\n" \
    "    redis.call('del', KEYS[3])\n" \
    "  end\n" \
    "  if hl or wl then\n" \
    "    redis.call('pexpireat', KEYS[5], math.max(tonumber(hl or 0), tonumber(wl or 0)) + 1000)\n" \
    "  else\n" \
    "    redis.call('del', KEYS[5])\n" \
    "  end\n" \
    "end\n"

// The first writes: the holders whose leases expired and the waiters whose timeout passed are
// dropped (at most 100 waiters a call; `changed` says whether anyone was), and so are entries at
// the head of the queue without a timeout (written by someone else: nothing would time them
// out). Then `free`: max_leases less the leases held.
#define ZKCORO_SEM_PURGE \
    "local changed = redis.call('zremrangebyscore', KEYS[1], '-inf', now) > 0\n" \
    "for _, w in ipairs(redis.call('zrangebyscore', KEYS[4], '-inf', now, 'LIMIT', 0, 100)) do\n" \
    "  redis.call('lrem', KEYS[3], 0, w)\n" \
    "  redis.call('zrem', KEYS[4], w)\n" \
    "  changed = true\n" \
    "end\n" \
    "for _ = 1, 100 do\n" \
    "  local head = redis.call('lindex', KEYS[3], 0)\n" \
    "  if not head or redis.call('zscore', KEYS[4], head) then\n" \
    "    break\n" \
    "  end\n" \
    "  redis.call('lpop', KEYS[3])\n" \
    "  changed = true\n" \
    "end\n" \
    "local free = tonumber(ARGV[5])\n" \
    "for _, h in ipairs(redis.call('zrange', KEYS[1], 0, -1)) do\n" \
    "  free = free - leases(h)\n" \
    "end\n"

// `tell(room)`: the waiters at the head whose leases fit in `room` together (in queue order, up to
// the first that does not fit) are told, each on its process's channel, with its value; not we
// ourselves. The first refused PUBLISH's error text, or nil.
#define ZKCORO_SEM_TELL \
    "local function tell(room)\n" \
    "  local sum, err = 0, nil\n" \
    "  if room < 1 then\n" \
    "    return nil\n" \
    "  end\n" \
    "  for _, w in ipairs(redis.call('lrange', KEYS[3], 0, room - 1)) do\n" \
    "    sum = sum + leases(w)\n" \
    "    if sum > room then\n" \
    "      break\n" \
    "    end\n" \
    "    if w ~= ARGV[1] then\n" \
    "      local p = redis.pcall('publish', ARGV[4] .. string.match(w, '^[^:]*'), w)\n" \
    "      if type(p) == 'table' and p.err then\n" \
    "        err = err or p.err\n" \
    "      end\n" \
    "    end\n" \
    "  end\n" \
    "  return err\n" \
    "end\n"

// The queue is walked from its head only as far as needed: each entry wants a lease at least, so
// past max_leases + 1 entries none fits.
const lua_script& semaphore_acquire_script()
{
    static const lua_script s = sem_script(ZKCORO_FENCING_CHECK ZKCORO_SEM_BEGIN R"lua(local mx = redis.call('get', KEYS[5])
if mx and mx ~= ARGV[5] then
  return redis.error_reply('ZKMAXLEASES ' .. KEYS[5] .. ' says the semaphore has ' .. mx .. ' leases; this participant was made with ' .. ARGV[5])
end
)lua" ZKCORO_SEM_PURGE ZKCORO_SEM_TELL R"lua(local want = tonumber(ARGV[6])
local held = redis.call('zscore', KEYS[1], ARGV[1])
local fits = true
if not held then
  local ahead = 0
  for _, w in ipairs(redis.call('lrange', KEYS[3], 0, tonumber(ARGV[5]))) do
    if w == ARGV[1] then
      break
    end
    ahead = ahead + leases(w)
    if ahead + want > free then
      break
    end
  end
  fits = ahead + want <= free
end
if fits then
  if redis.call('zrem', KEYS[4], ARGV[1]) == 1 then
    redis.call('lrem', KEYS[3], 1, ARGV[1])
  end
)lua" ZKCORO_FENCED_TOKEN R"lua(  redis.call('zadd', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
  redis.call('set', KEYS[5], ARGV[5])
  if changed then
    if held then
      tell(free)
    else
      tell(free - want)
    end
  end
  tidy()
  return {1, n}
end
if not redis.call('zscore', KEYS[4], ARGV[1]) then
  redis.call('rpush', KEYS[3], ARGV[1])
end
redis.call('zadd', KEYS[4], now + tonumber(ARGV[3]), ARGV[1])
redis.call('set', KEYS[5], ARGV[5])
if changed then
  tell(free)
end
tidy()
local first = redis.call('zrange', KEYS[1], 0, 0, 'WITHSCORES')[2]
local left = -1
local head = redis.call('lindex', KEYS[3], 0)
local hs = head and redis.call('zscore', KEYS[4], head)
if hs then
  left = tonumber(hs) - now
end
return {0, redis.call('lpos', KEYS[3], ARGV[1]), first and tonumber(first) - now or -1, left})lua");
    return s;
}

const lua_script& semaphore_release_script()
{
    static const lua_script s = sem_script(ZKCORO_SEM_BEGIN R"lua(local r = 0
if redis.call('zrem', KEYS[1], ARGV[1]) == 1 then
  r = 1
end
if redis.call('zrem', KEYS[4], ARGV[1]) == 1 then
  redis.call('lrem', KEYS[3], 0, ARGV[1])
end
)lua" ZKCORO_SEM_PURGE ZKCORO_SEM_TELL R"lua(local e = tell(free)
tidy()
if e then
  return e
end
return r)lua");
    return s;
}

const lua_script& semaphore_renew_script()
{
    static const lua_script s = sem_script(ZKCORO_SEM_BEGIN R"lua(local s = redis.call('zscore', KEYS[1], ARGV[1])
if not s or tonumber(s) <= now then
  tidy()
  return 0
end
redis.call('zadd', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
tidy()
return 1)lua");
    return s;
}

#undef ZKCORO_SEM_TELL
#undef ZKCORO_SEM_PURGE
#undef ZKCORO_SEM_BEGIN

}  // namespace zkcoro::detail
