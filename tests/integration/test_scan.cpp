// async_scan against a real ZooKeeper: every recipe's queue under a root, in the lock's own
// order; the wait-for graph of two sessions deadlocked on two paths (and its negative control);
// bad roots; the bound on requests in flight.
#include "common.hpp"

#include <zkcoro/holder_data.hpp>
#include <zkcoro/scan.hpp>

#include <unistd.h>

using namespace zktest;
using namespace zkcoro;
using asio::awaitable;

namespace {

awaitable<scan_result> scan(client& c, const std::string& root, scan_options o = {})
{
    auto [ec, r] = co_await async_scan(c, root, o, use_tuple);
    REQUIRE_MESSAGE(!ec, "scan of " << root << ": " << ec.message());
    co_return r;
}

const lock_info* find_lock(const scan_result& r, const std::string& path)
{
    for (const auto& l : r.locks)
        if (l.path == path)
            return &l;
    return nullptr;
}

// Waits (bounded) until a scan shows `waiters` waiters on `path`.
awaitable<bool> waiters_seen(client& c, const std::string& root, const std::string& path, std::size_t waiters)
{
    co_return co_await eventually([&]() -> awaitable<bool> {
        auto r = co_await scan(c, root);
        auto* l = find_lock(r, path);
        co_return l && l->waiters.size() == waiters;
    }, 10000ms);
}

}  // namespace

TEST_CASE("scan lists every recipe's holders and waiters in the lock's order")
{
    run_with_clients({.name = "scan", .clients = 2, .limit = 60s}, [&](fixture& f) -> awaitable<void> {
        auto [a, b] = f.clients<2>();
        const std::string root = f.path;
        mutex ma(a, root + "/m", {.data = "holder-a"});
        mutex mb(b, root + "/m", {.data = "waiter-b"});
        shared_mutex rwa(a, root + "/sub/rw");
        shared_mutex rwb(b, root + "/sub/rw");
        semaphore sa(a, root + "/s", 1);
        semaphore sb(b, root + "/s", 1);
        auto gm = co_await ma.acquire();
        auto gr = co_await rwa.reader().acquire();
        auto gs = co_await sa.acquire(1);
        int done = 0;
        auto ex = co_await asio::this_coro::executor;
        auto wait_on = [&](auto& lock_or_sem, auto acquire) {
            asio::co_spawn(ex, [&, acquire]() -> awaitable<void> {
                co_await acquire();
                ++done;
            }, asio::detached);
            (void)lock_or_sem;
        };
        wait_on(mb, [&]() -> awaitable<void> { auto g = co_await mb.acquire(); co_await g.release(); });
        wait_on(rwb, [&]() -> awaitable<void> { auto g = co_await rwb.writer().acquire(); co_await g.release(); });
        wait_on(sb, [&]() -> awaitable<void> { auto g = co_await sb.acquire(1); co_await g.front().release(); });
        REQUIRE(co_await waiters_seen(a, root, root + "/m", 1));
        REQUIRE(co_await waiters_seen(a, root, root + "/sub/rw", 1));
        REQUIRE(co_await waiters_seen(a, root, root + "/s", 1));

        auto r = co_await scan(a, root);
        CHECK(r.problems.empty());
        REQUIRE(r.locks.size() == 3);  // /m, /s, /sub/rw (sorted by path)
        const auto* m = find_lock(r, root + "/m");
        REQUIRE(m);
        CHECK(m->kind == lock_kind::mutex);
        REQUIRE(m->holders.size() == 1);
        CHECK(m->holders[0].data == "holder-a");
        CHECK(m->holders[0].session_id == a.session().id);
        CHECK(m->holders[0].holds);
        CHECK(m->holders[0].ctime > 0);
        CHECK(m->waiters[0].data == "waiter-b");
        CHECK(m->waiters[0].session_id == b.session().id);
        CHECK(!m->waiters[0].holds);

        const auto* rw = find_lock(r, root + "/sub/rw");
        REQUIRE(rw);
        CHECK(rw->kind == lock_kind::read_write);
        REQUIRE(rw->holders.size() == 1);
        CHECK(rw->holders[0].mode == lock_mode::read);
        CHECK(rw->waiters[0].mode == lock_mode::write);

        const auto* s = find_lock(r, root + "/s");
        REQUIRE(s);
        CHECK(s->kind == lock_kind::semaphore);
        REQUIRE(s->holders.size() == 1);
        CHECK(s->holders[0].mode == lock_mode::lease);
        CHECK(s->holders[0].session_id == a.session().id);
        CHECK(s->waiters[0].session_id == b.session().id);

        // Three locks, all held by a and waited for by b: edges b -> a, and no cycle.
        auto edges = wait_for_graph(r.locks);
        CHECK(edges.size() == 3);
        for (const auto& e : edges) {
            CHECK(e.waiter_session == b.session().id);
            CHECK(e.holder_session == a.session().id);
        }
        CHECK(find_cycles(edges).empty());

        co_await gm.release();
        co_await gr.release();
        co_await gs.front().release();
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return done == 3; }, 10000ms));
    });
}

