// Negative control (issue 34, item 6): "a release that forgets to wake local waiters", as a
// test-only variant of the library, with no switch in it. The program defines
// zkcoro::detail::lock_machine::released, the engine's decision on a release
// (src/engine/lock_machine.cpp), and exports it (-rdynamic) as capi_sim.cpp does the C client's
// functions: libzkcoro calls it through its PLT (the class is exported and the library built with
// -fPIC and default visibility, so GCC keeps the call interposable even inside the one unity
// translation unit: `objdump -d` shows lock_object::step calling `released@plt`, in the plain
// and the sanitizer build), and the dynamic linker binds that call to the program's definition.
// The definition calls the library's own (the symbol's next definition, dlsym(RTLD_NEXT)), so the
// machine's state changes exactly as in users' programs. With the control off
// (local_wake_control.hpp) it returns that action as it is: every other case runs the real
// release. With it on, an action that hands the node to a task of ours waiting in memory (`grant`)
// or starts it on the backend (`promote`) becomes that of a release with nobody of ours waiting:
// the node goes back (`give_back`) and the waiter, which the machine has taken off its queue, is
// never woken. The hold ends and the node is deleted as in a correct release; only the wake is
// dropped.
//
// Why this seam: ld's --wrap rewrites only the references of the objects it links, and the call
// is inside libzkcoro (lock_loop.cpp's, in the unity object), so it would need a second copy of
// the engine compiled into the program; the lock driver's fake backend (tests/fuzz/
// lock_driver_rig.hpp) drives a lock object directly, not the mutex on the simulated ZooKeeper.
#include "local_wake_control.hpp"

#include "engine/lock_machine.hpp"

#include <dlfcn.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace zksim {

namespace {

// Set and read on the seed's one thread, where the library runs.
bool forget_local_wake = false;
long wakes_dropped = 0;

}  // namespace

void sim_forget_local_wake(bool on)
{
    forget_local_wake = on;
    if (on)
        wakes_dropped = 0;
}

bool sim_forgets_local_wake()
{
    return forget_local_wake;
}

long sim_local_wakes_dropped()
{
    return wakes_dropped;
}

}  // namespace zksim

namespace zkcoro::detail {

namespace {

using released_fn = lock_action (lock_machine::*)(machine_owner, lock_machine::time_point);

// An Itanium C++ ABI pointer to a non-virtual member function: the function's address and a
// `this` adjustment (0 here).
struct member_fn_bits {
    void* ptr;
    std::ptrdiff_t adj;
};
static_assert(sizeof(member_fn_bits) == sizeof(released_fn));

// The library's lock_machine::released: the next definition of this program's symbol (its name
// asked of the dynamic linker, not spelt here).
released_fn library_released()
{
    static const released_fn fn = [] {
        const released_fn self = &lock_machine::released;
        member_fn_bits bits{};
        std::memcpy(&bits, &self, sizeof bits);
        Dl_info info{};
        void* sym = nullptr;
        if (::dladdr(bits.ptr, &info) != 0 && info.dli_sname)
            sym = ::dlsym(RTLD_NEXT, info.dli_sname);
        if (!sym || sym == bits.ptr) {
            std::fprintf(stderr, "local_wake_control: no library definition of lock_machine::released (%s)\n",
                         info.dli_sname ? info.dli_sname : "the program's symbol not exported: link with -rdynamic");
            std::abort();
        }
        bits = {sym, 0};
        released_fn f{};
        std::memcpy(&f, &bits, sizeof f);
        return f;
    }();
    return fn;
}

}  // namespace

lock_action lock_machine::released(machine_owner owner, time_point now)
{
    lock_action a = (this->*library_released())(owner, now);
    if (!zksim::sim_forgets_local_wake())
        return a;
    if (a.what != lock_action::kind::grant && a.what != lock_action::kind::promote)
        return a;
    // Forgotten: the node goes back as if nobody of ours waited; the waiter stays asleep.
    ++zksim::wakes_dropped;
    a.what = lock_action::kind::give_back;
    a.give_back = true;
    a.waiter = 0;
    a.owner = 0;
    a.batch_time_ended = false;
    return a;
}

}  // namespace zkcoro::detail
