// What a run of `zklock LOCKPATH -- COMMAND` needs of its backend (ZooKeeper or Redis): the lock
// object, the connection, the acquisition (with whatever it shows while it waits), the still-held
// check, the lease, the release, the command's environment and the close. The run itself, the
// signals, the messages' frame and the exit statuses are the same for both (bootstrap.cpp,
// hold_loop.cpp).
#ifndef ZKCORO_TOOLS_ZKLOCK_LOCK_BACKEND_HPP
#define ZKCORO_TOOLS_ZKLOCK_LOCK_BACKEND_HPP

#include "run.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace zklock {

class lock_backend {
public:
    virtual ~lock_backend() = default;
    lock_backend(const lock_backend&) = delete;
    lock_backend& operator=(const lock_backend&) = delete;

    // 0. The lock object(s) of LOCKPATH, made in the run's coroutine (a bad path or key throws
    // there, and the bootstrap maps it). They go in close().
    virtual void make_lock() = 0;

    // 1. Connect. A failure's message (its exit status is exit_for_connect's); once connected,
    // what is said (ZooKeeper: the session file is written too).
    virtual asio::awaitable<zkcoro::error_code> connect() = 0;
    virtual std::string connect_failure(const zkcoro::error_code& ec) const = 0;
    virtual void connected() = 0;

    // 2. Acquire within `wait` (zero: try once). ZooKeeper shows the queue while it waits: on a
    // terminal (`tty`) one line refreshed in place, with -v off a terminal each change.
    virtual asio::awaitable<acquired> acquire(clock::duration wait, bool tty) = 0;
    // Why the acquisition failed, after "cannot acquire LOCKPATH: ".
    virtual std::string acquire_failure(const acquired& got) const = 0;

    // 3. While held. A round trip that completes without error only while the lock is held
    // (ZooKeeper: a transaction fenced by the lock node; Redis: a PING, by whose reply the
    // lease's own TTL clock has had its say). Used after zklock was stopped (still_held).
    virtual asio::awaitable<zkcoro::error_code> probe(zkcoro::guard& g) = 0;
    // Whether zklock, stopped this long, surely lost the lock whatever the probe says (Redis: the
    // key may have expired if the stop outlasted what a renewal just before it could cover).
    virtual bool lost_by_stop(clock::duration stopped_for) const = 0;
    // The lease: the negotiated session timeout, or the key's TTL. The server can give the lock
    // to another holder 2/3 of it after our last heartbeat or renewal at the earliest.
    virtual std::chrono::milliseconds lease() const = 0;
    virtual std::string_view lost_why() const = 0;  // why a lock is lost, for the loss message

    // zklock's environment plus what the command needs to fence what it writes (the same on both
    // backends: from the guard).
    std::vector<std::string> command_environment(const zkcoro::guard& g) const;

    // 4. Releases every guard (deletes its node or key), each within `limit`. Returns what went
    // wrong ("" if nothing): a release error is never dropped.
    asio::awaitable<std::string> release_all(std::vector<zkcoro::guard>& guards, std::chrono::milliseconds limit);
    // What becomes of a lock whose release failed, for the message.
    virtual std::string_view unreleased() const = 0;

    // 5. The end: the lock object(s) go, then the session or the connection is closed, bounded.
    // False if it was not closed in time (the bootstrap then leaves by _Exit).
    virtual bool close(asio::io_context& ioc) = 0;

protected:
    explicit lock_backend(const options& o) : o_(o) {}
    // What to add to the message of a refused request, after "; " ("" nothing): ZooKeeper's ZNOAUTH
    // names the ACL and the fix.
    virtual std::string refusal_hint(const zkcoro::error_code& ec) const = 0;

    const options& o_;
};

// The backend of a run, by its connect string (redis:// and redis+sentinel://: Redis). Its client
// is made here, on `ioc`.
std::unique_ptr<lock_backend> make_zookeeper_backend(asio::io_context& ioc, const options& o);
#ifdef ZKLOCK_REDIS
std::unique_ptr<lock_backend> make_redis_backend(asio::io_context& ioc, const options& o);
#endif

}  // namespace zklock

#endif
