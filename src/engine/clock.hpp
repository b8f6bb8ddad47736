// The lock object's clock and its two timers (internal): asio's steady timers on the object's
// executor in the library, a manual clock in the driver's tests (tests/unit/test_lock_driver.cpp),
// which then run every path of the engine without a server and without waiting.
#ifndef ZKCORO_SRC_ENGINE_CLOCK_HPP
#define ZKCORO_SRC_ENGINE_CLOCK_HPP

#include <zkcoro/detail/api.hpp>
#include <zkcoro/detail/config.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

namespace zkcoro::detail {

// The lock object's two timers: the earliest deadline of the tasks waiting in memory, and the end
// of a lingering node's window.
enum class engine_timer : std::uint8_t { deadline, linger };

class ZKCORO_API engine_clock {
public:
    using time_point = std::chrono::steady_clock::time_point;

    virtual ~engine_clock() = default;
    virtual time_point now() const = 0;
    // Arms `which` to call `fire` at `at`. Arming it again, or cancelling it, drops the pending
    // call. Called with the lock object's lock held: `fire` is called later, never from here.
    virtual void arm(engine_timer which, time_point at, std::function<void()> fire) = 0;
    virtual void cancel(engine_timer which) = 0;
};

// std::chrono::steady_clock, and one asio::steady_timer per timer, made at its first use, whose
// completions run on `ex`.
ZKCORO_API std::unique_ptr<engine_clock> make_steady_clock(asio::any_io_executor ex);

}  // namespace zkcoro::detail

#endif
