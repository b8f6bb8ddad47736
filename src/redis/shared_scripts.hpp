// The Redis read-write lock's (redis_shared_mutex) Lua scripts (internal), one per step. Every
// key of one lock shares one hash tag (fair_prefix: P): the write key K (the lock's key itself,
// holding the writer's value with its TTL, as a redis_mutex's key), the fencing counter
// P:fencing, P:readers (a sorted set: each reader's value -> the server's time in ms its lease
// ends at) and P:writers (a sorted set: each waiting writer's value -> the server's time in ms
// after which it counts as gone). Each script first checks every key's type (WRONGTYPE, before
// any write), then drops the readers and waiting writers whose time has passed.
#ifndef ZKCORO_SRC_REDIS_SHARED_SCRIPTS_HPP
#define ZKCORO_SRC_REDIS_SHARED_SCRIPTS_HPP

#include "redis/lock_scripts.hpp"

namespace zkcoro::detail {

// KEYS: K, fencing, readers, writers. ARGV: our value, ttl ms, our owner's prefix
// ("<process>:<task hex>:"), the suffix of our lock object's writers (":<n>w"). Grants a read
// lease ({1, fencing token}: we join the readers, until now + ttl) when K is free and no writer
// waits, or when K is held by our own owner through our own lock object (a downgrade), or when
// we are a reader already (a lost reply). Else {0, K's pttl (or -1), K's
// value (or ""), ms until the earliest waiting writer's mark runs out (or -1)}.
const lua_script& rw_read_script();
// KEYS: K, fencing, readers, writers. ARGV: our value, ttl ms, waiter timeout ms. Grants the
// write lock ({1, fencing token}: K set to our value with the TTL, our waiting mark removed) when
// K is free and no reader holds, or when K holds our value already (a lost reply). Else marks
// us as a waiting writer until now + the waiter timeout (readers arriving from now on wait) and
// replies {0, K's pttl (or -1), K's value (or ""), ms until the earliest reader's lease ends (or
// -1)}.
const lua_script& rw_write_script();
// KEYS: K, readers, writers. ARGV: our value, channel. Deletes K while it holds our value, takes
// us out of the readers and the waiting writers, and when any of that happened PUBLISHes on the
// channel (every waiter of every process tries again): 1 (a hold of ours ended), 0 (none: at
// most a waiting mark removed), or a refused PUBLISH's error text.
const lua_script& rw_release_script();
// KEYS: K, readers. ARGV: our value, ttl ms. Extends K while it holds our value, or our read
// lease while it has not run out: 1, else 0 (the hold is gone).
const lua_script& rw_renew_script();

}  // namespace zkcoro::detail

#endif
