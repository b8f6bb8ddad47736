// Leader election (leader_latch, run_as_leader), revocation and fenced transactions against a
// real ZooKeeper, within one process (the cross-process and Curator cases: tests/interop).
#include "common.hpp"
#include "deleted_waiter.hpp"

#include <map>

using namespace zktest;
using namespace zkcoro;
using asio::awaitable;

namespace {

leader_latch_options with_id(std::string id)
{
    leader_latch_options o;
    o.id = std::move(id);
    return o;
}

awaitable<std::string> data_of(client& c, const std::string& path)
{
    auto [ec, d] = co_await c.async_get_data(path, use_tuple);
    co_return ec ? "<" + ec.message() + ">" : d.data;
}

// `la` leads and `lb` queues behind it (both listed as participants): la's term.
awaitable<leadership> lead_with_waiter(leader_latch& la, leader_latch& lb)
{
    auto ta = co_await la.await_leadership(5s);
    REQUIRE(ta.has_value());
    lb.start();
    REQUIRE(co_await eventually([&]() -> awaitable<bool> {
        co_return (co_await la.async_participants(asio::use_awaitable)).size() == 2;
    }));
    co_return std::move(*ta);
}

}  // namespace

// The first latch leads; the second waits (a timeout is an empty result); the participants are
// listed leader first with their ids; closing the leader hands leadership over, and ends its
// term with operation_aborted (not a loss).
TEST_CASE("leader_latch: one leader, handover on close")
{
    run_with_clients({.name = "latch", .clients = 2}, [&](fixture& f) -> awaitable<void> {
        auto [a, b] = f.clients<2>();
        leader_latch la(a, f.path, with_id("alpha"));
        leader_latch lb(b, f.path, with_id("beta"));
        auto ta = co_await la.await_leadership(5s);
        REQUIRE(ta.has_value());
        CHECK(la.is_leader());
        CHECK(ta->node_path().find("-latch-") != std::string::npos);
        CHECK(ta->fencing_token() > 0);
        auto tb = co_await lb.await_leadership(300ms);
        CHECK_FALSE(tb.has_value());
        CHECK_FALSE(lb.is_leader());
        auto parts = co_await lb.async_participants(asio::use_awaitable);
        REQUIRE(parts.size() == 2);
        CHECK(parts[0].holds);
        CHECK(parts[0].data == "alpha");
        CHECK_FALSE(parts[1].holds);
        CHECK(parts[1].data == "beta");

        co_await la.async_close(asio::use_awaitable);
        CHECK_FALSE(la.is_leader());
        auto [lost_ec] = co_await ta->async_wait_lost(use_tuple);
        CHECK(lost_ec == asio::error::operation_aborted);
        tb = co_await lb.await_leadership(5s);
        REQUIRE(tb.has_value());
        CHECK(tb->fencing_token() > ta->fencing_token());
        CHECK(lb.terms() == 1);
        // A closed latch refuses to wait.
        auto [ec, none] = co_await la.async_await_leadership(1s, use_tuple);
        CHECK(ec == client_errc::closed);
        CHECK_FALSE(none.has_value());
        co_await lb.async_close(asio::use_awaitable);
        auto [lec, left] = co_await a.async_get_children(f.path, use_tuple);
        CHECK((lec == zk_errc::no_node || left.children.empty()));
    });
}

// Leadership is a lease: the session's expiry ends the term (lock_lost, the lost slot fires), and
// the latch queues again and regains leadership with a new node: both are observable.
TEST_CASE("leader_latch: losing and regaining leadership")
{
    run_with_clients({.name = "latch-expiry", .session_timeout = 2000ms}, [&](fixture& f) -> awaitable<void> {
        auto& a = f.client();
        leader_latch la(a, f.path, with_id("solo"));
        auto t1 = co_await la.await_leadership(5s);
        REQUIRE(t1.has_value());
        asio::steady_timer work(f.executor(), std::chrono::steady_clock::time_point::max());
        bool cancelled = false;
        work.async_wait(asio::bind_cancellation_slot(t1->lost_slot(), [&](error_code ec) {
            cancelled = ec == asio::error::operation_aborted;
        }));
        REQUIRE(co_await expire_session(a));
        auto [lost_ec] = co_await t1->async_wait_lost(use_tuple);
        CHECK(lost_ec == client_errc::lock_lost);
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return cancelled; }));
        auto t2 = co_await la.await_leadership(10s);
        REQUIRE(t2.has_value());
        CHECK(t2->node_path() != t1->node_path());
        CHECK(t2->fencing_token() > t1->fencing_token());
        CHECK(la.terms() == 2);
        co_await la.async_close(asio::use_awaitable);
    });
}

