#pragma once
// A Redis lock holder in a forked child process, for test_redis_lock.cpp: it crashes (SIGKILL) or
// freezes (SIGSTOP) while it holds, which no holder inside the test process can do.
#include <zkcoro/redis_mutex.hpp>

#include <fence_store.hpp>

#include <boost/asio.hpp>
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace zktest {

namespace forked {
namespace asio = boost::asio;
using namespace std::chrono_literals;

// A holder in a child process: acquires `key`, writes its fencing token to `report`, then waits
// for a byte on `go`; then writes its token to the fence store (if given) and exits. The child
// never returns into the test runner.
inline pid_t fork_holder(const std::string& url, const std::string& key, std::chrono::milliseconds ttl, int report,
                         int go, std::string store, bool check)
{
    pid_t pid = ::fork();
    if (pid != 0)
        return pid;
    int status = 1;
    try {
        asio::io_context ioc;
        zkcoro::redis_client rc(ioc.get_executor(), url);
        zkcoro::redis_mutex_options o;
        o.ttl = ttl;
        zkcoro::redis_mutex m(rc, key, o);
        std::int64_t token = 0;
        asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
            auto g = co_await m.acquire(10s);
            if (!g)
                co_return;
            token = g->fencing_token();
            (void)!::write(report, &token, sizeof token);
            char c;
            (void)!::read(go, &c, 1);  // blocks the whole process, as a frozen one would
            if (!store.empty())
                zkfault::write_token(store, "stale", token, check);
            std::_Exit(0);
        }, asio::detached);
        ioc.run_for(20s);
    } catch (...) {
    }
    std::_Exit(status);
}

}  // namespace forked

// The forked holder and its two pipes, owned by the test: after the fork the parent keeps only
// its ends (the read end of `report`, the write end of `go`), so a child that dies before it
// reports makes read_token see end-of-file at once instead of blocking. The destructor runs on
// every path, a failed REQUIRE included: it wakes a stopped child (SIGCONT), kills it (SIGKILL)
// and reaps it, so no child outlives its test case.
class child_holder {
public:
    child_holder(const std::string& url, const std::string& key, std::chrono::milliseconds ttl,
                 const std::string& store = {}, bool check = false)
    {
        int report[2], go[2];
        REQUIRE(::pipe(report) == 0);
        REQUIRE(::pipe(go) == 0);
        report_ = report[0];
        go_ = go[1];
        pid_ = forked::fork_holder(url, key, ttl, report[1], go[0], store, check);
        ::close(report[1]);
        ::close(go[0]);
        REQUIRE(pid_ > 0);
    }
    child_holder(const child_holder&) = delete;
    child_holder& operator=(const child_holder&) = delete;
    ~child_holder()
    {
        if (pid_ > 0) {
            ::kill(pid_, SIGCONT);  // a SIGSTOPped child is killed just as well, but say it plainly
            ::kill(pid_, SIGKILL);
            int status = 0;
            ::waitpid(pid_, &status, 0);
        }
        ::close(report_);
        ::close(go_);
    }

    pid_t pid() const { return pid_; }

    // The holder's fencing token, once it holds; fails the case when it does not report within
    // `limit` (it failed to acquire, died, or hangs).
    std::int64_t read_token(std::chrono::milliseconds limit = std::chrono::seconds(15))
    {
        pollfd p{report_, POLLIN, 0};
        const int ready = ::poll(&p, 1, static_cast<int>(limit.count()));
        REQUIRE_MESSAGE(ready == 1, "the forked holder reported no token within " << limit.count() << " ms");
        std::int64_t token = 0;
        const auto n = ::read(report_, &token, sizeof token);
        REQUIRE_MESSAGE(n == sizeof token, "the forked holder ended before it held the lock (read returned " << n << ")");
        return token;
    }

    // Lets the holder go on (it writes to its store, if any, and exits).
    void go()
    {
        const char c = 'g';
        REQUIRE(::write(go_, &c, 1) == 1);
    }

    // Waits at most 5 s for the child to exit (then kills it) and returns its wait status.
    int reap()
    {
        int status = 0;
        for (int i = 0; i < 500; ++i) {
            if (::waitpid(pid_, &status, WNOHANG) == pid_) {
                pid_ = -1;
                return status;
            }
            ::usleep(10'000);
        }
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        pid_ = -1;
        return status;
    }

private:
    pid_t pid_ = -1;
    int report_ = -1;
    int go_ = -1;
};

}  // namespace zktest
