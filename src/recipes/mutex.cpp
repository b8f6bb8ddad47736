// zkcoro::mutex: Curator's InterProcessMutex, the lock object with the mutex rule. Its acquisition
// members are basic_mutex's (recipes/basic_mutex.cpp).
#include "zookeeper/lock.hpp"

#include <zkcoro/detail/access.hpp>
#include <zkcoro/mutex.hpp>

namespace zkcoro {

mutex::mutex(client& c, std::string path, mutex_options opts)
    : basic_mutex(detail::make_zk_lock(c, std::move(path), std::move(opts), detail::recipe_params{}))
{
}

mutex::mutex(std::shared_ptr<detail::lock_object> state) noexcept : basic_mutex(std::move(state)) {}

mutex::mutex(mutex&&) noexcept = default;

// A node that lingers goes with its mutex, rather than at the end of the window.
mutex::~mutex()
{
    if (state())
        state()->end_linger();
}

const std::string& mutex::path() const noexcept { return state()->path; }
bool mutex::is_read_side() const noexcept { return state()->recipe.base_name == detail::read_marker; }

namespace detail {

mutex access::make_mutex(std::shared_ptr<lock_object> obj) { return mutex(std::move(obj)); }

const std::shared_ptr<lock_object>& access::object_of(const mutex& m) noexcept { return m.state_; }

}  // namespace detail

}  // namespace zkcoro
