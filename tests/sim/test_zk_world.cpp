// The in-memory ZooKeeper tree (tests/sim/zk_world.hpp): each rule on its own, no server. The
// differential test (test_zk_world_vs_server.cpp) checks the same rules against a real server.
#include "zk_world.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace zksim;
using zkcoro::client_errc;
using zkcoro::zk_errc;
using W = watch_event_type;

namespace {

create_req mk(std::string path, create_mode m = create_mode::persistent, std::string data = {})
{
    return create_req{std::move(path), std::move(data), m};
}

std::vector<std::string> sorted(std::vector<std::string> v)
{
    std::sort(v.begin(), v.end());
    return v;
}

std::vector<std::pair<W, std::string>> kinds(const std::vector<event>& es)
{
    std::vector<std::pair<W, std::string>> out;
    for (auto& e : es)
        out.emplace_back(e.type, e.path);
    return out;
}

}  // namespace

TEST_CASE("create: parent must exist, no duplicates, stat filled from one zxid counter")
{
    zk_world w;
    w.set_now(1234);
    auto s = w.open_session();
    CHECK(w.create(s, mk("/a/b")).ec == zk_errc::no_node);
    auto a = w.create(s, mk("/a", create_mode::persistent, "xyz"));
    REQUIRE(!a.ec);
    CHECK(a.path == "/a");
    CHECK(a.stat.czxid == w.last_zxid());
    CHECK(a.stat.mzxid == a.stat.czxid);
    CHECK(a.stat.pzxid == a.stat.czxid);
    CHECK(a.stat.ctime == 1234);
    CHECK(a.stat.data_length == 3);
    CHECK(a.stat.ephemeral_owner == 0);
    CHECK(w.create(s, mk("/a")).ec == zk_errc::node_exists);
    auto b = w.create(s, mk("/a/b"));
    REQUIRE(!b.ec);
    CHECK(b.stat.czxid > a.stat.czxid);
    auto pa = *w.stat_of("/a");
    CHECK(pa.num_children == 1);
    CHECK(pa.cversion == 1);
    CHECK(pa.pzxid == b.stat.czxid);
    CHECK(pa.mzxid == a.stat.mzxid);  // a child does not touch the parent's data
    // Refused before sending, as zkcoro's client does: no zxid taken.
    auto z = w.last_zxid();
    CHECK(w.create(s, mk("a")).ec == client_errc::invalid_path);
    CHECK(w.create(s, mk("/a//c")).ec == client_errc::invalid_path);
    CHECK(w.create(s, mk("/a/")).ec == client_errc::invalid_path);
    CHECK(w.last_zxid() == z);
    // A failed write reaches the server and takes a zxid (an error transaction).
    CHECK(w.create(s, mk("/a")).ec == zk_errc::node_exists);
    CHECK(w.last_zxid() == z + 1);
}

// ZooKeeper's suffix is the count of the parent's child creations (its internal cversion), not
// the cversion a client reads (creates and deletes): they part at the first delete.
TEST_CASE("sequential names: %010d of the parent's child creations, still counting after deletes")
{
    zk_world w;
    auto s = w.open_session();
    REQUIRE(!w.create(s, mk("/q")).ec);
    CHECK(w.create(s, mk("/q/n-", create_mode::persistent_sequential)).path == "/q/n-0000000000");
    CHECK(w.create(s, mk("/q/n-", create_mode::ephemeral_sequential)).path == "/q/n-0000000001");
    CHECK(w.stat_of("/q")->cversion == 2);
    CHECK(!w.remove(s, {"/q/n-0000000000", -1}).ec);
    CHECK(!w.remove(s, {"/q/n-0000000001", -1}).ec);
    CHECK(w.stat_of("/q")->cversion == 4);
    CHECK(w.stat_of("/q")->num_children == 0);
    CHECK(w.create(s, mk("/q/n-", create_mode::persistent_sequential)).path == "/q/n-0000000002");
    CHECK(w.stat_of("/q")->cversion == 5);
    // A name made of the number alone, and a taken name.
    CHECK(w.create(s, mk("/q/", create_mode::persistent_sequential)).path == "/q/0000000003");
    REQUIRE(!w.create(s, mk("/q/x0000000005")).ec);  // the 5th creation: the next suffix is 5
    CHECK(w.create(s, mk("/q/x", create_mode::persistent_sequential)).ec == zk_errc::node_exists);
    CHECK(w.create(s, mk("/q/x", create_mode::persistent_sequential)).ec == zk_errc::node_exists);
    CHECK(w.stat_of("/q")->cversion == 7);  // 2 * 5 creates - 3 children: a failed create counts nothing
    CHECK(w.create(s, mk("/q/y", create_mode::persistent_sequential)).path == "/q/y0000000005");
}

