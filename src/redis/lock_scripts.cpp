// The Redis lock's Lua scripts and its waiting policy.
#include "redis/lock_scripts.hpp"

#include "redis/redis_impl.hpp"

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
    static const lua_script s = with_sha(R"lua(local f = redis.call('get', KEYS[2])
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
return {1, n})lua");
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
