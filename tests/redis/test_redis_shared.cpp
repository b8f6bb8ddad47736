// The Redis read-write lock (redis_shared_mutex) against a real redis-server: readers share (two
// inside at once), a writer excludes readers and writers (a count of who is inside), a waiting
// writer is not overtaken by a later reader, fencing tokens rise (a writer's above every earlier
// grant's), reentrancy, downgrade, upgrade refused, a waiting writer's deadline takes its mark
// away, a crashed reader (client closed; a forked child SIGKILLed) frees the lock after its TTL,
// the lost signal when keys are deleted under a holder, bad input, and no key left after
// everyone released but the fencing counter; several readers of one client renew their leases.
#include <zkcoro/redis_shared_mutex.hpp>

#include "redis_test_util.hpp"

#include <algorithm>
#include <csignal>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

using namespace rt;
using zkcoro::error_code;
using zkcoro::redis_errc;

namespace {

// The lock's keys (no hash tag in the test keys: the prefix is "{key}").
struct rw_names {
    explicit rw_names(std::string k)
        : key(std::move(k)), fencing("{" + key + "}:fencing"), readers("{" + key + "}:readers"),
          writers("{" + key + "}:writers")
    {
    }
    std::string key, fencing, readers, writers;
};

std::vector<std::string> existing(const zktest::redis_server& srv, const rw_names& n)
{
    std::vector<std::string> out;
    for (const auto& k : {n.key, n.fencing, n.readers, n.writers})
        if (count_of(srv, cmd("EXISTS", k)) == 1)
            out.push_back(k);
    return out;
}

// Waits (at most `limit`, asking every 5 ms) until the sorted set `zset` has `n` members.
asio::awaitable<bool> members(const zktest::redis_server& srv, const std::string& zset, std::int64_t n,
                              std::chrono::milliseconds limit = 3000ms)
{
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
        if (count_of(srv, cmd("ZCARD", zset)) == n)
            co_return true;
        co_await pause(5ms);
    }
    co_return false;
}

zkcoro::redis_shared_mutex_options rw_opts(std::chrono::milliseconds ttl, std::chrono::milliseconds writer = 0ms)
{
    zkcoro::redis_shared_mutex_options o;
    o.ttl = ttl;
    o.writer_timeout = writer;
    return o;
}

// The error an acquisition of `m` ends with within `limit` (no error: granted, then released).
asio::awaitable<error_code> code_of(zkcoro::basic_mutex<zkcoro::redis_lock_backend>& m,
                                    std::chrono::milliseconds limit = 1000ms)
{
    auto me = co_await zkcoro::this_task::id();
    auto [ec, g] = co_await m.async_acquire(me, limit, asio::as_tuple(asio::use_awaitable));
    if (g)
        co_await g->release();
    co_return ec;
}

}  // namespace

// Two readers of two clients are inside at once; a writer waits for both, is then granted with a
// token above theirs, and afterwards only the fencing counter is left.
TEST_CASE("read-write lock: readers share, a writer waits for every reader")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const rw_names n(unique_key("share"));
        zkcoro::redis_client a(ex, srv.url()), b(ex, srv.url()), c(ex, srv.url());
        zkcoro::redis_shared_mutex la(a, n.key, rw_opts(3000ms)), lb(b, n.key, rw_opts(3000ms)),
            lc(c, n.key, rw_opts(3000ms));
        auto r1 = co_await la.acquire_read(1s);
        REQUIRE(r1);
        auto r2 = co_await lb.acquire_read(1s);
        REQUIRE_MESSAGE(r2, "a second reader was not let in beside the first");
        CHECK(count_of(srv, cmd("ZCARD", n.readers)) == 2);
        CHECK(r2->fencing_token() > r1->fencing_token());
        // The readers as participants: two holders in read mode.
        auto ps = co_await lc.writer().async_participants(asio::use_awaitable);
        CHECK(ps.size() == 2);
        CHECK(std::all_of(ps.begin(), ps.end(), [](const auto& p) {
            return p.holds && p.mode == zkcoro::lock_mode::read;
        }));
        std::optional<std::int64_t> writer_token;
        event granted(ex);
        asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
            auto g = co_await lc.acquire_write(3s);
            if (g) {
                writer_token = g->fencing_token();
                co_await g->release();
            }
            granted.fire();
        }, asio::detached);
        const bool marked = co_await members(srv, n.writers, 1);
        REQUIRE_MESSAGE(marked, "the writer did not mark itself as waiting");
        co_await r1->release();
        co_await pause(100ms);
        CHECK_MESSAGE(!granted.set, "the writer was granted while a reader still held");
        co_await r2->release();
        const bool done = co_await granted.wait(1s);
        REQUIRE(done);
        REQUIRE(writer_token);
        CHECK(*writer_token > r2->fencing_token());
        CHECK(existing(srv, n) == std::vector<std::string>{n.fencing});
    });
}

