// fault-fence write STORE ID TOKEN [--no-check]
//
// Writes a fencing token to a fence store (fence_store.hpp) for holders that cannot call the
// C++ function, i.e. CuratorHolder.java. Prints "accepted" or "rejected"; exit 0 for either,
// 2 on bad usage or an I/O error.
#include "fence_store.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstring>
#include <exception>
#include <string_view>

int main(int argc, char** argv)
{
    if (argc < 5 || argc > 6 || std::string_view(argv[1]) != "write" ||
        (argc == 6 && std::string_view(argv[5]) != "--no-check")) {
        fmt::print(stderr, "usage: fault-fence write STORE ID TOKEN [--no-check]\n");
        return 2;
    }
    const std::string_view t = argv[4];
    std::int64_t token = 0;
    auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), token);
    if (ec != std::errc{} || ptr != t.data() + t.size()) {
        fmt::print(stderr, "fault-fence: TOKEN must be an integer, got '{}'\n", t);
        return 2;
    }
    try {
        const auto r = zkfault::write_token(argv[2], argv[3], token, argc != 6);
        fmt::print("{}\n", r == zkfault::write_outcome::accepted ? "accepted" : "rejected");
        return 0;
    } catch (const std::exception& e) {
        fmt::print(stderr, "fault-fence: {}\n", e.what());
        return 2;
    }
}