TEST_CASE("ephemerals: owner, no children, deleted with their session, watchers told")
{
    zk_world w;
    auto s1 = w.open_session(), s2 = w.open_session();
    auto e = w.create(s1, mk("/e", create_mode::ephemeral));
    REQUIRE(!e.ec);
    CHECK(e.stat.ephemeral_owner == s1);
    CHECK(w.create(s1, mk("/e/c")).ec == zk_errc::no_children_for_ephemerals);
    CHECK(w.create(s2, mk("/e/c", create_mode::ephemeral)).ec == zk_errc::no_children_for_ephemerals);
    REQUIRE(!w.create(s1, mk("/p")).ec);
    REQUIRE(!w.create(s1, mk("/p/x-", create_mode::ephemeral_sequential)).ec);
    REQUIRE(w.exists(s2, "/e", true).stat);
    REQUIRE(!w.get_children(s2, "/p", true).ec);
    w.get_data(s1, "/p", true);  // s1's own watches die with it
    auto z = w.last_zxid();
    CHECK(!w.expire_session(s1));
    CHECK(w.last_zxid() == z + 1);  // one closeSession transaction
    CHECK(!w.exists(s2, "/e").stat);
    CHECK(!w.exists(s2, "/p/x-0000000000").stat);
    CHECK(w.exists(s2, "/p").stat);  // persistent nodes stay
    CHECK(w.stat_of("/p")->pzxid == z + 1);
    auto ev = kinds(w.take_events(s2));
    CHECK(ev == std::vector<std::pair<W, std::string>>{{W::deleted, "/e"}, {W::children_changed, "/p"}});
    CHECK(w.pending_events(s1).empty());
    CHECK(!w.alive(s1));
    CHECK(w.create(s1, mk("/y")).ec == zk_errc::session_expired);
    CHECK(w.get_data(s1, "/p").ec == zk_errc::session_expired);
    CHECK(w.close_session(s1) == zk_errc::no_node);
    CHECK(!w.close_session(s2));
}

TEST_CASE("remove and set_data: version checks, -1 for any, not empty")
{
    zk_world w;
    auto s = w.open_session();
    REQUIRE(!w.create(s, mk("/a", create_mode::persistent, "1")).ec);
    REQUIRE(!w.create(s, mk("/a/b")).ec);
    CHECK(w.remove(s, {"/a", -1}).ec == zk_errc::not_empty);
    CHECK(w.remove(s, {"/a", 3}).ec == zk_errc::bad_version);  // the version is checked first
    CHECK(w.remove(s, {"/zz", -1}).ec == zk_errc::no_node);
    CHECK(w.remove(s, {"/", -1}).ec == zk_errc::bad_arguments);
    CHECK(w.set_data(s, {"/a", "2", 1}).ec == zk_errc::bad_version);
    CHECK(w.set_data(s, {"/zz", "2", -1}).ec == zk_errc::no_node);
    auto r = w.set_data(s, {"/a", "22", 0});
    REQUIRE(!r.ec);
    CHECK(r.stat.version == 1);
    CHECK(r.stat.data_length == 2);
    CHECK(r.stat.mzxid == w.last_zxid());
    CHECK(r.stat.mzxid > r.stat.czxid);
    CHECK(w.get_data(s, "/a").data == "22");
    CHECK(w.set_data(s, {"/a", "3", -1}).stat.version == 2);
    CHECK(w.remove(s, {"/a/b", 1}).ec == zk_errc::bad_version);
    CHECK(!w.remove(s, {"/a/b", 0}).ec);
    CHECK(w.remove(s, {"/a", 1}).ec == zk_errc::bad_version);
    CHECK(!w.remove(s, {"/a", 2}).ec);
    CHECK(w.get_data(s, "/a").ec == zk_errc::no_node);
    CHECK(w.get_children(s, "/a").ec == zk_errc::no_node);
    CHECK(!w.exists(s, "/a").ec);
    CHECK(!w.exists(s, "/a").stat);
}