// Bad input: a clear error, no node.
TEST_CASE("leader_latch: invalid path")
{
    run_with_clients({.name = "latch-bad"}, [&](fixture& f) -> awaitable<void> {
        leader_latch l(f.client(), "no-slash");
        auto [ec, t] = co_await l.async_await_leadership(2s, use_tuple);
        CHECK(ec == client_errc::invalid_path);
        CHECK_FALSE(t.has_value());
        co_await l.async_close(asio::use_awaitable);
    });
}

// A latch whose client's credentials the server refused: the client is closed for good, so the
// election ends at once and the wait says why. (It retried every second, 30 times, logging
// "could not queue", and a wait shorter than that reported a time-out.)
TEST_CASE("leader_latch: credentials refused end the election with auth_failed")
{
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> awaitable<void> {
        client c(ioc.get_executor(), refused_config());
        REQUIRE(co_await connect_refused(c));
        leader_latch l(c, unique_path("latch-refused"));
        // Within run_bounded's 30 s: before, this wait timed out at 20 s (an empty code).
        auto [ec, t] = co_await l.async_await_leadership(20s, use_tuple);
        CHECK_MESSAGE(ec == client_errc::auth_failed, ec.message());
        CHECK_FALSE(t.has_value());
        co_await l.async_close(asio::use_awaitable);
    });
}

// run_as_leader: the leader's coroutine is cancelled when leadership is lost (its session
// expired); without requeue run_as_leader then returns, and the other participant leads.
TEST_CASE("run_as_leader: lost leadership cancels the leader's work")
{
    run_with_clients({.name = "selector", .clients = 2, .session_timeout = 2000ms}, [&](fixture& f) -> awaitable<void> {
        auto [a, b] = f.clients<2>();
        int a_terms = 0, b_terms = 0;
        bool a_cancelled = false, a_done = false, b_led = false;
        auto ex = f.executor();
        leader_selector_options oa;
        oa.id = "a";
        asio::co_spawn(ex, run_as_leader(a, f.path, [&](guard& g) -> awaitable<void> {
            ++a_terms;
            CHECK(g.node_path().find("-lock-") != std::string::npos);
            asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::steady_clock::time_point::max());
            auto [ec] = co_await t.async_wait(use_tuple);
            a_cancelled = ec == asio::error::operation_aborted;
        }, oa), [&](std::exception_ptr) { a_done = true; });
        REQUIRE(co_await eventually([&]() -> awaitable<bool> { co_return a_terms == 1; }));
        leader_selector_options ob;
        ob.id = "b";
        asio::co_spawn(ex, run_as_leader(b, f.path, [&](guard&) -> awaitable<void> {
            ++b_terms;
            b_led = true;
            co_return;  // a term that ends by itself: leadership given up
        }, ob), [&](std::exception_ptr) {});
        mutex view(b, f.path);
        REQUIRE(co_await eventually([&]() -> awaitable<bool> {
            co_return (co_await view.async_participants(asio::use_awaitable)).size() == 2;
        }));
        auto parts = co_await view.async_participants(asio::use_awaitable);
        CHECK(parts[0].data == "a");
        CHECK(parts[1].data == "b");
        CHECK_FALSE(b_led);
        REQUIRE(co_await expire_session(a));
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return a_done && b_led; }, 10000ms));
        CHECK(a_cancelled);
        CHECK(a_terms == 1);
        CHECK(b_terms == 1);
    });
}

