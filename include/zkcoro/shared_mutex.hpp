// zkcoro::shared_mutex: a read-write lock on Curator's InterProcessReadWriteLock layout.
#ifndef ZKCORO_SHARED_MUTEX_HPP
#define ZKCORO_SHARED_MUTEX_HPP

#include <zkcoro/mutex.hpp>

#include <memory>
#include <string>

namespace zkcoro {

/// Readers share, a writer excludes everyone, in arrival order (a waiting writer is not starved
/// by later readers). Nodes: `<path>/_c_<uuid>-__READ__<seq>` and `..._c_<uuid>-__WRIT__<seq>`,
/// one sequence space, so zkcoro and Curator's InterProcessReadWriteLock contend correctly.
///
/// Both sides are reentrant per task. Downgrade: the task holding the write lock may take the
/// read lock at once (its read node reuses the write node's sequence, as Curator does), then
/// release the write lock and keep reading. Upgrade (read held, write asked) would wait forever
/// behind its own read node: it fails at once with client_errc::upgrade_not_supported.
///
/// Neither side hands over in memory (mutex_options::local_handoff is ignored): a handoff between
/// our writers would let them pass readers queued before them. Every task has its own node.
///
/// \par Thread safety
/// Distinct objects: safe. Shared objects: safe.
class ZKCORO_API shared_mutex {
public:
    /// A read-write lock at `path` (Curator's InterProcessReadWriteLock layout).
    shared_mutex(client& c, std::string path, mutex_options opts = {});

    /// The two sides, usable wherever a mutex is (e.g. in a multi_lock).
    mutex& reader() noexcept { return *reader_; }
    /// The write side.
    mutex& writer() noexcept { return *writer_; }

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

    /// The lock's path.
    const std::string& path() const noexcept { return writer_->path(); }
    /// The executor of the lock's client.
    client::executor_type get_executor() const noexcept { return writer_->get_executor(); }

    /// The queue, holders first (the readers that hold, or the writer), then the waiters, each
    /// with its mode (read, write, or foreign). Handler: void(error_code, std::vector<participant>).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, std::vector<participant>))
                  CompletionToken = detail::default_token>
    auto async_participants(CompletionToken&& token = {})
    {
        return writer_->async_participants(std::forward<CompletionToken>(token));
    }

private:
    std::unique_ptr<mutex> reader_;
    std::unique_ptr<mutex> writer_;
};

}  // namespace zkcoro

#endif
