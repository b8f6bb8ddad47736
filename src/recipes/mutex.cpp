// zkcoro::mutex: Curator's InterProcessMutex, the lock object with the mutex rule.
#include "engine/acquisition.hpp"
#include "engine/diagnostics.hpp"
#include "engine/lock_object.hpp"

#include <zkcoro/detail/access.hpp>
#include <zkcoro/mutex.hpp>

#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

namespace zkcoro {

mutex::mutex(client& c, std::string path, mutex_options opts)
    : state_(std::make_shared<detail::lock_object>(c, std::move(path), std::move(opts), detail::recipe_params{}))
{
}

mutex::mutex(std::shared_ptr<detail::lock_object> state) noexcept : state_(std::move(state)) {}

mutex::mutex(mutex&&) noexcept = default;

// A node that lingers goes with its mutex, rather than at the end of the window.
mutex::~mutex()
{
    if (state_)
        detail::end_linger(state_);
}

const std::string& mutex::path() const noexcept { return state_->path; }
client::executor_type mutex::get_executor() const noexcept { return state_->zk.get_executor(); }
bool mutex::is_read_side() const noexcept { return state_->recipe.base_name == detail::read_marker; }

std::uint64_t mutex::local_handoffs() const
{
    std::lock_guard lk(state_->m);
    return state_->metrics.local_handoffs;
}

lock_metrics mutex::metrics() const
{
    std::lock_guard lk(state_->m);
    return state_->metrics;
}

std::size_t mutex::hold_count(owner_id owner) const { return state_->held_count(owner); }

asio::awaitable<guard> mutex::acquire()
{
    auto g = co_await acquire(std::chrono::steady_clock::duration::max());
    co_return std::move(*g);
}

asio::awaitable<std::optional<guard>> mutex::acquire(std::chrono::steady_clock::duration timeout)
{
    auto me = co_await this_task::id();
    // use_awaitable and a catch, not as_tuple: the coroutine frame of every waiting task stays as
    // small as it was (as_tuple made it about 100 bytes larger, measured by the bench's scale).
    try {
        co_return co_await async_acquire(me, timeout, asio::use_awaitable);
    } catch (const boost::system::system_error& e) {
        detail::throw_failure(state_->zk, "acquire", state_->path, e.code());
    }
}

asio::awaitable<std::optional<guard>> mutex::try_acquire()
{
    return acquire(std::chrono::steady_clock::duration::zero());
}

void mutex::start_acquire(owner_id o, std::chrono::steady_clock::duration t,
                          detail::any_handler<void(error_code, std::optional<guard>)> handler)
{
    state_->acquire(o, detail::deadline_after(t),
                    std::make_shared<detail::op_state<std::optional<guard>>>(std::move(handler), get_executor()));
}

void mutex::start_participants(detail::any_handler<void(error_code, std::vector<participant>)> handler)
{
    state_->participants(std::make_shared<detail::op_state<std::vector<participant>>>(std::move(handler), get_executor()));
}

namespace detail {

mutex access::make_mutex(std::shared_ptr<lock_object> obj) { return mutex(std::move(obj)); }

const std::shared_ptr<lock_object>& access::object_of(const mutex& m) noexcept { return m.state_; }

}  // namespace detail

}  // namespace zkcoro
