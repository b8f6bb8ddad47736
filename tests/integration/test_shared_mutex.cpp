// The read-write lock against a real ZooKeeper.
#include "common.hpp"
#include "deleted_waiter.hpp"

#include <map>

using namespace zktest;
using namespace zkcoro;
using asio::awaitable;

namespace {

awaitable<std::vector<std::string>> sorted_children(client& c, const std::string& path)
{
    auto r = co_await c.async_get_children(path);
    sort_read_write(r.children);
    co_return r.children;
}

}  // namespace

// Readers share the lock; a writer waits for them and then excludes everyone.
TEST_CASE("readers overlap, a writer excludes")
{
    run_with_clients({.name = "rw", .clients = 3}, [&](fixture& f) -> awaitable<void> {
        auto [a, b, c] = f.clients<3>();
        auto& path = f.path;
        shared_mutex ra(a, path), rb(b, path), rc(c, path);
        auto r1 = co_await ra.acquire_read();
        auto r2 = co_await rb.acquire_read(2s);
        CHECK(r2.has_value());  // two readers at once
        CHECK(node_name(r1.node_path()).find("__READ__") != std::string::npos);
        CHECK_FALSE((co_await rc.acquire_write(300ms)).has_value());  // blocked by both readers
        co_await r1.release();
        CHECK_FALSE((co_await rc.acquire_write(300ms)).has_value());  // b's reader still blocks it
        co_await r2->release();
        auto w = co_await rb.acquire_write(2s);
        REQUIRE(w.has_value());
        CHECK(node_name(w->node_path()).find("__WRIT__") != std::string::npos);
        CHECK_FALSE((co_await ra.acquire_read(300ms)).has_value());   // a writer excludes readers
        CHECK_FALSE((co_await ra.acquire_write(300ms)).has_value());  // and writers
        co_await w->release();
        CHECK((co_await ra.acquire_read(2s)).has_value());
    });
}

// The participants, by the lock's own rules: the readers that hold first, then the waiting
// writer, each with its mode; the semaphore and the multi-lock answer the same question.
TEST_CASE("participants: holders first, with their mode")
{
    run_with_clients({.name = "rwparts", .clients = 3}, [&](fixture& f) -> awaitable<void> {
        auto [a, b, c] = f.clients<3>();
        shared_mutex ra(a, f.path), rb(b, f.path), rc(c, f.path);
        auto r1 = co_await ra.acquire_read();
        auto r2 = co_await rb.acquire_read();
        std::optional<guard> w;
        rc.writer().async_acquire(7, 20s, [&](error_code, std::optional<guard> g) { w = std::move(g); });
        REQUIRE(co_await eventually([&]() -> awaitable<bool> { co_return (co_await sorted_children(a, f.path)).size() == 3; }));
        auto parts = co_await ra.async_participants();
        REQUIRE(parts.size() == 3);
        CHECK(parts[0].mode == lock_mode::read);
        CHECK(parts[0].holds);
        CHECK(parts[1].mode == lock_mode::read);
        CHECK(parts[1].holds);
        CHECK(parts[2].mode == lock_mode::write);
        CHECK_FALSE(parts[2].holds);
        CHECK(parts[2].session_id == c.session().id);
        co_await r1.release();
        co_await r2.release();
        REQUIRE(co_await eventually([&]() -> awaitable<bool> { co_return w.has_value(); }));
        parts = co_await rb.async_participants();
        REQUIRE(parts.size() == 1);
        CHECK(parts[0].mode == lock_mode::write);
        CHECK(parts[0].holds);
        co_await w->release();

        // A semaphore of 2 with 2 leases taken: both hold, as leases.
        semaphore sa(a, f.path + "-sem", 2), sb(b, f.path + "-sem", 2);
        auto l1 = co_await sa.acquire();
        auto l2 = co_await sb.acquire();
        auto leases = co_await sa.async_participants();
        REQUIRE(leases.size() == 2);
        CHECK(leases[0].mode == lock_mode::lease);
        CHECK(leases[0].holds);
        CHECK(leases[1].holds);
        for (auto& l : l1)
            co_await l.release();
        for (auto& l : l2)
            co_await l.release();

        // A multi-lock lists each member's queue in the order it takes them.
        mutex m1(a, f.path + "-m1"), m2(a, f.path + "-m2");
        multi_lock ml({lock_ref(m2), lock_ref(m1)});
        auto all = co_await ml.acquire();
        auto members = co_await ml.async_participants();
        REQUIRE(members.size() == 2);
        CHECK(members[0].path.rfind(f.path + "-m1/", 0) == 0);
        CHECK(members[1].path.rfind(f.path + "-m2/", 0) == 0);
        CHECK(members[0].holds);
        CHECK(members[1].holds);
        CHECK(members[0].mode == lock_mode::exclusive);
        co_await all.release();
    });
}

