// Failover in a 3-node ensemble: the session and its ephemeral nodes survive the loss of the
// member the client is connected to.
#include "common.hpp"

using namespace zktest;
using namespace zkcoro;
using asio::awaitable;

namespace {

zk_ensemble& shared_ensemble()
{
    static zk_ensemble e(3);
    return e;
}

int member_of(const zk_ensemble& e, const std::string& server)
{
    for (int i = 0; i < e.size(); ++i)
        if (server == e.member_connect_string(i))
            return i;
    return -1;
}

}  // namespace

// Stop the member we are connected to: the client moves to another one with the same session.
TEST_CASE("a member dies: same session on another member, ephemeral node intact")
{
    auto& ens = shared_ensemble();
    ens.wait_for_quorum(60s);
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> awaitable<void> {
        client c(ioc.get_executor(), test_config(ens.connect_string(), 4000ms));
        client observer(ioc.get_executor(), test_config(ens.connect_string(), 4000ms));
        co_await c.async_connect();
        co_await observer.async_connect();
        auto sid = c.session().id;
        auto base = unique_path("failover");
        co_await c.async_create(base, "mine", create_mode::ephemeral);
        int member = member_of(ens, c.connected_server());
        REQUIRE_MESSAGE(member >= 0, "connected to " << c.connected_server());
        MESSAGE("connected to member " << member << ", leader is " << ens.leader());
        ens.stop(member);
        CHECK(co_await wait_for_state(c, session_state::suspended, 5000ms));
        CHECK(co_await wait_for_state(c, session_state::connected, 15000ms));
        CHECK(c.session().id == sid);
        int now = member_of(ens, c.connected_server());
        CHECK(now != member);
        CHECK(now >= 0);
        auto d = co_await c.async_get_data(base);
        CHECK(d.data == "mine");
        CHECK(d.stat.ephemeral_owner == sid);
        co_await c.async_remove(base);
        ens.restart(member);
        ens.wait_for_quorum(60s);
    }, 90s);
}

// Pause (SIGSTOP) the member we are connected to: the client gives up on it and moves on.
TEST_CASE("a member hangs: the client moves to another member")
{
    auto& ens = shared_ensemble();
    ens.wait_for_quorum(60s);
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> awaitable<void> {
        client c(ioc.get_executor(), test_config(ens.connect_string(), 4000ms));
        co_await c.async_connect();
        auto sid = c.session().id;
        int member = member_of(ens, c.connected_server());
        REQUIRE(member >= 0);
        ens.pause(member);
        CHECK(co_await wait_for_state(c, session_state::suspended, 6000ms));
        CHECK(co_await wait_for_state(c, session_state::connected, 15000ms));
        ens.resume(member);
        CHECK(c.session().id == sid);
        CHECK(member_of(ens, c.connected_server()) != member);
    }, 90s);
}