// Revocation in one process: a request reaches the revocable holder's signal (awaitable and
// slot); a non-revocable guard says so; bad input is refused; a request to a gone node is fine.
TEST_CASE("revocation: signal, errors")
{
    run_with_clients({.name = "revoke", .clients = 2}, [&](fixture& f) -> awaitable<void> {
        auto [a, b] = f.clients<2>();
        mutex_options ro;
        ro.revocable = true;
        mutex rm(a, f.path + "/r", ro);
        auto g = co_await rm.acquire();
        CHECK(g.revocable());
        CHECK_FALSE(g.revocation_requested());
        CHECK(co_await data_of(a, g.node_path()) == "");  // Curator's revocable nodes store nothing
        asio::steady_timer work(f.executor(), std::chrono::steady_clock::time_point::max());
        bool cancelled = false;
        work.async_wait(asio::bind_cancellation_slot(g.revocation_slot(), [&](error_code ec) {
            cancelled = ec == asio::error::operation_aborted;
        }));
        co_await async_request_revoke(b, g.node_path());
        co_await g.async_wait_revocation(asio::use_awaitable);
        CHECK(g.revocation_requested());
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return cancelled; }));
        CHECK_FALSE(g.lost());  // cooperative: nothing was released for us
        auto node = g.node_path();
        co_await g.release();
        auto [eec, ex] = co_await b.async_exists(node, use_tuple);
        CHECK_FALSE(ex.stat.has_value());
        // A request to a node that is gone: not an error (Curator ignores NoNode too).
        auto [gone_ec] = co_await async_request_revoke(b, node, use_tuple);
        CHECK_FALSE(gone_ec);
        auto [bad_ec] = co_await async_request_revoke(b, "relative/path", use_tuple);
        CHECK(bad_ec == client_errc::invalid_path);

        mutex plain(a, f.path + "/p");
        auto pg = co_await plain.acquire();
        auto [nr_ec] = co_await pg.async_wait_revocation(use_tuple);
        CHECK(nr_ec == client_errc::not_revocable);
        co_await pg.release();

        mutex_options bad;
        bad.revocable = true;
        bad.data = "x";
        mutex bm(a, f.path + "/bad", bad);
        auto [bm_ec, bg] = co_await bm.async_acquire(co_await this_task::id(), 1s, use_tuple);
        CHECK(bm_ec == client_errc::invalid_argument);
        CHECK_FALSE(bg.has_value());

        // A semaphore has no revocation (Curator's neither): refused, no node left.
        mutex_options so;
        so.revocable = true;
        semaphore sem(a, f.path + "/sem", 2, so);
        auto [sem_ec, leases] = co_await sem.async_acquire(1, 1s, use_tuple);
        CHECK(sem_ec == client_errc::invalid_argument);
        CHECK_FALSE(leases.has_value());
        auto [sl_ec, sl] = co_await a.async_get_children(f.path + "/sem/leases", use_tuple);
        CHECK((sl_ec == zk_errc::no_node || sl.children.empty()));
    });
}

// guard::async_multi commits while the lock node exists; once it is gone (deleted by an
// operator here), the transaction fails with lock_lost and writes nothing.
TEST_CASE("fenced transaction")
{
    run_with_clients({.name = "fenced", .clients = 2}, [&](fixture& f) -> awaitable<void> {
        auto [a, b] = f.clients<2>();
        const auto res = f.path + "-resource";
        co_await a.async_create(res, "init", create_mode::persistent);
        mutex m(a, f.path);
        auto g = co_await m.acquire();
        // Operations built first: GCC 12 rejects a braced list inside a co_await expression.
        std::vector<multi_op> one{set_data_op{res, "one", -1}};
        std::vector<multi_op> two{set_data_op{res, "two", -1}};
        std::vector<multi_op> three{set_data_op{res, "three", -1}};
        auto results = co_await g.async_multi(std::move(one));
        CHECK(results.size() == 1);  // the check's result is left out
        CHECK(co_await data_of(b, res) == "one");
        co_await b.async_remove(g.node_path());  // someone breaks the lock
        auto [ec, r2] = co_await g.async_multi(std::move(two), use_tuple);
        CHECK(ec == client_errc::lock_lost);
        CHECK(co_await data_of(b, res) == "one");
        co_await g.release();
        guard empty;
        auto [eec, r3] = co_await empty.async_multi(std::move(three), use_tuple);
        CHECK(eec == client_errc::empty_guard);
        co_await b.async_remove(res);
    });
}

