// The Redis read-write lock's Lua scripts (see redis/shared_scripts.hpp).
#include "redis/shared_scripts.hpp"

#include "redis/fencing_lua.hpp"
#include "redis/redis_impl.hpp"

namespace zkcoro::detail {

namespace {

lua_script rw_with_sha(std::string text)
{
    auto sha = script_sha1(text);
    return {std::move(text), std::move(sha)};
}

}  // namespace

// Every check before the first write (a failing command does not undo the writes before it):
// K a string, the readers and the writers sorted sets (or absent).
#define ZKCORO_RW_TYPES(r, w)                                                                      \
    "local kt = redis.call('type', KEYS[1]).ok\n"                                                 \
    "local rt = redis.call('type', KEYS[" #r "]).ok\n"                                            \
    "local wt = redis.call('type', KEYS[" #w "]).ok\n"                                            \
    "if (kt ~= 'none' and kt ~= 'string') or (rt ~= 'none' and rt ~= 'zset') or (wt ~= 'none' and wt ~= 'zset') then\n" \
    "  return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' must be a string, ' .. KEYS[" #r "] .. ' and ' .. KEYS[" #w "] .. ' sorted sets: the read-write lock')\n" \
    "end\n"
// The server's time in ms (`now`, from `t` = TIME), and the readers and waiting writers whose
// time has passed dropped (at most 100 of each a call).
#define ZKCORO_RW_PURGE(r, w)                                                                      \
    "local t = redis.call('time')\n"                                                              \
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"                     \
    "redis.call('zremrangebyscore', KEYS[" #r "], '-inf', now)\n"                                 \
    "redis.call('zremrangebyscore', KEYS[" #w "], '-inf', now)\n"
// A sorted set's key lives until its last member's time (so that it goes when every member
// crashed): `z` gets PEXPIRE (highest score - now + 1), when it has members.
#define ZKCORO_RW_KEEP(z)                                                                          \
    "local top = redis.call('zrange', KEYS[" #z "], -1, -1, 'WITHSCORES')\n"                      \
    "if top[2] then\n"                                                                            \
    "  redis.call('pexpire', KEYS[" #z "], math.max(tonumber(top[2]) - now, 0) + 1)\n"            \
    "end\n"
// ms until the earliest member of `z` runs out, or -1 (`left` + the name).
#define ZKCORO_RW_FIRST(z, name)                                                                   \
    "local " name " = -1\n"                                                                       \
    "local low = redis.call('zrange', KEYS[" #z "], 0, 0, 'WITHSCORES')\n"                        \
    "if low[2] then\n"                                                                            \
    "  " name " = math.max(tonumber(low[2]) - now, 0)\n"                                          \
    "end\n"

const lua_script& rw_read_script()
{
    static const lua_script s = rw_with_sha(ZKCORO_FENCING_CHECK ZKCORO_RW_TYPES(3, 4) ZKCORO_RW_PURGE(3, 4) R"lua(local held = redis.call('get', KEYS[1])
local mine = held and string.sub(held, 1, #ARGV[3]) == ARGV[3] and string.sub(held, -#ARGV[4]) == ARGV[4]
if not mine and not redis.call('zscore', KEYS[3], ARGV[1]) then
  if held then
    return {0, redis.call('pttl', KEYS[1]), held, -1}
  end
)lua" ZKCORO_RW_FIRST(4, "left") R"lua(  if left >= 0 then
    return {0, -1, '', left}
  end
end
)lua" ZKCORO_FENCED_TOKEN R"lua(redis.call('zadd', KEYS[3], now + tonumber(ARGV[2]), ARGV[1])
)lua" ZKCORO_RW_KEEP(3) R"lua(return {1, n})lua");
    return s;
}

const lua_script& rw_write_script()
{
    static const lua_script s = rw_with_sha(ZKCORO_FENCING_CHECK ZKCORO_RW_TYPES(3, 4) ZKCORO_RW_PURGE(3, 4) R"lua(local held = redis.call('get', KEYS[1])
if held == ARGV[1] or (not held and redis.call('zcard', KEYS[3]) == 0) then
  redis.call('zrem', KEYS[4], ARGV[1])
)lua" ZKCORO_FENCED_GRANT R"lua(
end
redis.call('zadd', KEYS[4], now + tonumber(ARGV[3]), ARGV[1])
)lua" ZKCORO_RW_KEEP(4) ZKCORO_RW_FIRST(3, "left") R"lua(if held then
  return {0, redis.call('pttl', KEYS[1]), held, left}
end
return {0, -1, '', left})lua");
    return s;
}

const lua_script& rw_release_script()
{
    static const lua_script s = rw_with_sha(ZKCORO_RW_TYPES(2, 3) R"lua(local r = 0
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('del', KEYS[1])
  r = 1
end
if redis.call('zrem', KEYS[2], ARGV[1]) == 1 then
  r = 1
end
local left = redis.call('zrem', KEYS[3], ARGV[1])
if r == 1 or left == 1 then
  local p = redis.pcall('publish', ARGV[2], 'released')
  if type(p) == 'table' and p.err then
    return p.err
  end
end
return r)lua");
    return s;
}

// A read lease past its time counts as gone even before a script dropped it (someone else may
// have been granted since): it is dropped, and the renewal fails.
const lua_script& rw_renew_script()
{
    static const lua_script s = rw_with_sha(R"lua(if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
if redis.call('type', KEYS[2]).ok ~= 'zset' then
  return 0
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.call('zscore', KEYS[2], ARGV[1])
if not s then
  return 0
end
if tonumber(s) <= now then
  redis.call('zrem', KEYS[2], ARGV[1])
  return 0
end
redis.call('zadd', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
)lua" ZKCORO_RW_KEEP(2) R"lua(return 1)lua");
    return s;
}

#undef ZKCORO_RW_FIRST
#undef ZKCORO_RW_KEEP
#undef ZKCORO_RW_PURGE
#undef ZKCORO_RW_TYPES

}  // namespace zkcoro::detail
