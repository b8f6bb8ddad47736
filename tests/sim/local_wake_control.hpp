// Negative control (issue 34, item 6; test only): a release that forgets to wake the tasks of its
// process waiting in memory. local_wake_control.cpp, linked into a simulation program, takes the
// place of the library's lock_machine::released (ELF interposition, as capi_sim.hpp's functions)
// and, while this is on, drops the hand-off or the start of the next local waiter from what a
// release does. Off unless a case turns it on; the library's own release runs either way.
#ifndef ZKCORO_TESTS_SIM_LOCAL_WAKE_CONTROL_HPP
#define ZKCORO_TESTS_SIM_LOCAL_WAKE_CONTROL_HPP

namespace zksim {

void sim_forget_local_wake(bool on);
bool sim_forgets_local_wake();
// The wakes dropped since the control was last turned on.
long sim_local_wakes_dropped();

}  // namespace zksim

#endif
