// Redis Cluster's key-to-slot rule, the routing key of a command, the lock key's tag.
#include "redis/slot.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>

namespace zkcoro::detail {

namespace {

// The byte-at-a-time table of CRC16/XMODEM, built at compile time.
constexpr std::array<std::uint16_t, 256> crc16_table()
{
    std::array<std::uint16_t, 256> t{};
    for (unsigned i = 0; i < 256; ++i) {
        unsigned crc = i << 8;
        for (int b = 0; b < 8; ++b)
            crc = (crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1;
        t[i] = static_cast<std::uint16_t>(crc & 0xffff);
    }
    return t;
}

constexpr auto crc16_lookup = crc16_table();

bool word_is(std::string_view word, std::string_view upper)
{
    return word.size() == upper.size() &&
           std::equal(word.begin(), word.end(), upper.begin(),
                      [](char a, char b) { return std::toupper(static_cast<unsigned char>(a)) == b; });
}

}  // namespace

std::uint16_t crc16_xmodem(std::string_view data) noexcept
{
    std::uint16_t crc = 0;
    for (unsigned char c : data)
        crc = static_cast<std::uint16_t>((crc << 8) ^ crc16_lookup[((crc >> 8) ^ c) & 0xff]);
    return crc;
}

std::string_view hash_tag(std::string_view key) noexcept
{
    const auto open = key.find('{');
    if (open == std::string_view::npos)
        return key;
    const auto close = key.find('}', open + 1);
    if (close == std::string_view::npos || close == open + 1)
        return key;
    return key.substr(open + 1, close - open - 1);
}

std::optional<std::string_view> routing_key(std::span<const std::string_view> args)
{
    if (args.size() < 2)
        return std::nullopt;
    const auto cmd = args[0];
    if (word_is(cmd, "EVAL") || word_is(cmd, "EVALSHA") || word_is(cmd, "EVAL_RO") || word_is(cmd, "EVALSHA_RO") || word_is(cmd, "FCALL") ||
        word_is(cmd, "FCALL_RO")) {
        if (args.size() < 4 || args[2] == "0")
            return std::nullopt;
        return args[3];
    }
    for (std::string_view keyless :
         {"PING", "ECHO", "INFO", "TIME", "WAIT", "CLUSTER", "COMMAND", "CONFIG", "CLIENT", "DBSIZE", "FLUSHALL",
          "FLUSHDB", "SCRIPT", "FUNCTION", "PUBLISH", "PUBSUB", "RANDOMKEY", "SCAN", "KEYS", "LASTSAVE", "ROLE",
          "LATENCY", "SLOWLOG", "DEBUG", "SAVE", "BGSAVE", "BGREWRITEAOF", "HELLO", "AUTH", "SELECT", "READONLY",
          "READWRITE", "ACL", "MODULE", "SWAPDB", "LOLWUT", "RESET", "FAILOVER", "REPLICAOF", "SLAVEOF", "MONITOR",
          "SHUTDOWN", "WAITAOF"})
        if (word_is(cmd, keyless))
            return std::nullopt;
    if (word_is(cmd, "OBJECT") || word_is(cmd, "MEMORY") || word_is(cmd, "BITOP"))
        return args.size() > 2 ? std::optional(args[2]) : std::nullopt;
    if (word_is(cmd, "XREAD") || word_is(cmd, "XREADGROUP")) {
        for (std::size_t i = 1; i + 1 < args.size(); ++i)
            if (word_is(args[i], "STREAMS"))
                return args[i + 1];
        return std::nullopt;
    }
    return args[1];
}

std::string cluster_lock_key(std::string_view key)
{
    if (hash_tag(key).size() != key.size())
        return std::string(key);
    return fmt::format("{{{}}}", key);
}

std::string recipe_key(const redis_url& url, std::string name)
{
    if (url.cluster_nodes.empty() || name.empty())
        return name;
    return cluster_lock_key(name);
}

std::string lock_site(const redis_url& url, std::string_view key)
{
    auto list = [](const std::vector<redis_url::endpoint>& es) {
        std::string out;
        for (const auto& e : es)
            out += fmt::format("{}{}:{}", out.empty() ? "" : ",", e.host, e.port);
        return out;
    };
    if (!url.cluster_nodes.empty())
        return fmt::format("Redis Cluster slot {} (seeds {})", key_slot(key), list(url.cluster_nodes));
    if (!url.sentinels.empty())
        return fmt::format("the master '{}' of the sentinels at {}", url.master_name, list(url.sentinels));
    return fmt::format("redis://{}:{}", url.host, url.port);
}

}  // namespace zkcoro::detail
