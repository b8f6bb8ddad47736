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
    fixture_options opts{.name = "failover", .clients = 2, .connect = ens.connect_string(), .limit = 90s};
    run_with_clients(opts, [&](fixture& f) -> awaitable<void> {
        auto [c, observer] = f.clients<2>();
        auto& base = f.path;
        auto sid = c.session().id;
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
    });
}

// Pause (SIGSTOP) the member we are connected to: the client gives up on it and moves on.
TEST_CASE("a member hangs: the client moves to another member")
{
    auto& ens = shared_ensemble();
    ens.wait_for_quorum(60s);
    run_with_clients({.name = "hang", .connect = ens.connect_string(), .limit = 90s}, [&](fixture& f) -> awaitable<void> {
        auto& c = f.client();
        auto sid = c.session().id;
        int member = member_of(ens, c.connected_server());
        REQUIRE(member >= 0);
        ens.pause(member);
        CHECK(co_await wait_for_state(c, session_state::suspended, 6000ms));
        CHECK(co_await wait_for_state(c, session_state::connected, 15000ms));
        ens.resume(member);
        CHECK(c.session().id == sid);
        CHECK(member_of(ens, c.connected_server()) != member);
    });
}
