// The fenced floor's scripts (bench/redis_fenced_scripts.hpp) against the library's
// (src/redis/lock_scripts.cpp): the floor sends copies of the texts without linking the library,
// and is a floor of the same work only while they are equal. Exit 0 when both are, else 1 with
// the first differing line of each copy that differs. Run by the test bench_fenced_scripts and by
// bench/run_redis.sh before the floor.
#include "redis_fenced_scripts.hpp"

#include "redis/lock_scripts.hpp"

#include <cstdio>
#include <string_view>

namespace {

// Whether `copy` equals `lib`; says where they part otherwise.
bool same(std::string_view name, std::string_view copy, std::string_view lib)
{
    if (copy == lib)
        return true;
    std::size_t at = 0;
    while (at < copy.size() && at < lib.size() && copy[at] == lib[at])
        ++at;
    const std::size_t line_start = copy.substr(0, at).rfind('\n') == std::string_view::npos
                                       ? 0
                                       : copy.substr(0, at).rfind('\n') + 1;
    auto line_of = [line_start](std::string_view s) {
        auto rest = line_start < s.size() ? s.substr(line_start) : std::string_view{};
        return rest.substr(0, rest.find('\n'));
    };
    const auto a = line_of(copy), b = line_of(lib);
    std::fprintf(stderr,
                 "bench/redis_fenced_scripts.hpp: the %.*s script differs from src/redis/lock_scripts.cpp's "
                 "at byte %zu (lengths %zu and %zu):\n  bench copy: %.*s\n  library:    %.*s\n"
                 "copy the library's text into bench/redis_fenced_scripts.hpp\n",
                 static_cast<int>(name.size()), name.data(), at, copy.size(), lib.size(), static_cast<int>(a.size()),
                 a.data(), static_cast<int>(b.size()), b.data());
    return false;
}

}  // namespace

int main()
{
    const bool acquire = same("acquire", zkbench::fenced::acquire_script, zkcoro::detail::acquire_script().text);
    const bool release = same("release", zkbench::fenced::release_script, zkcoro::detail::release_script().text);
    if (!acquire || !release)
        return 1;
    std::printf("fenced floor scripts: equal to the library's (acquire %zu bytes, release %zu bytes)\n",
                zkbench::fenced::acquire_script.size(), zkbench::fenced::release_script.size());
    return 0;
}
