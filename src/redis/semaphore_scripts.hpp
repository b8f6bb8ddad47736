// The Redis semaphore's (redis_semaphore) Lua scripts (internal), beside redis/semaphore.cpp.
#ifndef ZKCORO_SRC_REDIS_SEMAPHORE_SCRIPTS_HPP
#define ZKCORO_SRC_REDIS_SEMAPHORE_SCRIPTS_HPP

#include "redis/lock_scripts.hpp"

namespace zkcoro::detail {

// The three scripts take the same keys and arguments (all under one hash tag, P):
// KEYS: P:leases (sorted set: a holder's value -> the server's time in ms its leases expire at),
// P:fencing, P:queue (list of the waiters' values, in arrival order), P:timeouts (sorted set: a
// waiter's value -> the server's time in ms after which it counts as gone), P:max (max_leases).
// ARGV: our value ("<process>:<task>:<n>:s<leases>": a value says how many leases it holds or
// wants), the TTL in ms, the waiter timeout in ms, the channel prefix (P:wake:), max_leases,
// the number of leases asked for.
// Each first checks the keys' types (and acquire the counter and P:max) before any write, then
// drops the holders whose leases expired and the waiters whose timeout passed.

// Grants when the leases still free cover ours and those of every waiter queued before us (or
// the value holds already: an earlier attempt's grant whose reply was lost): {1, fencing token},
// the token by the shared counter rule (redis/fencing_lua.hpp). Else queues us (once) and sets
// our timeout to now + the waiter timeout: {0, our position, ms until the first holder's leases
// expire or -1, ms left of the head's timeout or -1}. Sets P:max; a P:max that holds another
// count fails with "ZKMAXLEASES ...". When it dropped anyone, tells the waiters that now fit.
const lua_script& semaphore_acquire_script();
// Gives our leases back (or leaves the queue), then tells the waiters at the head whose leases
// now fit, each by a message with its value on P:wake:<its process>: 1 (held), 0 (not held: we
// only left the queue, or the leases had expired), or a refused PUBLISH's error text. Serves the
// release, and the leaving of a waiter whose last attempt may have granted it.
const lua_script& semaphore_release_script();
// Extends our leases to now + TTL while they have not expired: 1, else 0 (and, as the other two,
// sets the keys' expiry: P:max goes when nobody is left).
const lua_script& semaphore_renew_script();

}  // namespace zkcoro::detail

#endif
