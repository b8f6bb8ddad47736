// detail::access: the one friend of the public classes (see include/zkcoro/detail/access.hpp).
#include <zkcoro/client.hpp>
#include <zkcoro/detail/access.hpp>
#include <zkcoro/guard.hpp>
#include <zkcoro/mutex.hpp>
#include <zkcoro/watch.hpp>

namespace zkcoro::detail {

client access::share(const client& c) { return client(c.impl_, false); }

void access::log(const client& c, log_level level, std::string_view message) { c.log(level, message); }

guard access::make_guard(std::shared_ptr<lease> l, owner_id owner) { return guard(std::move(l), owner); }

watch access::make_watch(std::shared_ptr<watch_state> st) { return watch(std::move(st)); }

mutex access::make_mutex(std::shared_ptr<lock_object> obj) { return mutex(std::move(obj)); }

const std::shared_ptr<lock_object>& access::object_of(const mutex& m) noexcept { return m.state_; }

}  // namespace zkcoro::detail
