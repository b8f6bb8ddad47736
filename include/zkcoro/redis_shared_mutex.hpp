// zkcoro::redis_shared_mutex: a read-write lock on one Redis server (or the master Sentinel names,
// or one shard of a Redis Cluster): readers share, a writer excludes everyone. The same guard as
// the other locks: one lease per hold, one lost signal, one fencing token.
#ifndef ZKCORO_REDIS_SHARED_MUTEX_HPP
#define ZKCORO_REDIS_SHARED_MUTEX_HPP

#include <zkcoro/basic_mutex.hpp>
#include <zkcoro/detail/config.hpp>
#include <zkcoro/redis.hpp>
#include <zkcoro/redis_mutex.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace zkcoro {

/// Options of a redis_shared_mutex.
struct redis_shared_mutex_options {
    /// How long each hold (a reader's lease, the writer's key) lives without renewal: a crashed
    /// reader's or writer's share frees itself after this. 100 ms to 24 h.
    std::chrono::milliseconds ttl{10000};
    /// As redis_mutex_options::safety_margin (zero: a fifth of the TTL).
    std::chrono::milliseconds safety_margin{0};
    /// How long a waiting writer holds back new readers without coming back: a waiting write
    /// acquisition renews its mark every third of it; the mark of one that does not (crashed,
    /// cut off) runs out after it, and readers enter again. Zero: the TTL. 100 ms to 24 h.
    std::chrono::milliseconds writer_timeout{0};
};

/// A read-write lock on one Redis key. Readers share; a writer excludes readers and writers;
/// a waiting writer is not starved by readers that come after it: while a writer waits, new
/// readers wait too (writers are preferred: readers can wait behind a stream of writers).
/// Writers among themselves are not ordered (whoever tries first once the lock is free).
/// - The keys: the key itself (K: the writer's value while a writer holds, with its TTL, as a
///   redis_mutex's key; on a cluster `{key}` when the key has no hash tag, as a redis_mutex's)
///   and, under the prefix P (the key when it has a hash tag `{...}`, else `{key}`: every key on
///   the key's cluster slot), `P:fencing` (the fencing counter, shared by
///   both sides), `P:readers` (a sorted set: each reader's value and when its lease ends),
///   `P:writers` (a sorted set: each waiting writer and when its mark runs out) and the channel
///   `P:released`. The sorted sets expire with their last member.
/// - One script per step (acquire-read, acquire-write, release, renew), each atomic on the
///   server; each drops the readers and writers whose time has passed. Every grant draws a
///   fencing token max(counter + 1, the server's TIME in microseconds), as redis_mutex's: a
///   writer's token exceeds every earlier grant's, read or write.
/// - Waiting: on the release channel (every release publishes), the holder's TTL, the earliest
///   reader's lease end (a writer) or the earliest waiting writer's mark (a reader), and at most a
///   third of the writer timeout (a writer renews its mark then).
/// - Both sides are reentrant per task. Downgrade: the task holding the write lock may take the
///   read lock (granted at once, even with writers waiting), then release the write lock and keep
///   reading. Upgrade (read held, write asked by the same task) fails at once with
///   client_errc::upgrade_not_supported.
/// - Each acquisition queues on the server in its own right (no in-process handoff).
/// - Cancellation, the deadline and a failure take a waiting writer's mark away (and give back a
///   grant its last attempt may have made). When everyone has left, only `P:fencing` remains.
/// - Lease, renewal, the lost signal, transient failures and WAIT for replicas: as redis_mutex.
///   A redis_mutex on the same key excludes this lock's writers but not its readers: do not mix.
/// The client must outlive the lock and its guards.
///
/// \par Thread safety
/// Distinct objects: safe. Shared objects: safe (any task on any thread may acquire).
class ZKCORO_API redis_shared_mutex {
public:
    /// One side of the lock: a basic_mutex, usable wherever a Redis lock is (e.g. a multi_lock).
    class ZKCORO_API side : public basic_mutex<redis_lock_backend> {
    public:
        /// Moves the side's lock object; the moved-from side may only be destroyed.
        side(side&&) noexcept;
        ~side();

    private:
        friend class redis_shared_mutex;
        explicit side(std::shared_ptr<detail::lock_object> state) noexcept;
    };

    /// Bad keys (empty, over 1024 bytes), TTLs and writer timeouts make every acquisition fail
    /// with bad_key/bad_ttl.
    redis_shared_mutex(redis_client& c, std::string key, redis_shared_mutex_options opts = {});
    /// Moves the lock; the moved-from object may only be destroyed.
    redis_shared_mutex(redis_shared_mutex&&) noexcept;
    ~redis_shared_mutex();

    /// The read side.
    side& reader() noexcept { return *reader_; }
    /// The write side.
    side& writer() noexcept { return *writer_; }

    /// Takes the read side, waiting as long as it takes; throws on error.
    asio::awaitable<guard> acquire_read() { return reader_->acquire(); }
    /// The read side, or an empty optional when `timeout` passed first.
    asio::awaitable<std::optional<guard>> acquire_read(std::chrono::steady_clock::duration timeout)
    {
        return reader_->acquire(timeout);
    }
    /// Takes the write side, waiting as long as it takes; throws on error.
    asio::awaitable<guard> acquire_write() { return writer_->acquire(); }
    /// The write side, or an empty optional when `timeout` passed first.
    asio::awaitable<std::optional<guard>> acquire_write(std::chrono::steady_clock::duration timeout)
    {
        return writer_->acquire(timeout);
    }

    /// The lock's key (K, the write key): its name, or `{name}` on a cluster when the name has no
    /// hash tag, as redis_mutex's key: a redis_mutex and this lock's writer on one name exclude
    /// each other.
    const std::string& key() const noexcept;

private:
    std::unique_ptr<side> reader_;
    std::unique_ptr<side> writer_;
};

}  // namespace zkcoro

#endif