TEST_CASE("get_children: every name, the parent's stat, an order that is not sorted")
{
    zk_world w(7);
    auto s = w.open_session();
    REQUIRE(!w.create(s, mk("/c")).ec);
    std::vector<std::string> names;
    for (int i = 0; i < 12; ++i) {
        names.push_back("n" + std::to_string(i));
        REQUIRE(!w.create(s, mk("/c/" + names.back())).ec);
    }
    auto r = w.get_children(s, "/c");
    REQUIRE(!r.ec);
    CHECK(sorted(r.children) == sorted(names));
    CHECK(r.children != sorted(names));  // callers must sort for themselves
    CHECK(r.stat.num_children == 12);
    CHECK(w.get_children(s, "/c").children == r.children);  // but deterministic
}

TEST_CASE("watches: one-shot, per session, the event types of each write")
{
    zk_world w;
    auto s1 = w.open_session(), s2 = w.open_session();
    CHECK(!w.exists(s1, "/a", true).stat);  // on a missing node: fires on its creation
    CHECK(w.get_data(s2, "/a", true).ec == zk_errc::no_node);  // leaves no watch
    REQUIRE(!w.get_children(s2, "/", true).ec);
    REQUIRE(!w.create(s2, mk("/a")).ec);
    CHECK(kinds(w.take_events(s1)) == std::vector<std::pair<W, std::string>>{{W::created, "/a"}});
    CHECK(kinds(w.take_events(s2)) == std::vector<std::pair<W, std::string>>{{W::children_changed, "/"}});
    // One-shot: the next write tells nobody.
    REQUIRE(!w.create(s2, mk("/b")).ec);
    REQUIRE(!w.set_data(s2, {"/a", "x", -1}).ec);
    CHECK(w.pending_events(s1).empty());
    CHECK(w.pending_events(s2).empty());
    // Data changed: exists and get_data watches alike; a session watching twice gets one event.
    w.exists(s1, "/a", true);
    w.get_data(s1, "/a", true);
    w.get_data(s2, "/a", true);
    REQUIRE(!w.set_data(s1, {"/a", "y", -1}).ec);
    CHECK(kinds(w.take_events(s1)) == std::vector<std::pair<W, std::string>>{{W::data_changed, "/a"}});
    CHECK(kinds(w.take_events(s2)) == std::vector<std::pair<W, std::string>>{{W::data_changed, "/a"}});
    // Deleted: one NodeDeleted for a session with data and child watches, then the parent's change.
    w.get_data(s1, "/a", true);
    w.get_children(s1, "/a", true);
    w.get_children(s1, "/", true);
    w.get_children(s2, "/a", true);
    REQUIRE(!w.remove(s2, {"/a", -1}).ec);
    CHECK(kinds(w.take_events(s1)) ==
          std::vector<std::pair<W, std::string>>{{W::deleted, "/a"}, {W::children_changed, "/"}});
    CHECK(kinds(w.take_events(s2)) == std::vector<std::pair<W, std::string>>{{W::deleted, "/a"}});
    // A child watch does not fire on the node's own data.
    REQUIRE(!w.create(s2, mk("/a")).ec);
    w.get_children(s1, "/a", true);
    REQUIRE(!w.set_data(s2, {"/a", "z", -1}).ec);
    CHECK(w.pending_events(s1).empty());
    REQUIRE(!w.create(s2, mk("/a/k")).ec);
    CHECK(kinds(w.take_events(s1)) == std::vector<std::pair<W, std::string>>{{W::children_changed, "/a"}});
}

// ZooKeeper: a client sees a watch event before the reply of any request the server applied
// after the event's write; the server sends a write's events before that write's own reply.
TEST_CASE("ordering: events carry the seq of their write, before later replies")
{
    zk_world w;
    auto s1 = w.open_session(), s2 = w.open_session();
    REQUIRE(!w.create(s1, mk("/a")).ec);
    auto before = w.get_data(s2, "/a", true);
    auto write = w.set_data(s1, {"/a", "1", -1});
    auto after = w.exists(s2, "/b");
    CHECK(before.seq < write.seq);
    CHECK(write.seq < after.seq);
    REQUIRE(w.pending_events(s2).size() == 1);
    CHECK(w.pending_events(s2).front().seq == write.seq);
    CHECK(w.take_events_through(s2, before.seq).empty());  // not before the earlier reply
    CHECK(w.take_events_through(s2, after.seq).size() == 1);  // before the later one
    // The writer's own watch: its event goes out before the write's reply.
    w.get_data(s1, "/a", true);
    auto own = w.set_data(s1, {"/a", "2", -1});
    auto ev = w.take_events_through(s1, own.seq);
    REQUIRE(ev.size() == 1);
    CHECK(ev[0].seq == own.seq);
}

