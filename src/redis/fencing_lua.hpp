// The fencing counter's rule in Lua (internal): one text for every Redis lock's acquire script
// (the mutex's, the fair lock's, the read-write lock's), so that a token drawn by any of them
// exceeds every earlier grant's on the same counter.
#ifndef ZKCORO_SRC_REDIS_FENCING_LUA_HPP
#define ZKCORO_SRC_REDIS_FENCING_LUA_HPP

// The check (KEYS[2], the counter) comes before any write: a failing command does not undo the
// writes before it.
#define ZKCORO_FENCING_CHECK \
    "local f = redis.call('get', KEYS[2])\n" \
    "if f and (not string.match(f, '^%d+$') or #f > 16 or tonumber(f) >= 9007199254740992) then\n" \
    "  return redis.error_reply('ZKFENCING ' .. KEYS[2] .. ' holds a value that is not a fencing counter (an integer below 2^53)')\n" \
    "end\n"
// The token (needs `f` from the check and `t`, the server's TIME): n = max(counter + 1, TIME in
// microseconds), written to the counter (KEYS[2]) before anything the grant writes after it.
#define ZKCORO_FENCED_TOKEN \
    "local n = tonumber(t[1]) * 1000000 + tonumber(t[2])\n" \
    "if f and tonumber(f) + 1 > n then\n" \
    "  n = tonumber(f) + 1\n" \
    "end\n" \
    "redis.call('set', KEYS[2], string.format('%d', n))\n"
// An exclusive grant: the token, then the key (KEYS[1]) set to our value (ARGV[1]) with the TTL
// in ms (ARGV[2]); the reply {1, token}.
#define ZKCORO_FENCED_GRANT \
    ZKCORO_FENCED_TOKEN \
    "redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])\n" \
    "return {1, n}"

#endif