// Closing a latch that still queues deletes its node (the acquisition is cancelled) and leaves
// the leader alone; a waiting await_leadership completes with closed.
TEST_CASE("leader_latch: close while queued")
{
    run_with_clients({.name = "latch-close", .clients = 2}, [&](fixture& f) -> awaitable<void> {
        auto [a, b] = f.clients<2>();
        leader_latch la(a, f.path, with_id("leader"));
        leader_latch lb(b, f.path, with_id("waiter"));
        auto ta = co_await lead_with_waiter(la, lb);
        bool waiter_done = false;
        error_code waiter_ec;
        lb.async_await_leadership(std::chrono::steady_clock::duration::max(),
                                  [&](error_code ec, std::optional<leadership>) {
                                      waiter_ec = ec;
                                      waiter_done = true;
                                  });
        co_await lb.async_close(asio::use_awaitable);
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return waiter_done; }));
        CHECK(waiter_ec == client_errc::closed);
        // The queued node is deleted right after close completes (in the background).
        CHECK(co_await eventually([&]() -> awaitable<bool> {
            co_return (co_await la.async_participants(asio::use_awaitable)).size() == 1;
        }));
        auto parts = co_await la.async_participants(asio::use_awaitable);
        REQUIRE(parts.size() == 1);
        CHECK(parts[0].data == "leader");
        CHECK(la.is_leader());
        CHECK_FALSE(ta.lost());
        co_await la.async_close(asio::use_awaitable);
    });
}

// A cancelled wait for leadership ends at once with operation_aborted, partial cancellation as
// well as terminal (both documented), and the latch stays in the election: it leads once the
// leader goes. (The simulation found partial cancellation ignored: the wait ran to its deadline
// and reported a time-out.)
TEST_CASE("leader_latch: a cancelled wait ends with operation_aborted; the latch stays in the election")
{
    run_with_clients({.name = "latch-cancel", .clients = 2}, [&](fixture& f) -> awaitable<void> {
        auto [a, b] = f.clients<2>();
        leader_latch la(a, f.path, with_id("leader"));
        leader_latch lb(b, f.path, with_id("waiter"));
        auto ta = co_await lead_with_waiter(la, lb);
        for (auto type : {asio::cancellation_type::partial, asio::cancellation_type::terminal}) {
            CAPTURE(static_cast<int>(type));
            asio::cancellation_signal sig;
            bool done = false;
            error_code got;
            bool led = false;
            lb.async_await_leadership(30s, asio::bind_cancellation_slot(sig.slot(), [&](error_code ec, std::optional<leadership> l) {
                                          got = ec;
                                          led = l.has_value();
                                          done = true;
                                      }));
            sig.emit(type);
            // Bounded: the wait's own deadline is 30 s; a cancellation taken ends it at once.
            CHECK(co_await eventually([&]() -> awaitable<bool> { co_return done; }));
            CHECK(got == asio::error::operation_aborted);
            CHECK_FALSE(led);
        }
        CHECK((co_await la.async_participants(asio::use_awaitable)).size() == 2);
        co_await la.async_close(asio::use_awaitable);
        auto tb = co_await lb.await_leadership(5s);
        CHECK(tb.has_value());
        co_await lb.async_close(asio::use_awaitable);
    });
}

// Issue 38 on a leader latch: candidate B waits behind leader A, C behind B; B's node is deleted,
// then A closes. C leads; B must not think it leads beside C: it joins again behind C.
TEST_CASE("leader_latch: a candidate whose node was deleted does not lead when the leader goes")
{
    std::map<client*, std::unique_ptr<leader_latch>> latches;
    participant_ops ops{
        [&](client& c, const std::string& path, std::chrono::seconds timeout) -> awaitable<std::string> {
            auto& l = latches[&c];
            if (!l || l->path() != path)
                l = std::make_unique<leader_latch>(c, path);
            auto t = co_await l->await_leadership(timeout);
            co_return t ? t->node_path() : std::string();
        },
        [&](client& c) -> awaitable<void> { co_await latches[&c]->async_close(asio::use_awaitable); },
        [&] { latches.clear(); }};
    deleted_waiter_scenario("deleted-candidate", [](const std::string& p) { return p; }, ops, ops, ops, 1);
}