TEST_CASE("two sessions deadlocked on two paths: the cycle is named in one scan; one order: none")
{
    for (const bool crossed : {true, false}) {
        CAPTURE(crossed);
        run_with_clients({.name = "scandl", .clients = 2, .limit = 60s}, [&](fixture& f) -> awaitable<void> {
            auto [a, b] = f.clients<2>();
            const std::string pa = f.path + "/a", pb = f.path + "/b";
            mutex a_on_a(a, pa, {.data = "a"}), a_on_b(a, pb, {.data = "a"});
            mutex b_on_a(b, pa, {.data = "b"}), b_on_b(b, pb, {.data = "b"});
            auto ga = co_await a_on_a.acquire();
            // Crossed: b holds /b and waits for /a while a waits for /b. One order: b waits
            // for /a first (holding nothing), then a takes /b and nobody waits for a's /b.
            std::optional<guard> gb;
            if (crossed)
                gb = co_await b_on_b.acquire();
            bool b_done = false, a_done = false;
            auto ex = co_await asio::this_coro::executor;
            asio::co_spawn(ex, [&]() -> awaitable<void> {
                auto [ec, g] = co_await b_on_a.async_acquire(co_await this_task::id(), 15s, use_tuple);
                if (!ec && g)
                    co_await g->release();
                b_done = true;
            }, asio::detached);
            REQUIRE(co_await waiters_seen(a, f.path, pa, 1));
            std::optional<guard> gab;
            if (crossed) {
                asio::co_spawn(ex, [&]() -> awaitable<void> {
                    auto [ec, g] = co_await a_on_b.async_acquire(co_await this_task::id(), 15s, use_tuple);
                    if (!ec && g)
                        co_await g->release();
                    a_done = true;
                }, asio::detached);
                REQUIRE(co_await waiters_seen(a, f.path, pb, 1));
            } else {
                gab = co_await a_on_b.acquire();
            }
            auto r = co_await scan(a, f.path);
            auto cycles = find_cycles(wait_for_graph(r.locks));
            if (crossed) {
                REQUIRE(cycles.size() == 1);
                const auto& c = cycles[0];
                CHECK(c.sessions == std::vector<std::int64_t>{std::min(a.session().id, b.session().id),
                                                              std::max(a.session().id, b.session().id)});
                REQUIRE(c.edges.size() == 2);
                CHECK(c.edges[0].lock == pa);
                CHECK(c.edges[0].waiter_data == "b");
                CHECK(c.edges[0].holder_data == "a");
                CHECK(c.edges[1].lock == pb);
                CHECK(c.edges[1].waiter_data == "a");
                CHECK(c.edges[1].holder_data == "b");
            } else {
                CHECK(cycles.empty());
            }
            // Break it: a lets /a go, b gets it; then b lets /b go, a gets it.
            co_await ga.release();
            if (gb)
                co_await gb->release();
            if (gab)
                co_await gab->release();
            CHECK(co_await eventually([&]() -> awaitable<bool> { co_return b_done && (a_done || !crossed); }, 20000ms));
        });
    }
}

TEST_CASE("scan: bad roots are refused with clear errors, nothing is left behind")
{
    run_with_clients({.name = "scanbad", .clients = 1}, [&](fixture& f) -> awaitable<void> {
        auto& c = f.client(0);
        auto [e1, r1] = co_await async_scan(c, "no-slash", use_tuple);
        CHECK(e1 == client_errc::invalid_path);
        auto [e2, r2] = co_await async_scan(c, "/a//b", use_tuple);
        CHECK(e2 == client_errc::invalid_path);
        auto [e3, r3] = co_await async_scan(c, f.path + "/missing", use_tuple);
        CHECK(e3 == zk_errc::no_node);
        CHECK(r3.locks.empty());
    });
}

TEST_CASE("scan keeps at most max_in_flight requests outstanding and counts them")
{
    run_with_clients({.name = "scanbound", .clients = 1, .limit = 60s}, [&](fixture& f) -> awaitable<void> {
        auto& c = f.client(0);
        co_await c.async_create(f.path, "", create_mode::persistent, asio::use_awaitable);
        // 40 lock paths, each with one persistent "lock" node made by hand (Curator's name form).
        for (int i = 0; i < 40; ++i) {
            const auto p = fmt::format("{}/l{:02}", f.path, i);
            co_await c.async_create(p, "", create_mode::persistent, asio::use_awaitable);
            co_await c.async_create(p + "/_c_x-lock-0000000000", "d", create_mode::ephemeral, asio::use_awaitable);
        }
        auto r = co_await scan(c, f.path, {.max_in_flight = 4});
        CHECK(r.locks.size() == 40);
        CHECK(r.max_in_flight_seen <= 4);
        CHECK(r.max_in_flight_seen >= 2);
        CHECK(r.nodes_listed == 41);       // the root and the 40 lock paths
        CHECK(r.requests == 41 + 40);      // and one read per lock node
        auto zero = co_await scan(c, f.path, {.max_in_flight = 0});  // taken as 1
        CHECK(zero.max_in_flight_seen == 1);
        CHECK(zero.locks.size() == 40);
    });
}

