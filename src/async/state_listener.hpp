// Told of each change of a connection's session state (internal): one registration for the life
// of whoever listens, where a wait would be one operation per change of interest.
#ifndef ZKCORO_SRC_ASYNC_STATE_LISTENER_HPP
#define ZKCORO_SRC_ASYNC_STATE_LISTENER_HPP

namespace zkcoro::detail {

struct state_listener {
    virtual ~state_listener() = default;
    // The state changed (posted to the client's executor: no lock of the client's is held).
    virtual void state_changed() = 0;
};

}  // namespace zkcoro::detail

#endif
