// zkcoro::mutex: a reentrant distributed mutex on Curator's InterProcessMutex layout.
#ifndef ZKCORO_MUTEX_HPP
#define ZKCORO_MUTEX_HPP

#include <zkcoro/basic_mutex.hpp>
#include <zkcoro/client.hpp>
#include <zkcoro/detail/config.hpp>
#include <zkcoro/lock_options.hpp>

#include <memory>
#include <string>

namespace zkcoro {

namespace detail {
struct access;
class lock_object;
}  // namespace detail

/// The backend of mutex (and of shared_mutex's sides and the semaphores' inner mutexes):
/// ZooKeeper, through a zkcoro::client.
struct zookeeper_lock_backend {
    /// The ZooKeeper client.
    using client_type = client;
    /// The client's executor.
    using executor_type = client::executor_type;
};

/// A reentrant mutex shared by every process that uses the same path, zkcoro's or Curator's
/// InterProcessMutex: ephemeral-sequential nodes `<path>/_c_<uuid>-lock-<seq>`; the lowest
/// sequence holds; each waiter watches only its predecessor.
///
/// Its acquisition members (acquire, try_acquire, async_acquire, async_participants, the
/// counters) are basic_mutex's, shared with redis_mutex. Reentrancy is per task (one co_spawn'd
/// coroutine chain) and per mutex object: the same task acquiring N times holds one node and
/// needs N releases. Tasks of this process waiting on one object share one node and hand the
/// lock to each other in memory (mutex_options::local_handoff).
///
/// The client must outlive the mutex and its guards' releases.
///
/// \par Thread safety
/// Distinct objects: safe. Shared objects: safe (any task on any thread may acquire).
class ZKCORO_API mutex : public basic_mutex<zookeeper_lock_backend> {
public:
    /// A mutex at `path` on client `c`; nothing is sent until the first acquisition.
    mutex(client& c, std::string path, mutex_options opts = {});
    /// Moves the mutex; the moved-from object may only be destroyed.
    mutex(mutex&&) noexcept;
    ~mutex();

    /// The lock's path.
    const std::string& path() const noexcept;
    /// True for the read side of a shared_mutex.
    bool is_read_side() const noexcept;

private:
    friend struct detail::access;
    explicit mutex(std::shared_ptr<detail::lock_object> state) noexcept;
};

}  // namespace zkcoro

#endif