// Tasks of three clients alternate reading and writing: never a writer with anyone else inside,
// readers inside together at some point, and each writer's token above every token seen before.
TEST_CASE("read-write lock: a writer excludes readers and writers, tokens rise")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const rw_names n(unique_key("exclude"));
        std::vector<std::unique_ptr<zkcoro::redis_client>> clients;
        std::vector<std::unique_ptr<zkcoro::redis_shared_mutex>> locks;
        for (int i = 0; i < 3; ++i) {
            clients.push_back(std::make_unique<zkcoro::redis_client>(ex, srv.url()));
            locks.push_back(std::make_unique<zkcoro::redis_shared_mutex>(*clients.back(), n.key, rw_opts(3000ms)));
        }
        int readers = 0, writers = 0, most_readers = 0, overlaps = 0, done = 0, grants = 0, failures = 0;
        std::int64_t highest = 0;
        int token_faults = 0;
        constexpr int tasks = 6, rounds = 6;
        event all_done(ex);
        for (int i = 0; i < tasks; ++i) {
            auto* m = locks[i % 3].get();
            asio::co_spawn(ex, [&, i, m]() -> asio::awaitable<void> {
                for (int round = 0; round < rounds; ++round) {
                    const bool write = (i + round) % 3 == 0;
                    std::optional<zkcoro::guard> g;
                    if (write)
                        g = co_await m->acquire_write(5s);
                    else
                        g = co_await m->acquire_read(5s);
                    if (!g) {
                        ++failures;
                        continue;
                    }
                    ++grants;
                    if (write) {
                        if (readers > 0 || writers > 0)
                            ++overlaps;
                        if (g->fencing_token() <= highest)
                            ++token_faults;
                        ++writers;
                    } else {
                        if (writers > 0)
                            ++overlaps;
                        most_readers = std::max(most_readers, ++readers);
                    }
                    highest = std::max(highest, g->fencing_token());
                    co_await pause(write ? 5ms : 20ms);
                    if (write)
                        --writers;
                    else
                        --readers;
                    co_await g->release();
                }
                if (++done == tasks)
                    all_done.fire();
            }, asio::detached);
        }
        const bool finished = co_await all_done.wait(15s);
        REQUIRE(finished);
        MESSAGE(grants << " grants, at most " << most_readers << " readers inside at once");
        CHECK(failures == 0);
        CHECK(grants == tasks * rounds);
        CHECK(overlaps == 0);
        CHECK(token_faults == 0);
        CHECK(most_readers >= 2);
        CHECK(existing(srv, n) == std::vector<std::string>{n.fencing});
    });
}

// A reader holds; a writer comes and waits; a reader that comes after the writer waits behind
// it: the writer is granted first when the first reader leaves.
TEST_CASE("read-write lock: a waiting writer is not overtaken by a later reader")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const rw_names n(unique_key("starve"));
        zkcoro::redis_client a(ex, srv.url()), b(ex, srv.url()), c(ex, srv.url());
        zkcoro::redis_shared_mutex la(a, n.key, rw_opts(3000ms)), lb(b, n.key, rw_opts(3000ms)),
            lc(c, n.key, rw_opts(3000ms));
        auto first = co_await la.acquire_read(1s);
        REQUIRE(first);
        std::vector<std::string> order;
        int done = 0;
        event both(ex);
        asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
            auto g = co_await lb.acquire_write(3s);
            if (g) {
                order.push_back("writer");
                co_await pause(30ms);
                co_await g->release();
            }
            if (++done == 2)
                both.fire();
        }, asio::detached);
        const bool marked = co_await members(srv, n.writers, 1);
        REQUIRE(marked);
        asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
            auto g = co_await lc.acquire_read(3s);
            if (g) {
                order.push_back("late reader");
                co_await g->release();
            }
            if (++done == 2)
                both.fire();
        }, asio::detached);
        // The late reader has tried (at least once) and waits: the first reader still holds.
        co_await pause(150ms);
        CHECK(order.empty());
        CHECK(count_of(srv, cmd("ZCARD", n.readers)) == 1);
        co_await first->release();
        const bool finished = co_await both.wait(3s);
        REQUIRE(finished);
        CHECK(order == std::vector<std::string>{"writer", "late reader"});
        CHECK(existing(srv, n) == std::vector<std::string>{n.fencing});
    });
}

