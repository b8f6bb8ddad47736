// 07_election_revocation_fencing: a leader latch, a revocable lock let go on request, and
// writes fenced two ways: a ZooKeeper transaction checked against the lock node, and an external
// resource that keeps the highest fencing token it has seen and refuses smaller ones.
#include "example.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fmt/format.h>

#include <unistd.h>

#include <cstdint>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

// A resource outside ZooKeeper (a storage service, a database row) that fences by token: it
// remembers the highest token it has accepted and refuses any smaller one, so a holder that
// paused and lost its lock cannot overwrite a newer holder's work.
class fenced_store {
public:
    bool write(std::int64_t token, std::string value)
    {
        if (token < highest_)
            return false;
        highest_ = token;
        value_ = std::move(value);
        return true;
    }
    const std::string& value() const { return value_; }

private:
    std::int64_t highest_ = 0;
    std::string value_;
};

}  // namespace

asio::awaitable<int> co_main(zkcoro::client_config cfg, int, char**)
{
    auto ex = co_await asio::this_coro::executor;
    zkcoro::client zk(ex, cfg);
    co_await zk.async_connect();
    const auto base = fmt::format("/zkcoro-demo/election-{}", ::getpid());
    int failures = 0;

    // 1. Leader election: this process is the only participant, so it leads at once.
    zkcoro::leader_latch_options lo;
    lo.id = fmt::format("example-{}", ::getpid());
    zkcoro::leader_latch latch(zk, base + "/leader", lo);
    auto term = co_await latch.await_leadership(10s);
    fmt::print("leader: {} (node {}, token {})\n", term.has_value(), term ? term->node_path() : "-",
               term ? term->fencing_token() : 0);
    failures += !term;
    co_await latch.async_close(asio::use_awaitable);

    // 2. Revocation: a revocable holder is asked to let go, and does.
    zkcoro::mutex_options ro;
    ro.revocable = true;
    zkcoro::mutex shared(zk, base + "/shared", ro);
    auto g = co_await shared.acquire();
    co_await zkcoro::async_request_revoke(zk, g.node_path());  // another process would do this
    co_await g.async_wait_revocation(asio::use_awaitable);
    fmt::print("revocation requested: {}; releasing\n", g.revocation_requested());
    co_await g.release();

    // 3. Fenced writes. In ZooKeeper: the transaction commits only while our lock node exists.
    const auto config_node = base + "-config";
    co_await zk.async_create(config_node, "v0", zkcoro::create_mode::persistent);
    zkcoro::mutex m(zk, base + "/config-lock");
    auto first = co_await m.acquire();
    std::vector<zkcoro::multi_op> ops{zkcoro::set_data_op{config_node, "v1", -1}};
    co_await first.async_multi(std::move(ops));
    const auto stale_token = first.fencing_token();
    // The lock node goes, as when the session expired while this holder was paused (here it is
    // deleted by hand): the same kind of transaction is now refused.
    co_await zk.async_remove(first.node_path());
    std::vector<zkcoro::multi_op> late{zkcoro::set_data_op{config_node, "stale", -1}};
    auto [ec, r] = co_await first.async_multi(std::move(late), asio::as_tuple(asio::use_awaitable));
    fmt::print("fenced write without the lock node: {}\n", ec ? ec.message() : "accepted (wrong!)");
    failures += ec != zkcoro::client_errc::lock_lost;
    co_await first.release();  // a lost lock's release succeeds
    // Outside ZooKeeper: the resource refuses a token older than the last one it saw.
    fenced_store store;
    auto second = co_await m.acquire();
    const bool newer = store.write(second.fencing_token(), "from the second holder");
    const bool stale = store.write(stale_token, "from the first holder, paused");
    fmt::print("external store: newer token accepted {}, stale token accepted {}, value '{}'\n", newer, stale,
               store.value());
    failures += !newer || stale;
    co_await second.release();
    co_await zk.async_remove(config_node);
    co_await zk.async_close(asio::as_tuple(asio::use_awaitable));
    co_return failures == 0 ? 0 : 1;
}
