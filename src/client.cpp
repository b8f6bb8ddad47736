// zkcoro::client, the facade: construction, observers, and the session operations (connect,
// close, wait for a state), which go to the session layer. The node operations are in
// client_requests.cpp, watches in watch.cpp.
#include "driver/client_impl.hpp"

#include <zkcoro/client.hpp>
#include <zkcoro/detail/access.hpp>
#include <zkcoro/error.hpp>

#include <fmt/format.h>

namespace zkcoro {

using detail::op_state;

client::client(executor_type ex, client_config cfg)
    : impl_(std::make_shared<detail::client_impl>(std::move(ex), std::move(cfg)))
{
}

client::client(std::shared_ptr<detail::client_impl> impl, bool owning) noexcept
    : impl_(std::move(impl)), owning_(owning)
{
}

client::client(client&& other) noexcept : impl_(std::move(other.impl_)), owning_(other.owning_) {}

client& client::operator=(client&& other) noexcept
{
    if (this != &other) {
        if (owning_)
            close();
        impl_ = std::move(other.impl_);
        owning_ = other.owning_;
    }
    return *this;
}

client::~client()
{
    if (owning_)
        close();
}

client::executor_type client::get_executor() const noexcept { return impl_->executor; }

void client::close() noexcept
{
    if (impl_)
        impl_->close(nullptr);
}

session_state client::state() const noexcept { return impl_->state_atomic.load(); }
session_credentials client::session() const { return impl_->credentials(); }
std::chrono::milliseconds client::session_timeout() const noexcept
{
    return std::chrono::milliseconds(impl_->negotiated_timeout_ms.load());
}
std::string client::connected_server() const { return impl_->connected_server(); }
std::uint64_t client::session_generation() const noexcept { return impl_->generation_atomic.load(); }
std::chrono::steady_clock::time_point client::last_heard() const noexcept
{
    return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(impl_->last_heard_ns.load()));
}
client::counters client::stats() const noexcept
{
    return {impl_->requests_sent.load(), impl_->watch_events.load(), impl_->ensemble_changes.load()};
}
std::vector<std::string> client::servers() const { return impl_->servers(); }

void client::log(log_level level, std::string_view message) const { impl_->log(level, std::string(message)); }

void client::start(op_connect, detail::any_handler<void(error_code)> h)
{
    auto op = detail::make_pooled<op_state<>>(std::move(h), impl_->executor);
    if (impl_->chroot().empty() || impl_->chroot_verified)
        return impl_->connect(std::move(op));
    // With a chroot every request is relative to it: check once that it exists, so that a wrong
    // chroot is its own error instead of ZNONODE on every later request.
    op->bind_cancellation();
    auto impl = impl_;
    auto connected = detail::make_pooled<op_state<>>(
        [impl, op](error_code ec) {
            if (ec)
                return void(op->complete(ec));
            client(impl, false).async_exists("/", [impl, op](error_code ec2, exists_result r) {
                if (!ec2 && !r.stat) {
                    impl->log(log_level::error, fmt::format("the chroot {} does not exist on the server",
                                                            impl->chroot()));
                    ec2 = client_errc::chroot_not_found;
                } else if (!ec2) {
                    impl->chroot_verified = true;
                }
                op->complete(ec2);
            });
        },
        impl_->executor);
    impl_->connect(std::move(connected));
}

void client::start(op_close, detail::any_handler<void(error_code)> h)
{
    impl_->close(detail::make_pooled<op_state<>>(std::move(h), impl_->executor));
}

void client::start(op_wait_state w, detail::any_handler<void(error_code, session_state)> h)
{
    impl_->wait_state(w.known, detail::make_pooled<op_state<session_state>>(std::move(h), impl_->executor));
}

namespace detail {

client access::share(const client& c) { return client(c.impl_, false); }
client access::no_client() { return client(nullptr, false); }

void access::log(const client& c, log_level level, std::string_view message) { c.log(level, message); }
std::string access::holder_label(const client& c) { return c.impl_ ? c.impl_->cfg.holder_label : std::string(); }
bool access::detect_deadlocks(const client& c) { return c.impl_ && c.impl_->cfg.detect_deadlocks; }
std::uint64_t access::connections(const client& c) noexcept
{
    return c.impl_ ? c.impl_->connections.load(std::memory_order_acquire) : 0;
}

void access::listen_state(const client& c, std::weak_ptr<state_listener> l)
{
    if (c.impl_)
        c.impl_->listen_state(std::move(l));
}

error_code access::closed_reason(const client& c)
{
    return c.impl_ ? c.impl_->closed_reason() : make_error_code(client_errc::closed);
}

}  // namespace detail

}  // namespace zkcoro
