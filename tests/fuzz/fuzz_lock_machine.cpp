// Fuzz target for detail::lock_machine, the lock object's decisions. The first byte chooses the
// configuration (batch bound 3 or 63, a batch time or none, linger or none); then each pair of
// bytes is one step (an acquisition, the backend's grant or failure, a release, time passing with
// the timers that fire, a cancellation, a loss, someone queueing behind our node). The reference
// model of lock_machine_model.hpp predicts every decision and checks the invariants it lists (one
// holder at a time, FIFO grants, no waiter completed twice, the batch bound, no linger while
// others queue). At most 4096 steps per input.
#include "fuzz_check.hpp"
#include "lock_machine_model.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    if (size == 0)
        return 0;
    lock_machine_model::driver d(lock_machine_model::config_from(data[0]));
    for (std::size_t i = 1; i + 1 < size && i < 8192; i += 2) {
        if (auto f = d.step(data[i], data[i + 1])) {
            std::fprintf(stderr, "step %zu: %s\n", i / 2, f);
            FUZZ_CHECK(f == nullptr);
        }
    }
    return 0;
}
