// 03_two_processes: two processes contend for one lock path. The parent starts a second copy of
// this program, then both take the lock 10 times each; every holder checks that nobody else is
// inside by writing its pid into the lock's "owner" node while it holds the lock.
#include "example.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fmt/format.h>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;

extern char** environ;

asio::awaitable<int> co_main(zkcoro::client_config cfg, int argc, char** argv)
{
    bool child = argc > 2 && std::strcmp(argv[1], "--child") == 0;
    std::string path = child ? argv[2] : fmt::format("/zkcoro-demo/two-{}", ::getpid());
    pid_t peer = -1;
    if (!child) {
        std::string self = "/proc/self/exe";
        char* args[] = {argv[0], const_cast<char*>("--child"), path.data(), nullptr};
        if (posix_spawn(&peer, self.c_str(), nullptr, nullptr, args, environ) != 0) {
            fmt::print(stderr, "cannot start the second process\n");
            co_return 1;
        }
    }
    auto ex = co_await asio::this_coro::executor;
    zkcoro::client zk(ex, cfg);
    co_await zk.async_connect();
    zkcoro::mutex lock(zk, path);
    const std::string me = std::to_string(::getpid());
    int violations = 0;
    for (int i = 0; i < 10; ++i) {
        auto g = co_await lock.acquire(30s);
        if (!g) {
            fmt::print("{}: timed out\n", me);
            co_return 1;
        }
        // Inside: the marker must be ours for the whole hold.
        auto [ec, r] = co_await zk.async_create(path + "-owner", me, zkcoro::create_mode::ephemeral,
                                                asio::as_tuple(asio::use_awaitable));
        if (ec) {
            ++violations;
            fmt::print("{}: someone else is inside! ({})\n", me, ec.message());
        }
        fmt::print("process {} holds {} (fencing token {})\n", me, g->node_path(), g->fencing_token());
        asio::steady_timer t(ex, 20ms);
        co_await t.async_wait(asio::use_awaitable);
        if (!ec)
            co_await zk.async_remove(path + "-owner");
        co_await g->release();
    }
    co_await zk.async_close();
    int status = 0;
    if (peer > 0) {
        waitpid(peer, &status, 0);
        bool peer_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        fmt::print("{}: both processes done, {} violations here, peer {}\n", violations || !peer_ok ? "FAILED" : "ok",
                   violations, peer_ok ? "ok" : "failed");
        co_return violations || !peer_ok ? 1 : 0;
    }
    co_return violations ? 1 : 0;
}
