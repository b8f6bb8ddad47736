// A seed for the library's small pseudo-random generators (backoff jitter, the choice of a server
// to move to): the OS's randomness through getrandom(), as Boost.UUID's generator takes it.
// Not std::random_device: libstdc++ 12's reads RDRAND where the CPU has it, which no program can
// put its own randomness in place of; the simulation (tests/sim) defines getrandom() from its
// seed, so that a seed's run is repeatable. Users still get a random seed.
#ifndef ZKCORO_SRC_ASYNC_RANDOM_SEED_HPP
#define ZKCORO_SRC_ASYNC_RANDOM_SEED_HPP

#include <cstdint>
#include <random>

#include <sys/random.h>

namespace zkcoro::detail {

inline std::uint32_t random_seed()
{
    std::uint32_t v = 0;
    if (::getrandom(&v, sizeof v, 0) == static_cast<ssize_t>(sizeof v))
        return v;
    return std::random_device{}();  // getrandom failed (a kernel without it): the library's own
}

}  // namespace zkcoro::detail

#endif
