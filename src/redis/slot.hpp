// Redis Cluster's key-to-slot rule (internal): CRC16 (XMODEM) of the key's hash tag, mod 16384;
// the key a command is routed by, and the lock key's hash tag.
#ifndef ZKCORO_SRC_REDIS_SLOT_HPP
#define ZKCORO_SRC_REDIS_SLOT_HPP

#include <zkcoro/redis.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace zkcoro::detail {

constexpr int cluster_slots = 16384;

// CRC16/XMODEM (polynomial 0x1021, initial 0, no reflection), as the cluster specification's
// key_hash_slot uses: crc16("123456789") == 0x31C3.
std::uint16_t crc16_xmodem(std::string_view data) noexcept;

// The part of `key` that is hashed: what lies between the first '{' and the first '}' after it,
// when that is not empty; else the whole key ("{}x" hashes whole, "{{a}}" hashes "{a").
std::string_view hash_tag(std::string_view key) noexcept;

// The slot of `key`: crc16_xmodem(hash_tag(key)) mod 16384.
inline int key_slot(std::string_view key) noexcept { return crc16_xmodem(hash_tag(key)) & (cluster_slots - 1); }

// The key a command is routed by: EVAL, EVALSHA (and their _RO forms), FCALL: the first key when
// numkeys > 0; commands without a key (PING, INFO, WAIT, PUBLISH, CLUSTER, SCRIPT, ...): none
// (any master); OBJECT, MEMORY, BITOP: the word after the subcommand; XREAD, XREADGROUP: the
// first word after STREAMS; every other command: its first argument.
std::optional<std::string_view> routing_key(std::span<const std::string_view> args);

// The lock key on a cluster: `key` itself when it has a hash tag ({...} with something inside),
// else "{" + key + "}", so that the lock's keys (<key>, <key>:fencing) and its channel share one
// slot. On one server or with Sentinel, the key is used as given.
std::string cluster_lock_key(std::string_view key);

// The one naming rule of every Redis recipe (redis_mutex, redis_fair_mutex, redis_shared_mutex,
// redis_semaphore, and so the multi-lock's members): on a redis+cluster:// client a non-empty
// name is cluster_lock_key(name) (K becomes {K}); elsewhere the name as given. Every recipe on
// one name thus names one key K (the mutexes' key, the read-write lock's write key) and one
// prefix P (fair_prefix(K)) on every deployment, and they exclude each other where they should.
std::string recipe_key(const redis_url& url, std::string name);

// Where a lock on `key` lives, for log lines: "redis://HOST:PORT", "the master 'NAME' of the
// sentinels at HOST:PORT,..." or "Redis Cluster slot N (seeds HOST:PORT,...)".
std::string lock_site(const redis_url& url, std::string_view key);

}  // namespace zkcoro::detail

#endif
