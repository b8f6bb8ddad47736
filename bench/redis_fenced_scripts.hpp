// The Redis lock's acquire and release scripts, as data, for the fenced floor
// (bench/redis_raw_bench.cpp, issue 33): copies of the texts in src/redis/lock_scripts.cpp, which
// the floor sends with hiredis without linking the library. bench/redis_script_check.cpp (the
// test bench_fenced_scripts, and bench/run_redis.sh before the floor runs) fails when a copy no
// longer equals the library's text: copy the new text here.
#ifndef ZKCORO_BENCH_REDIS_FENCED_SCRIPTS_HPP
#define ZKCORO_BENCH_REDIS_FENCED_SCRIPTS_HPP

#include <string_view>

namespace zkbench::fenced {

// KEYS: key, fencing key (<key>:fencing). ARGV: our value, ttl ms. {1, fencing token} when
// granted, the token max(counter + 1, the server's TIME in microseconds); else {0, pttl, holder}.
constexpr std::string_view acquire_script = R"lua(local f = redis.call('get', KEYS[2])
if f and (not string.match(f, '^%d+$') or #f > 16 or tonumber(f) >= 9007199254740992) then
  return redis.error_reply('ZKFENCING ' .. KEYS[2] .. ' holds a value that is not a fencing counter (an integer below 2^53)')
end
local held = redis.call('get', KEYS[1])
if held and held ~= ARGV[1] then
  return {0, redis.call('pttl', KEYS[1]), held}
end
local t = redis.call('time')
local n = tonumber(t[1]) * 1000000 + tonumber(t[2])
if f and tonumber(f) + 1 > n then
  n = tonumber(f) + 1
end
redis.call('set', KEYS[2], string.format('%d', n))
redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, n})lua";

// KEYS: key. ARGV: our value, channel (<key>:released). Compare-and-delete, then PUBLISH: 1
// (deleted), 0 (not ours), or the refused PUBLISH's error text.
constexpr std::string_view release_script = R"lua(if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('del', KEYS[1])
  local p = redis.pcall('publish', ARGV[2], 'released')
  if type(p) == 'table' and p.err then
    return p.err
  end
  return 1
end
return 0)lua";

}  // namespace zkbench::fenced

#endif