// Both sides are reentrant per task; the write holder may read (downgrade) and keep reading
// after releasing the write lock, beside other readers; a reader asking to write is refused.
TEST_CASE("read-write lock: reentrancy, downgrade, upgrade refused")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const rw_names n(unique_key("reenter"));
        // (One task throughout: a downgrade is by the task holding the write lock through the
        // same lock object; through another object (lb, lc) it is any other participant.)
        zkcoro::redis_client a(ex, srv.url()), b(ex, srv.url());
        zkcoro::redis_shared_mutex la(a, n.key, rw_opts(3000ms)), lb(b, n.key, rw_opts(3000ms)),
            lc(b, n.key, rw_opts(3000ms));
        // Reentrant read, then reentrant write (one lease each: the same token).
        {
            auto r1 = co_await la.acquire_read(1s);
            REQUIRE(r1);
            auto r2 = co_await la.acquire_read(1s);
            REQUIRE(r2);
            CHECK(r2->fencing_token() == r1->fencing_token());
            CHECK(count_of(srv, cmd("ZCARD", n.readers)) == 1);
            // Upgrade: refused at once, nothing written.
            const auto t0 = std::chrono::steady_clock::now();
            const auto up = co_await code_of(la.writer());
            CHECK(up == zkcoro::client_errc::upgrade_not_supported);
            CHECK(ms_since(t0) < 200);
            CHECK(count_of(srv, cmd("EXISTS", n.key, n.writers)) == 0);
            co_await r2->release();
            co_await r1->release();
        }
        {
            auto w1 = co_await la.acquire_write(1s);
            REQUIRE(w1);
            auto w2 = co_await la.acquire_write(1s);
            REQUIRE(w2);
            CHECK(w2->fencing_token() == w1->fencing_token());
            co_await w2->release();
            // Downgrade: read while writing, then let the write lock go and keep reading.
            auto r = co_await la.acquire_read(1s);
            REQUIRE_MESSAGE(r, "the write holder could not take the read lock");
            CHECK(r->fencing_token() > w1->fencing_token());
            auto other = co_await lb.acquire_read(200ms);
            CHECK_FALSE(other);  // the write lock still excludes other readers
            co_await w1->release();
            CHECK_FALSE(r->lost());
            auto now_shared = co_await lb.acquire_read(1s);
            REQUIRE_MESSAGE(now_shared, "after the downgrade another reader could not join");
            auto writer = co_await lc.acquire_write(200ms);
            CHECK_FALSE(writer);  // readers (the downgraded one among them) exclude a writer
            co_await now_shared->release();
            co_await r->release();
        }
        CHECK(existing(srv, n) == std::vector<std::string>{n.fencing});
    });
}

// Several tasks of one client read at once, past several TTLs: each hold has its own lease and
// its own renewal (the backend renews every hold of its side), and none is lost.
TEST_CASE("read-write lock: readers of one client renew their own leases")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const rw_names n(unique_key("renew"));
        // 600 ms: with 300 ms, a renewal (every third of it) came too late on a loaded machine
        // (3 of 3 leases lost once, beside a simulation and two other tests on 2 cores).
        constexpr auto lease = 600ms;
        zkcoro::redis_client rc(ex, srv.url());
        zkcoro::redis_shared_mutex m(rc, n.key, rw_opts(lease));
        constexpr int tasks = 3;
        int inside = 0, done = 0, lost = 0, granted = 0;
        event all_in(ex), all_done(ex), go(ex);
        for (int i = 0; i < tasks; ++i)
            asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
                auto g = co_await m.acquire_read(1s);
                if (g) {
                    ++granted;
                    if (++inside == tasks)
                        all_in.fire();
                    (void)co_await go.wait(3s);
                    if (g->lost())
                        ++lost;
                    co_await g->release();
                }
                if (++done == tasks)
                    all_done.fire();
            }, asio::detached);
        const bool in = co_await all_in.wait(2s);
        REQUIRE_MESSAGE(in, "the readers of one client were not all let in");
        co_await pause(3 * lease);  // three TTLs: each lease renewed several times
        CHECK(count_of(srv, cmd("ZCARD", n.readers)) == tasks);
        go.fire();
        const bool finished = co_await all_done.wait(2s);
        REQUIRE(finished);
        CHECK(granted == tasks);
        CHECK(lost == 0);
        CHECK(existing(srv, n) == std::vector<std::string>{n.fencing});
    });
}

