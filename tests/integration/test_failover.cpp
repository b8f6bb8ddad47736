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

// Member i serves again (after a SIGCONT it may have to sync with the leader first).
asio::awaitable<bool> serving(const zk_ensemble& e, int i, std::chrono::milliseconds limit)
{
    co_return co_await eventually(
        [&]() -> awaitable<bool> {
            const std::string srvr = e.four_letter(i, "srvr", 1000ms);
            co_return srvr.find("Mode: follower") != std::string::npos ||
                srvr.find("Mode: leader") != std::string::npos;
        },
        limit);
}

// A loopback port where nothing listens: bound, never listening, so a connect is refused at once
// and no other process can take the port while the test runs.
struct dead_port {
    asio::io_context ioc;
    asio::ip::tcp::socket sock{ioc};
    dead_port()
    {
        sock.open(asio::ip::tcp::v4());
        sock.bind({asio::ip::make_address_v4("127.0.0.1"), 0});
    }
    std::string connect_string() const { return fmt::format("127.0.0.1:{}", sock.local_endpoint().port()); }
};

// The followers of the ensemble, in member order.
std::vector<int> followers(const zk_ensemble& e)
{
    std::vector<int> r;
    const int leader = e.leader();
    for (int i = 0; i < e.size(); ++i)
        if (i != leader)
            r.push_back(i);
    return r;
}

// Two stops in a row (SIGSTOP) of the member the client is on, each resumed before the next:
// the client must keep its session through both. `extra` are more entries of the connect string
// (dead ports); `ping`: our own ping on (default) or off (the C client's own 2/3 timeout only).
void stop_twice(int dead_entries, bool ping)
{
    auto& ens = shared_ensemble();
    ens.wait_for_quorum(60s);
    const auto fol = followers(ens);
    REQUIRE(fol.size() == 2);
    std::vector<std::unique_ptr<dead_port>> dead;
    std::string connect = ens.member_connect_string(fol[0]) + "," + ens.member_connect_string(fol[1]);
    for (int i = 0; i < dead_entries; ++i) {
        dead.push_back(std::make_unique<dead_port>());
        connect += "," + dead.back()->connect_string();
    }
    asio::io_context ioc;
    auto cfg = test_config(connect, 4000ms);
    if (!ping)
        cfg.ping_interval = -1ms;
    zkcoro::client c(ioc.get_executor(), cfg);
    run_bounded(ioc, [&]() -> awaitable<void> {
        co_await c.async_connect();
        const auto sid = c.session().id;
        MESSAGE("connect string " << connect << "; session timeout " << c.session_timeout().count() << " ms");
        for (int round = 1; round <= 2; ++round) {
            const int member = member_of(ens, c.connected_server());
            REQUIRE_MESSAGE(member >= 0, "round " << round << ": connected to " << c.connected_server());
            ens.pause(member);
            const auto t0 = std::chrono::steady_clock::now();
            CHECK_MESSAGE(co_await wait_for_state(c, session_state::suspended, 4000ms), "round " << round);
            CHECK_MESSAGE(co_await wait_for_state(c, session_state::connected, 6000ms), "round " << round);
            const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
            const int now = member_of(ens, c.connected_server());
            MESSAGE("round " << round << ": member " << member << " stopped; on member " << now << " after "
                             << took.count() << " ms");
            ens.resume(member);
            CHECK_MESSAGE(c.session().id == sid, "round " << round << ": the session was lost");
            CHECK_MESSAGE(now != member, "round " << round);
            CHECK_MESSAGE(now >= 0, "round " << round);
            // The same session answers on the new member.
            auto [ec, st] = co_await c.async_exists("/", asio::as_tuple(asio::use_awaitable));
            CHECK_MESSAGE(!ec, "round " << round << ": " << ec.message());
            REQUIRE_MESSAGE(co_await serving(ens, member, 30000ms), "member " << member << " serves again");
        }
        co_await c.async_close();
    }, 90s);
}

}  // namespace

// ZOOKEEPER-2466: the C client steps twice through its list after a failed connection, so with an
// even count it went back to the stopped member at the second failover and the session expired.
TEST_CASE("two members, two stops in a row: the session survives both")
{
    stop_twice(0, true);
}

TEST_CASE("two members, two stops in a row, without our ping: the C client's own timeout moves it")
{
    stop_twice(0, false);
}

TEST_CASE("four entries (two members, two dead ports), two stops in a row: the session survives both")
{
    stop_twice(2, true);
}

// Our ping notices a stopped member after at most ping_interval + ping_timeout (1/3 of the
// session timeout), where the C client waits 2/3 of it.
TEST_CASE("a member hangs: the client moves within about 1/3 of the session timeout")
{
    auto& ens = shared_ensemble();
    ens.wait_for_quorum(60s);
    const auto fol = followers(ens);
    REQUIRE(fol.size() == 2);
    const std::string connect = ens.member_connect_string(fol[0]) + "," + ens.member_connect_string(fol[1]);
    auto log = std::make_shared<test_log>();
    run_with_clients({.name = "hang-fast", .connect = connect, .log = log, .limit = 60s},
                     [&](fixture& f) -> awaitable<void> {
        auto& c = f.client();
        const auto sid = c.session().id;
        const auto timeout = c.session_timeout();
        const int member = member_of(ens, c.connected_server());
        REQUIRE(member >= 0);
        ens.pause(member);
        const auto t0 = std::chrono::steady_clock::now();
        CHECK(co_await wait_for_state(c, session_state::suspended, timeout));
        CHECK(co_await wait_for_state(c, session_state::connected, timeout));
        const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
        ens.resume(member);
        MESSAGE("session timeout " << timeout.count() << " ms; on another member after " << took.count() << " ms");
        CHECK(c.session().id == sid);
        CHECK(member_of(ens, c.connected_server()) != member);
        // 1/3 of the session timeout, plus the reconnection; the C client alone takes 2/3.
        CHECK(took < timeout / 3 + 400ms);
        CHECK(log->contains("no reply from"));
        REQUIRE(co_await serving(ens, member, 30000ms));
    });
}

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
