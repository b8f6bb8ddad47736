// The Redis lock's Lua scripts and its waiting policy (internal), beside lock.cpp.
#ifndef ZKCORO_SRC_REDIS_LOCK_SCRIPTS_HPP
#define ZKCORO_SRC_REDIS_LOCK_SCRIPTS_HPP

#include <zkcoro/redis.hpp>

#include <chrono>
#include <string>
#include <string_view>

namespace zkcoro::detail {

// A script and its SHA1 for EVALSHA. Function-local statics: initialised on first use (safe from
// any translation unit's static initialisation) and alive until exit, as redis_impl::eval needs.
struct lua_script {
    std::string text;
    std::string sha;
};

// KEYS: key, fencing key. ARGV: our value, ttl ms. Takes the key when free (or ours): see the
// definition for the fencing token and the checks before the first write.
const lua_script& acquire_script();
// KEYS: key. ARGV: our value, channel. Compare-and-delete, then PUBLISH: 1 (deleted), 0 (not
// ours), or the refused PUBLISH's error text (deleted, nobody told).
const lua_script& release_script();
// KEYS: key. ARGV: our value, ttl ms. PEXPIRE only while the key holds our value.
const lua_script& renew_script();

// The fair lock's (redis_fair_mutex) scripts. Its keys share one hash tag (fair_prefix).
// KEYS: key, fencing key, queue (list of waiters' values), timeouts (sorted set: value -> the
// server's time in ms after which the waiter counts as gone). ARGV: our value, ttl ms, waiter
// timeout ms, channel prefix. Drops the waiters whose timeout passed; grants the key (as
// acquire_script, {1, fencing token}) when it is free and the queue is empty or starts with us,
// or when it holds our value already; else queues us (once) and sets our timeout to now + the
// waiter timeout: {0, pttl, the holder's value or "", our position, ms left of the head's
// timeout or -1}. When the key is free and another heads the queue, tells that one.
const lua_script& fair_acquire_script();
// KEYS: key, queue, timeouts. ARGV: our value, channel prefix. Deletes the key while it holds our
// value, takes us out of the queue, drops the waiters whose timeout passed, and when the key is
// then free PUBLISHes the head's value on `prefix + <the head's process name>`: 1 (deleted), 0
// (not ours: we only left the queue), or a refused PUBLISH's error text. Serves the release, and
// the leaving of a waiter (cancelled, timed out, failed), whose last attempt may have granted it.
const lua_script& fair_release_script();

// The prefix of the fair lock's keys other than the key itself: `name` when it has a hash tag
// (a '{', later a '}', something between), else "{name}" (cluster_lock_key, on every
// deployment). Both hash to the same cluster slot as the key `name`.
std::string fair_prefix(std::string_view name);
// A fair lock's value: new_value's "<process>:<task hex>:<n>" + ":q". A redis_mutex waiter
// behind it polls (it is not a publishing_holder's: a fair release publishes to the fair queue).
bool fair_holder(std::string_view value);

// This process's name in the values it writes ("<uuid>", the first part of "<uuid>:<task>:<n>").
// A child made by fork() draws a new one: with its parent's name, its values could equal the
// parent's, and its compare-and-delete remove the parent's key.
const std::string& process_name();

// Whether a holder's value is one of ours ("<uuid>:<task hex>:<n>"): such a holder publishes its
// release; any other (redis-py's Lock) publishes nothing.
bool publishing_holder(std::string_view value);

// The next pause before trying again behind a holder that publishes nothing: 5 ms doubling up to
// 50 ms, each drawn from [3/4, 5/4] of it (so that waiters do not come back in step). `backoff`
// starts at zero and carries the state between calls.
std::chrono::milliseconds next_poll(std::chrono::milliseconds& backoff);

// The next pause before an acquisition tries again after a transient failure (a failover, a
// replica not yet attached): 50 ms doubling up to 1 s, each drawn from [1/2, 1] of it.
std::chrono::milliseconds next_retry(std::chrono::milliseconds& backoff);

// Whether an acquisition that failed with `ec` tries again while its deadline has time left: the
// server or the sentinels may answer otherwise a moment later (a failover under way, a replica
// re-attaching, a server loading its data). Not: refused credentials or permissions, an unknown
// master name, a bad URL, key or TTL, a closed client, OOM, WRONGTYPE, any other error reply.
bool transient_acquire_error(const error_code& ec) noexcept;

}  // namespace zkcoro::detail

#endif