// A writer whose deadline passes while readers hold takes its waiting mark away: readers enter
// again at once, and no key is left.
TEST_CASE("read-write lock: a waiting writer's deadline takes its mark away")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const rw_names n(unique_key("deadline"));
        zkcoro::redis_client a(ex, srv.url()), b(ex, srv.url());
        zkcoro::redis_shared_mutex la(a, n.key, rw_opts(3000ms)), lb(b, n.key, rw_opts(3000ms));
        auto r = co_await la.acquire_read(1s);
        REQUIRE(r);
        auto w = co_await lb.acquire_write(200ms);
        CHECK_FALSE(w);
        const bool gone = co_await members(srv, n.writers, 0, 1000ms);
        CHECK_MESSAGE(gone, "the timed-out writer's mark stayed");
        const auto t0 = std::chrono::steady_clock::now();
        auto r2 = co_await lb.acquire_read(1s);
        REQUIRE(r2);
        CHECK(ms_since(t0) < 200);
        co_await r2->release();
        co_await r->release();
        CHECK(existing(srv, n) == std::vector<std::string>{n.fencing});
    });
}

// A reader whose client is gone stops renewing: its lease runs out after the TTL, and a writer
// is granted then, with a higher token.
TEST_CASE("read-write lock: a crashed reader's share goes after its TTL")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const rw_names n(unique_key("crashed-reader"));
        constexpr auto lease = 500ms;
        zkcoro::redis_client a(ex, srv.url()), b(ex, srv.url()), c(ex, srv.url());
        zkcoro::redis_shared_mutex la(a, n.key, rw_opts(lease)), lb(b, n.key, rw_opts(lease)),
            lc(c, n.key, rw_opts(3000ms));
        auto stays = co_await lc.acquire_read(1s);  // a live reader, released before the writer asks
        REQUIRE(stays);
        std::int64_t crashed_token = 0;
        {
            auto held = co_await la.acquire_read(1s);
            REQUIRE(held);
            crashed_token = held->fencing_token();
            a.close();  // no renewal, no release
        }
        co_await stays->release();
        const auto t0 = std::chrono::steady_clock::now();
        auto g = co_await lb.acquire_write(3s);
        REQUIRE(g);
        const auto took = ms_since(t0);
        MESSAGE("writer granted " << took << " ms after the reader's client closed (TTL " << lease.count() << " ms)");
        CHECK(took < lease.count() + 400);
        CHECK(g->fencing_token() > crashed_token);
        co_await g->release();
        CHECK(existing(srv, n) == std::vector<std::string>{n.fencing});
    });
}

// The same with a real crash: a reader in a forked child killed with SIGKILL.
TEST_CASE("read-write lock: a reader process killed with SIGKILL frees the lock after its TTL")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const rw_names n(unique_key("killed-reader"));
        constexpr auto lease = 500ms;
        const pid_t child = ::fork();
        if (child == 0) {
            // The child reads until it is killed (bounded: 15 s), never returning into the runner.
            try {
                asio::io_context cio;
                zkcoro::redis_client rc(cio.get_executor(), srv.url());
                zkcoro::redis_shared_mutex m(rc, n.key, rw_opts(lease));
                std::optional<zkcoro::guard> g;
                asio::co_spawn(cio, [&]() -> asio::awaitable<void> { g = co_await m.acquire_read(10s); },
                               asio::detached);
                cio.run_for(15s);
            } catch (...) {
            }
            std::_Exit(0);
        }
        REQUIRE(child > 0);
        struct reap {
            pid_t pid;
            ~reap()
            {
                ::kill(pid, SIGKILL);
                ::waitpid(pid, nullptr, 0);
            }
        } reaper{child};
        const bool reading = co_await members(srv, n.readers, 1);
        REQUIRE_MESSAGE(reading, "the child did not take the read lock");
        // Held across renewals (a second TTL): the child renews its lease.
        co_await pause(lease + 200ms);
        CHECK(count_of(srv, cmd("ZCARD", n.readers)) == 1);
        ::kill(child, SIGKILL);
        const auto t0 = std::chrono::steady_clock::now();
        zkcoro::redis_client rc(ex, srv.url());
        zkcoro::redis_shared_mutex m(rc, n.key, rw_opts(3000ms));
        auto g = co_await m.acquire_write(3s);
        REQUIRE(g);
        const auto took = ms_since(t0);
        MESSAGE("writer granted " << took << " ms after the reader was killed (TTL " << lease.count() << " ms)");
        CHECK(took < lease.count() + 400);
        co_await g->release();
        CHECK(existing(srv, n) == std::vector<std::string>{n.fencing});
    });
}

