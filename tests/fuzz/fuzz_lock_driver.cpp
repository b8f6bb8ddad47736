// Fuzz target for the lock object's driver (engine/lock_object.hpp, engine/lock_loop.cpp) on the
// fake backend and manual clock of lock_driver_rig.hpp: the first byte chooses the options
// (lingering, a batch time, local handoff), then each pair of bytes is one step of the script
// (an acquisition, the backend's grant, failure or dropped task, a release, a cancellation, a
// loss, someone queueing, time passing), checked at each step and at the end (one holder at a
// time, fencing tokens that never go back, every acquisition completed once, every node given
// back or lost, no timer armed for nobody). At most 2048 steps per input.
#include "fuzz_check.hpp"
#include "lock_driver_rig.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    if (size == 0)
        return 0;
    lock_driver_rig::driver_script script(data[0]);
    const char* failure = nullptr;
    std::size_t i = 1;
    for (; i + 1 < size && i < 4096 && !failure; i += 2)
        failure = script.step(data[i], data[i + 1]);
    if (!failure)
        failure = script.finish();
    if (failure)
        std::fprintf(stderr, "step %zu: %s\n", i / 2, failure);
    FUZZ_CHECK(failure == nullptr);
    return 0;
}