TEST_CASE("the default node data says who: host, pid, program and the client's label, as the scan shows it")
{
    run_with_clients({.name = "scanwho", .clients = 1}, [&](fixture& f) -> awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        auto cfg = test_config(server_address(), 4000ms, nullptr);
        cfg.holder_label = "nightly report";
        client labelled(ex, cfg);
        co_await labelled.async_connect(asio::use_awaitable);
        mutex m(labelled, f.path + "/m");
        auto g = co_await m.acquire();
        auto r = co_await scan(f.client(0), f.path);
        REQUIRE(r.locks.size() == 1);
        REQUIRE(r.locks[0].holders.size() == 1);
        auto who = parse_holder_data(r.locks[0].holders[0].data);
        REQUIRE_MESSAGE(who, r.locks[0].holders[0].data);
        CHECK(who->pid == ::getpid());
        CHECK(who->program == "integration_tests");  // this program (tests/meson.build)
        CHECK(who->label == "nightly report");
        CHECK(r.locks[0].holders[0].data.ends_with(" label=nightly%20report"));
        co_await g.release();
        co_await labelled.async_close(asio::use_awaitable);
    });
}

TEST_CASE("scan: a client closed during the scan fails it with closed, not a partial listing")
{
    run_with_clients({.name = "scanclose", .clients = 1, .limit = 60s}, [&](fixture& f) -> awaitable<void> {
        auto& c = f.client(0);
        co_await c.async_create(f.path, "", create_mode::persistent, asio::use_awaitable);
        for (int i = 0; i < 20; ++i)
            co_await c.async_create(fmt::format("{}/l{:02}", f.path, i), "", create_mode::persistent, asio::use_awaitable);
        auto ex = co_await asio::this_coro::executor;
        client other(ex, test_config());
        co_await other.async_connect(asio::use_awaitable);
        bool done = false;
        error_code got;
        async_scan(other, f.path, [&](error_code ec, scan_result) {
            got = ec;
            done = true;
        });
        other.close();
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return done; }, 10000ms));
        CHECK(got == client_errc::closed);
    });
}

// Issue 32 item 9: plain children of a lock path are not waiters (a lock beside a lock below it,
// 300 plain children), and a held node whose data the scanner may not read still shows its
// holder's session, with the data marked unreadable (exists needs no permission).
TEST_CASE("scan: plain children are no waiters; a node without READ permission still shows its holder")
{
    run_with_clients({.name = "scanplain", .limit = 60s}, [&](fixture& f) -> awaitable<void> {
        auto& c = f.client(0);
        co_await c.async_create(f.path, "", create_mode::persistent, asio::use_awaitable);
        const auto db = f.path + "/db";
        mutex outer(c, db), inner(c, db + "/t1");
        auto g1 = co_await outer.acquire();
        auto g2 = co_await inner.acquire();
        for (int i = 0; i < 300; ++i)
            co_await c.async_create(fmt::format("{}/plain{:03}", db, i), "", create_mode::persistent,
                                    asio::use_awaitable);
        // A lock node only its creator may read (digest auth, creator-only ACL), beside the others.
        auto cfg = test_config();
        cfg.auth.push_back({"digest", "alice:secret"});
        cfg.default_acl = creator_all_acl();
        client alice(f.executor(), cfg);
        co_await alice.async_connect();
        const auto hidden = f.path + "/hidden";
        co_await c.async_create(hidden, "", create_mode::persistent, asio::use_awaitable);
        co_await alice.async_create(hidden + "/_c_h-lock-0000000000", "who", create_mode::ephemeral);
        auto r = co_await scan(c, f.path);
        REQUIRE(r.locks.size() == 3);
        CHECK(r.locks[0].path == db);
        CHECK(r.locks[0].holders.size() == 1);
        CHECK(r.locks[0].waiters.empty());
        CHECK(r.locks[1].path == db + "/t1");
        CHECK(r.locks[2].path == hidden);
        REQUIRE(r.locks[2].holders.size() == 1);
        CHECK(r.locks[2].holders[0].session_id == alice.session().id);
        CHECK(r.locks[2].holders[0].data_unreadable);
        CHECK(r.locks[2].holders[0].data.empty());
        CHECK(r.problems.empty());
        co_await g2.release();
        co_await g1.release();
        co_await alice.async_close();
    });
}