// The lost signal on either side: the readers' set or the write key deleted under its holder is
// found by the next renewal (every third of the TTL).
TEST_CASE("read-write lock: a holder whose keys are deleted under it is told by its lost signal")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const rw_names n(unique_key("lost"));
        zkcoro::redis_client rc(ex, srv.url());
        zkcoro::redis_shared_mutex m(rc, n.key, rw_opts(600ms));
        for (const bool write : {false, true}) {
            std::optional<zkcoro::guard> g;
            if (write)
                g = co_await m.acquire_write(1s);
            else
                g = co_await m.acquire_read(1s);
            REQUIRE(g);
            CHECK_FALSE(g->lost());
            srv.command(cmd("DEL", write ? n.key : n.readers));
            const auto t0 = std::chrono::steady_clock::now();
            event lost(ex);
            error_code lost_ec;
            g->async_wait_lost([&](error_code ec) {
                lost_ec = ec;
                lost.fire();
            });
            const bool told = co_await lost.wait(1500ms);
            REQUIRE_MESSAGE(told, (write ? "writer" : "reader") << " not told of its loss");
            MESSAGE((write ? "writer" : "reader") << ": loss signalled " << ms_since(t0) << " ms after the DEL");
            CHECK(lost_ec == zkcoro::client_errc::lock_lost);
            CHECK(ms_since(t0) < 600);
            co_await g->release();
        }
        CHECK(existing(srv, n) == std::vector<std::string>{n.fencing});
    });
}

// Bad keys and timeouts, and a key of the lock of another type, fail with a code that says
// which, and change nothing.
TEST_CASE("read-write lock: bad input gets bad_key, bad_ttl or wrong_type")
{
    auto& srv = shared_redis();
    asio::io_context ioc;
    zktest::run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_client rc(ex, srv.url());
        // (Each result apart: no co_await inside a condition, see docs/building.md, Compilers.)
        zkcoro::redis_shared_mutex empty(rc, "", rw_opts(1000ms));
        const auto empty_read = co_await code_of(empty.reader());
        CHECK(empty_read == redis_errc::bad_key);
        const auto empty_write = co_await code_of(empty.writer());
        CHECK(empty_write == redis_errc::bad_key);
        zkcoro::redis_shared_mutex long_key(rc, std::string(1025, 'k'), rw_opts(1000ms));
        const auto long_ec = co_await code_of(long_key.reader());
        CHECK(long_ec == redis_errc::bad_key);
        zkcoro::redis_shared_mutex short_ttl(rc, unique_key("bad"), rw_opts(50ms));
        const auto ttl_ec = co_await code_of(short_ttl.writer());
        CHECK(ttl_ec == redis_errc::bad_ttl);
        const rw_names bw(unique_key("bad-writer-timeout"));
        zkcoro::redis_shared_mutex short_wait(rc, bw.key, rw_opts(1000ms, 50ms));
        const auto wait_ec = co_await code_of(short_wait.reader());
        CHECK(wait_ec == redis_errc::bad_ttl);
        CHECK(existing(srv, bw).empty());
        for (const bool readers_bad : {true, false}) {
            const rw_names n(unique_key("wrongtype"));
            srv.command(cmd("SET", readers_bad ? n.readers : n.writers, "not a sorted set"));
            zkcoro::redis_shared_mutex m(rc, n.key, rw_opts(1000ms));
            const auto read_ec = co_await code_of(m.reader());
            CHECK(read_ec == redis_errc::wrong_type);
            const auto write_ec = co_await code_of(m.writer());
            CHECK(write_ec == redis_errc::wrong_type);
            CHECK(existing(srv, n) == std::vector<std::string>{readers_bad ? n.readers : n.writers});
            srv.command(cmd("DEL", n.readers, n.writers));
        }
        const rw_names s(unique_key("wrongtype-key"));
        srv.command(cmd("HSET", s.key, "f", "v"));
        zkcoro::redis_shared_mutex m(rc, s.key, rw_opts(1000ms));
        const auto key_ec = co_await code_of(m.reader());
        CHECK(key_ec == redis_errc::wrong_type);
        CHECK(existing(srv, s) == std::vector<std::string>{s.key});
        srv.command(cmd("DEL", s.key));
    });
}
