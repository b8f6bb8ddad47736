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
