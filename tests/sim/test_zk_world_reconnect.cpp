// The model's disconnect/reconnect (zk_world::reconnect, the server's side of SetWatches) against
// a real ZooKeeper 3.8: a client behind a proxy leaves watches, its connection is cut and kept
// down while another client changes the tree, then it reconnects to the same session; the events
// its watches get (type, path) must be the model's. Part of integration_zk_world.
#include "zk_world.hpp"

#include "../integration/common.hpp"

#include <tcp_proxy.hpp>

#include <algorithm>

using namespace zktest;
using zkcoro::create_mode;
using W = zkcoro::watch_event_type;

namespace {

constexpr auto tup = asio::as_tuple(asio::use_awaitable);

struct held {
    std::string path;
    zkcoro::watch w;
};

// "type path" of each watch that fired (sorted), and those watches removed from `ws`.
asio::awaitable<std::vector<std::string>> fired(std::vector<held>& ws)
{
    std::vector<std::string> out;
    for (auto& h : ws) {
        if (!h.w.ready())
            continue;
        auto [ec, ev] = co_await h.w.async_wait(tup);
        CHECK(!ec);
        CHECK(ev.path == h.path);
        out.push_back(fmt::format("{} {}", zkcoro::to_string(ev.type), ev.path));
    }
    std::erase_if(ws, [](auto& h) { return h.w.ready(); });
    std::sort(out.begin(), out.end());
    co_return out;
}

std::vector<std::string> lines_of(const std::vector<zksim::event>& es)
{
    std::vector<std::string> out;
    for (auto& e : es)
        out.push_back(fmt::format("{} {}", zkcoro::to_string(e.type), e.path));
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace

TEST_CASE("the model answers as the server does: watches set again after a reconnect")
{
    tcp_proxy proxy("127.0.0.1", shared_server().port());
    run_with_clients({.name = "zkw-reconnect", .clients = 1}, [&](fixture& f) -> asio::awaitable<void> {
        auto& b = f.client();
        zkcoro::client a(f.executor(), test_config(proxy.address()));
        co_await a.async_connect();
        zksim::zk_world m;
        auto ma = m.open_session(), mb = m.open_session();
        auto R = f.path;
        auto create = [&](std::string p) -> asio::awaitable<void> {
            auto [ec, r] = co_await b.async_create(p, "", create_mode::persistent, tup);
            CHECK(!ec);
            CHECK(!m.create(mb, {p, "", create_mode::persistent}).ec);
        };
        auto remove = [&](std::string p) -> asio::awaitable<void> {
            auto [ec] = co_await b.async_remove(p, -1, tup);
            CHECK(!ec);
            CHECK(!m.remove(mb, {p, -1}).ec);
        };
        co_await create(R);
        for (auto p : {"/same", "/changed", "/gone", "/again", "/p", "/quiet"})
            co_await create(R + p);
        // a's watches, as the client library files them (data, exist, child).
        zksim::zk_world::watch_set ws;
        std::vector<held> handles;
        for (auto p : {"/same", "/changed", "/gone", "/again"}) {
            auto [ec, r] = co_await a.async_get_data(R + p, zkcoro::leave_watch, tup);
            REQUIRE(!ec);
            handles.push_back({R + p, std::move(r.watch)});
            ws.data.push_back(R + p);
        }
        for (auto p : {"/brief", "/new"}) {
            auto [ec, r] = co_await a.async_exists(R + p, zkcoro::leave_watch, tup);
            REQUIRE(!r.stat);
            handles.push_back({R + p, std::move(r.watch)});
            ws.exist.push_back(R + p);
        }
        for (auto p : {"/p", "/quiet"}) {
            auto [ec, r] = co_await a.async_get_children(R + p, zkcoro::leave_watch, tup);
            REQUIRE(!ec);
            handles.push_back({R + p, std::move(r.watch)});
            ws.child.push_back(R + p);
        }
        // The last zxid a saw: its last reply's (nothing is written until the cut).
        co_await a.async_exists(R, tup);
        auto seen = m.last_zxid();
        proxy.set_refuse(true);
        proxy.cut();
        m.disconnect(ma);
        REQUIRE(co_await wait_for_state(a, zkcoro::session_state::suspended, 3000ms));
        // Meanwhile: data changed, a node deleted, one deleted and created again, one born and
        // gone, a child added; /same and /quiet untouched.
        auto [ec_set, st] = co_await b.async_set_data(R + "/changed", "1", -1, tup);
        CHECK(!ec_set);
        CHECK(!m.set_data(mb, {R + "/changed", "1", -1}).ec);
        co_await remove(R + "/gone");
        co_await remove(R + "/again");
        co_await create(R + "/again");
        co_await create(R + "/brief");
        co_await remove(R + "/brief");
        co_await create(R + "/p/c");
        proxy.set_refuse(false);
        REQUIRE(co_await wait_for_state(a, zkcoro::session_state::connected, 3000ms));
        co_await a.async_exists(R, tup);  // SetWatches went first: its events came before this reply
        auto seq = m.reconnect(ma, seen, ws);
        auto events = m.take_events_through(ma, seq);
        auto real = co_await fired(handles);
        CHECK(real == lines_of(events));
        // Deleted and created again: a data change. Created and deleted: nothing.
        CHECK(real == std::vector<std::string>{"children_changed " + R + "/p", "data_changed " + R + "/again",
                                               "data_changed " + R + "/changed", "deleted " + R + "/gone"});
        // The rest are armed again on the server: these writes fire them.
        co_await create(R + "/new");
        co_await create(R + "/brief");
        auto [ec_same, st2] = co_await b.async_set_data(R + "/same", "2", -1, tup);
        CHECK(!ec_same);
        CHECK(!m.set_data(mb, {R + "/same", "2", -1}).ec);
        co_await create(R + "/quiet/k");
        co_await a.async_exists(R, tup);
        real = co_await fired(handles);
        CHECK(real == lines_of(m.take_events(ma)));
        CHECK(real.size() == 4);
        CHECK(handles.empty());
        co_await a.async_close();
        for (auto p : {"/p/c", "/quiet/k", "/same", "/changed", "/again", "/p", "/quiet", "/new", "/brief", ""})
            co_await remove(R + p);
    });
}