TEST_CASE("multi: all or nothing, one zxid, results and the first error")
{
    zk_world w;
    auto s1 = w.open_session(), s2 = w.open_session();
    REQUIRE(!w.create(s1, mk("/m", create_mode::persistent, "d")).ec);
    w.get_children(s2, "/m", true);
    w.get_data(s2, "/m", true);
    auto dump = w.dump();
    auto z = w.last_zxid();
    auto bad = w.multi(s1, {mk("/m/x-", create_mode::ephemeral_sequential), set_data_req{"/m", "e", -1},
                            check_req{"/m", 0}, remove_req{"/m/none", -1}});
    CHECK(bad.ec == zk_errc::bad_version);
    REQUIRE(bad.results.size() == 4);
    CHECK(!bad.results[0].ec);
    CHECK(bad.results[0].path.empty());
    CHECK(!bad.results[1].ec);
    CHECK(bad.results[2].ec == zk_errc::bad_version);
    CHECK(bad.results[3].ec == zk_errc::runtime_inconsistency);
    CHECK(w.dump() == dump);  // no trace: data, cversion, the ephemeral
    CHECK(w.last_zxid() == z + 1);
    CHECK(w.pending_events(s2).empty());
    CHECK(!w.close_session(s1));  // the rolled-back ephemeral is not s1's any more
    s1 = w.open_session();
    CHECK(w.create(s1, mk("/m/x-", create_mode::persistent_sequential)).path == "/m/x-0000000000");
    w.get_children(s2, "/m", true);
    auto ok = w.multi(s1, {mk("/m/x-", create_mode::persistent_sequential), mk("/m/x-", create_mode::ephemeral_sequential),
                           set_data_req{"/m", "e", 0}, check_req{"/m", 1}, remove_req{"/m/x-0000000000", 0}});
    REQUIRE(!ok.ec);
    CHECK(ok.results[0].path == "/m/x-0000000001");  // later ops see earlier ones' effects
    CHECK(ok.results[1].path == "/m/x-0000000002");
    CHECK(ok.results[2].stat.version == 1);
    CHECK(ok.results[0].stat == node_stat{});  // as zkcoro's client reports a multi create
    auto c = w.exists(s1, "/m/x-0000000001").stat;
    REQUIRE(c);
    CHECK(c->czxid == w.last_zxid());
    CHECK(w.stat_of("/m/x-0000000002")->czxid == c->czxid);
    // The failed multi left s2's watches armed: the create after it fired the child watch; then
    // the multi's events in the order of its ops (a create, then the write of /m's data).
    CHECK(kinds(w.take_events(s2)) == std::vector<std::pair<W, std::string>>{{W::children_changed, "/m"},
                                                                           {W::children_changed, "/m"},
                                                                           {W::data_changed, "/m"}});
    CHECK(w.multi(s1, {}).ec == client_errc::invalid_argument);
    CHECK(w.multi(s1, {check_req{"bad", -1}}).ec == client_errc::invalid_path);
    CHECK(w.multi(s1, {check_req{"/nope", -1}}).ec == zk_errc::no_node);
}

TEST_CASE("containers: reaped once emptied, never before their first child")
{
    zk_world w;
    auto s1 = w.open_session(), s2 = w.open_session();
    auto c = w.create(s1, mk("/c", create_mode::container));
    REQUIRE(!c.ec);
    CHECK(c.stat.ephemeral_owner == 0);  // the server's marker is not shown to clients
    CHECK(w.dump().find("/c v=0 cv=0 n=0 owner=container") != std::string::npos);
    REQUIRE(!w.create(s1, mk("/c/d", create_mode::container)).ec);
    CHECK(w.reap_containers().empty());  // new and empty: kept
    REQUIRE(!w.create(s1, mk("/c/d/k-", create_mode::ephemeral_sequential)).ec);
    CHECK(w.reap_containers().empty());  // children
    w.exists(s2, "/c/d", true);
    w.get_children(s2, "/c", true);
    CHECK(!w.close_session(s1));
    auto z = w.last_zxid();
    CHECK(w.reap_containers() == std::vector<std::string>{"/c/d"});
    CHECK(w.last_zxid() == z + 1);
    CHECK(kinds(w.take_events(s2)) ==
          std::vector<std::pair<W, std::string>>{{W::deleted, "/c/d"}, {W::children_changed, "/c"}});
    CHECK(w.reap_containers() == std::vector<std::string>{"/c"});  // the next pass
    CHECK(!w.exists(s2, "/c").stat);
    CHECK(w.reap_containers().empty());
}

