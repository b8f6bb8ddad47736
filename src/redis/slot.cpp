// Redis Cluster's key-to-slot rule.
#include "redis/slot.hpp"

#include <array>

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

}  // namespace zkcoro::detail