// A waiting writer is not starved: readers that come after it queue behind it.
TEST_CASE("a waiting writer is served before later readers")
{
    run_with_clients({.name = "fair", .clients = 3}, [&](fixture& f) -> awaitable<void> {
        auto [a, b, c] = f.clients<3>();
        auto& path = f.path;
        shared_mutex ra(a, path), wb(b, path), rc(c, path);
        auto r1 = co_await ra.acquire_read();
        std::vector<std::string> order;
        std::optional<guard> wg, rg;
        wb.writer().async_acquire(1, 10s, [&](error_code, std::optional<guard> g) {
            order.push_back("writer");
            wg = std::move(g);
        });
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return (co_await sorted_children(a, path)).size() == 2; }));
        rc.reader().async_acquire(2, 10s, [&](error_code, std::optional<guard> g) {
            order.push_back("late reader");
            rg = std::move(g);
        });
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return (co_await sorted_children(a, path)).size() == 3; }));
        CHECK(order.empty());  // the late reader does not join the first reader past the writer
        co_await r1.release();
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return wg.has_value(); }));
        CHECK(order == std::vector<std::string>{"writer"});
        co_await wg->async_release(asio::use_awaitable);
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return rg.has_value(); }));
        CHECK(order == std::vector<std::string>{"writer", "late reader"});
        co_await rg->async_release(asio::use_awaitable);
    });
}

// Downgrade: write held, read taken at once, write released, reading goes on and writers wait.
TEST_CASE("downgrade from write to read")
{
    run_with_clients({.name = "down", .clients = 2}, [&](fixture& f) -> awaitable<void> {
        auto [a, b] = f.clients<2>();
        auto& path = f.path;
        shared_mutex ma(a, path), mb(b, path);
        auto w = co_await ma.acquire_write();
        // A writer of another session queues behind our write node.
        std::optional<guard> other;
        mb.writer().async_acquire(3, 10s, [&](error_code, std::optional<guard> g) { other = std::move(g); });
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return (co_await sorted_children(a, path)).size() == 2; }));
        auto r = co_await ma.acquire_read(1s);
        REQUIRE(r.has_value());
        // The read node reuses the write node's sequence and sorts right after it.
        auto kids = co_await sorted_children(a, path);
        REQUIRE(kids.size() == 3);
        CHECK(kids[0] == std::string(node_name(w.node_path())));
        CHECK(kids[1] == std::string(node_name(r->node_path())));
        co_await w.release();
        asio::steady_timer t(co_await asio::this_coro::executor, 300ms);
        co_await t.async_wait(asio::use_awaitable);
        CHECK_FALSE(other.has_value());  // we still read: the other writer waits
        co_await r->release();
        CHECK(co_await eventually([&]() -> awaitable<bool> { co_return other.has_value(); }));
        co_await other->async_release(asio::use_awaitable);
    });
}

// Upgrade fails at once instead of deadlocking, and leaves no node.
TEST_CASE("upgrade from read to write is refused")
{
    run_with_clients({.name = "up"}, [&](fixture& f) -> awaitable<void> {
        auto& a = f.client();
        auto& path = f.path;
        shared_mutex m(a, path);
        auto r = co_await m.acquire_read();
        auto [ec, g] = co_await m.writer().async_acquire(co_await this_task::id(), 5s, asio::as_tuple(asio::use_awaitable));
        CHECK(ec == client_errc::upgrade_not_supported);
        CHECK(ec.message().find("release the read lock first") != std::string::npos);
        CHECK((co_await sorted_children(a, path)).size() == 1);
        co_await r.release();
        // Reentrancy on both sides.
        auto w1 = co_await m.acquire_write();
        auto w2 = co_await m.acquire_write();
        CHECK(w1.node_path() == w2.node_path());
        co_await w2.release();
        co_await w1.release();
    });
}

namespace {

// One shared_mutex per client, each participant on the side `write` says (deleted_waiter.hpp).
struct rw_participants {
    std::map<client*, std::pair<std::unique_ptr<shared_mutex>, guard>> held;
    participant_ops side(bool write)
    {
        return participant_ops{
            [this, write](client& c, const std::string& path, std::chrono::seconds timeout) -> awaitable<std::string> {
                auto& [m, g] = held[&c];
                if (!m || m->path() != path)
                    m = std::make_unique<shared_mutex>(c, path);
                // Two statements, not a conditional: GCC 12 miscompiles a co_await in a conditional.
                std::optional<guard> r;
                if (write)
                    r = co_await m->acquire_write(timeout);
                else
                    r = co_await m->acquire_read(timeout);
                if (!r)
                    co_return std::string();
                g = std::move(*r);
                co_return g.node_path();
            },
            [this](client& c) -> awaitable<void> { co_await held[&c].second.release(); },
            [this] { held.clear(); }};
    }
};

}  // namespace

// Issue 38 on a read lock: a reader waits behind one writer (whose deletion grants it at once),
// a writer behind the reader; the reader's node is deleted, then the first writer releases.
TEST_CASE("a reader whose node was deleted is not granted when the writer before it goes")
{
    rw_participants p;
    deleted_waiter_scenario("deleted-reader", [](const std::string& path) { return path; }, p.side(true),
                            p.side(false), p.side(true));
}

// The same on the write side (a write lock re-lists after its predecessor's deletion).
TEST_CASE("a writer whose node was deleted is not granted when the writer before it goes")
{
    rw_participants p;
    deleted_waiter_scenario("deleted-writer", [](const std::string& path) { return path; }, p.side(true),
                            p.side(true), p.side(true), 1);
}