// Found by the differential test (seed 4): the rollback restored only the caller's ephemerals, so
// a failed multi that removed another session's ephemeral left that node ownerless, and it
// outlived its session.
TEST_CASE("multi: rolled back, another session's ephemeral still dies with its session")
{
    zk_world w;
    auto s1 = w.open_session(), s2 = w.open_session();
    REQUIRE(!w.create(s1, mk("/e", create_mode::ephemeral)).ec);
    CHECK(w.multi(s2, {remove_req{"/e", -1}, check_req{"/none", -1}}).ec == zk_errc::no_node);
    CHECK(w.exists(s2, "/e").stat);
    CHECK(!w.expire_session(s1));
    CHECK(!w.exists(s2, "/e").stat);
}

// A dropped connection on a live session: the server forgets the connection's watches and
// unsent events; the client re-registers what it holds with the last zxid it saw (SetWatches).
TEST_CASE("disconnect and reconnect: requests refused meanwhile, watches set again by zxid")
{
    zk_world w;
    auto s1 = w.open_session(), s2 = w.open_session();
    for (auto p : {"/same", "/changed", "/gone", "/again", "/p", "/quiet"})
        REQUIRE(!w.create(s2, mk(p)).ec);
    w.get_data(s1, "/changed", true);  // this one's event is queued, then lost with the connection
    REQUIRE(!w.set_data(s2, {"/changed", "0", -1}).ec);
    CHECK(w.pending_events(s1).size() == 1);
    auto seen = w.last_zxid();
    w.disconnect(s1);
    CHECK(w.pending_events(s1).empty());
    CHECK(w.alive(s1));
    CHECK(w.create(s1, mk("/x")).ec == zk_errc::connection_loss);
    CHECK(w.get_data(s1, "/same").ec == zk_errc::connection_loss);
    CHECK(w.multi(s1, {check_req{"/same", -1}}).ec == zk_errc::connection_loss);
    CHECK(!w.exists(s2, "/x").stat);  // not applied
    // Meanwhile: data changed, a node deleted, one deleted and created again, one born and gone,
    // a child added; /same and /quiet untouched. s1 watched none of it (no watches on the server).
    REQUIRE(!w.set_data(s2, {"/changed", "1", -1}).ec);
    REQUIRE(!w.remove(s2, {"/gone", -1}).ec);
    REQUIRE(!w.remove(s2, {"/again", -1}).ec);
    REQUIRE(!w.create(s2, mk("/again")).ec);
    REQUIRE(!w.create(s2, mk("/brief")).ec);
    REQUIRE(!w.remove(s2, {"/brief", -1}).ec);
    REQUIRE(!w.create(s2, mk("/p/c")).ec);
    CHECK(w.pending_events(s1).empty());
    zk_world::watch_set held{{"/same", "/changed", "/gone", "/again"}, {"/brief", "/new"}, {"/p", "/quiet"}};
    auto seq = w.reconnect(s1, seen, held);
    CHECK(seq == w.last_seq());
    CHECK(kinds(w.take_events_through(s1, seq)) ==
          std::vector<std::pair<W, std::string>>{{W::data_changed, "/changed"},
                                                 {W::deleted, "/gone"},
                                                 {W::data_changed, "/again"},  // not deleted + created
                                                 {W::children_changed, "/p"}});  // /brief: never seen
    // The others are armed again, on the server, as before.
    REQUIRE(!w.create(s2, mk("/new")).ec);
    REQUIRE(!w.create(s2, mk("/brief")).ec);
    REQUIRE(!w.set_data(s2, {"/same", "2", -1}).ec);
    REQUIRE(!w.create(s2, mk("/quiet/k")).ec);
    CHECK(kinds(w.take_events(s1)) == std::vector<std::pair<W, std::string>>{{W::created, "/new"},
                                                                           {W::created, "/brief"},
                                                                           {W::data_changed, "/same"},
                                                                           {W::children_changed, "/quiet"}});
    CHECK(!w.create(s1, mk("/x")).ec);  // connected again
    CHECK(!w.expire_session(s1));
    CHECK(w.reconnect(s1, seen, held) == 0);
    CHECK(w.get_data(s1, "/same").ec == zk_errc::session_expired);
}
