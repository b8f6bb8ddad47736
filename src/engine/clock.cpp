// The lock object's clock in the library: std::chrono::steady_clock and asio's steady timers.
#include "engine/clock.hpp"

#include <boost/asio/steady_timer.hpp>

#include <array>
#include <optional>

namespace zkcoro::detail {

namespace {

class steady_engine_clock final : public engine_clock {
public:
    explicit steady_engine_clock(asio::any_io_executor ex) : ex_(std::move(ex)) {}

    time_point now() const override { return std::chrono::steady_clock::now(); }

    void arm(engine_timer which, time_point at, std::function<void()> fire) override
    {
        auto& t = timers_[static_cast<std::size_t>(which)];
        if (!t)
            t.emplace(ex_);
        t->expires_at(at);  // a wait still pending completes as aborted
        t->async_wait([fire = std::move(fire)](error_code ec) {
            if (!ec)
                fire();
        });
    }

    void cancel(engine_timer which) override
    {
        if (auto& t = timers_[static_cast<std::size_t>(which)])
            t->cancel();
    }

private:
    asio::any_io_executor ex_;
    std::array<std::optional<asio::steady_timer>, 2> timers_;
};

}  // namespace

std::unique_ptr<engine_clock> make_steady_clock(asio::any_io_executor ex)
{
    return std::make_unique<steady_engine_clock>(std::move(ex));
}

}  // namespace zkcoro::detail
