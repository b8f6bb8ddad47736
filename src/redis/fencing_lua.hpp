// The fencing counter's rule in Lua (internal): one text for every Redis lock's grant (the mutex's
// and the fair lock's in redis/lock_scripts.cpp, the semaphore's in redis/semaphore_scripts.cpp).
// Macros of string literals, spliced into each script's text. Never #undef'd: the library is one
// translation unit (a unity build), where a second file including this header after an #undef
// would find them gone.
#ifndef ZKCORO_SRC_REDIS_FENCING_LUA_HPP
#define ZKCORO_SRC_REDIS_FENCING_LUA_HPP

// The check (KEYS[2], the counter) comes before any write: `f`, the counter's value or false.
#define ZKCORO_FENCING_CHECK \
    "local f = redis.call('get', KEYS[2])\n" \
    "if f and (not string.match(f, '^%d+$') or #f > 16 or tonumber(f) >= 9007199254740992) then\n" \
    "  return redis.error_reply('ZKFENCING ' .. KEYS[2] .. ' holds a value that is not a fencing counter (an integer below 2^53)')\n" \
    "end\n"
// The next token (needs `f` from the check and `t`, the server's TIME): `n` := max(counter + 1,
// TIME in microseconds), written to the counter (KEYS[2]) before the grant's own write.
#define ZKCORO_FENCE_NEXT \
    "local n = tonumber(t[1]) * 1000000 + tonumber(t[2])\n" \
    "if f and tonumber(f) + 1 > n then\n" \
    "  n = tonumber(f) + 1\n" \
    "end\n" \
    "redis.call('set', KEYS[2], string.format('%d', n))\n"
// A key's grant: the next token, then the key (KEYS[1], ARGV[1] our value, ARGV[2] the TTL in ms).
#define ZKCORO_FENCED_GRANT \
    ZKCORO_FENCE_NEXT \
    "redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])\n" \
    "return {1, n}"

#endif
