// Redis Cluster (issue 35 item 3): the slot rule against known values and against a real
// cluster's CLUSTER KEYSLOT, redis+cluster:// URLs, and the client's routing against a cluster of
// 3 masters + 3 replicas started by the test (redis_cluster.hpp): locks on keys in every shard,
// exclusion between two clients, rising fencing tokens, and a slot moved while its lock is held
// and waited for (ASK while it moves, MOVED once it has).
#include <zkcoro/detail/access.hpp>
#include <zkcoro/redis_mutex.hpp>
#include <zkcoro/redis_shared_mutex.hpp>
#include <zkcoro/redis_semaphore.hpp>

#include "../integration/common.hpp"
#include "redis/cluster.hpp"
#include "redis/redis_impl.hpp"
#include "redis/slot.hpp"
#include "redis_cluster.hpp"
#include "redis_test_util.hpp"

#include <boost/asio.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using zkcoro::error_code;
using zkcoro::redis_errc;
using zktest::run_bounded;
using rt::cmd;

namespace {

zktest::redis_cluster& shared_cluster()
{
    static zktest::redis_cluster c = [] {
        zktest::redis_cluster made;
        MESSAGE("cluster of 6 nodes up in " << made.start_time().count() << " ms");
        return made;
    }();
    return c;
}

const zkcoro::detail::cluster_router& router_of(const zkcoro::redis_client& c)
{
    const auto* r = zkcoro::detail::access::redis_of(c)->cluster();
    REQUIRE(r != nullptr);
    return *r;
}

// A lock name (without braces) whose tagged key {name} falls in a slot served by `port`.
std::string name_on(zktest::redis_cluster& c, std::uint16_t port, std::string_view prefix)
{
    for (int i = 0; i < 10000; ++i) {
        auto name = fmt::format("{}:{}:{}", prefix, ::getpid(), i);
        if (c.master_of_slot(zkcoro::detail::key_slot(name)) == port)
            return name;
    }
    FAIL("no name found for port " << port);
    return {};
}

zkcoro::redis_mutex_options ttl(std::chrono::milliseconds t)
{
    zkcoro::redis_mutex_options o;
    o.ttl = t;
    return o;
}

}  // namespace

// CRC16/XMODEM's check value, the specification's examples, and the hash tag rule's edges.
TEST_CASE("slots: CRC16 XMODEM mod 16384 of the hash tag, against known values")
{
    using zkcoro::detail::crc16_xmodem;
    using zkcoro::detail::hash_tag;
    using zkcoro::detail::key_slot;
    CHECK(crc16_xmodem("123456789") == 0x31C3);
    CHECK(crc16_xmodem("") == 0);
    CHECK(key_slot("foo") == 12182);
    CHECK(key_slot("bar") == 5061);
    CHECK(key_slot("") == 0);
    CHECK(hash_tag("{user1000}.following") == "user1000");
    CHECK(key_slot("{user1000}.following") == key_slot("{user1000}.followers"));
    CHECK(hash_tag("foo{}{bar}") == "foo{}{bar}");  // an empty tag: the whole key
    CHECK(hash_tag("foo{{bar}}zap") == "{bar");     // up to the first '}' after the first '{'
    CHECK(hash_tag("foo{bar}{zap}") == "bar");      // the first tag only
    CHECK(hash_tag("foo{bar") == "foo{bar");        // not closed: the whole key
    CHECK(hash_tag("}foo{bar}") == "bar");
    // The lock key on a cluster: its own name as its tag unless it has one.
    using zkcoro::detail::cluster_lock_key;
    CHECK(cluster_lock_key("locks:nightly") == "{locks:nightly}");
    CHECK(cluster_lock_key("{tenant7}:locks:nightly") == "{tenant7}:locks:nightly");
    CHECK(cluster_lock_key("a{}b") == "{a{}b}");
    CHECK(key_slot(cluster_lock_key("locks:nightly")) == key_slot(cluster_lock_key("locks:nightly") + ":fencing"));
    CHECK(key_slot("locks:nightly") != key_slot("locks:nightly:fencing"));  // untagged keys part ways
}

TEST_CASE("routing_key: the first key of EVALSHA, none for keyless commands, the first argument else")
{
    using zkcoro::detail::routing_key;
    auto key = [](std::vector<std::string_view> a) { return routing_key(a); };
    CHECK(key({"EVALSHA", "abc", "2", "k1", "k2", "v"}) == "k1");
    CHECK(key({"eval", "return 1", "0"}) == std::nullopt);
    CHECK(key({"GET", "k"}) == "k");
    CHECK(key({"set", "k", "v"}) == "k");
    CHECK(key({"PING"}) == std::nullopt);
    CHECK(key({"WAIT", "1", "100"}) == std::nullopt);
    CHECK(key({"publish", "ch", "m"}) == std::nullopt);
    CHECK(key({"OBJECT", "ENCODING", "k"}) == "k");
    CHECK(key({"XREAD", "COUNT", "1", "STREAMS", "s1", "0"}) == "s1");
}

TEST_CASE("redis+cluster:// URLs: seed nodes, credentials, and clear errors for the rest")
{
    error_code ec;
    std::string why;
    auto u = zkcoro::parse_redis_url("redis+cluster://u:pw@127.0.0.1:7000,[::1]:7001,node3", ec, &why);
    REQUIRE_FALSE(ec);
    REQUIRE(u.cluster_nodes.size() == 3);
    CHECK(u.cluster_nodes[0].host == "127.0.0.1");
    CHECK(u.cluster_nodes[0].port == 7000);
    CHECK(u.cluster_nodes[1].host == "::1");
    CHECK(u.cluster_nodes[2].port == 6379);
    CHECK(u.user == "u");
    CHECK(u.password == "pw");
    CHECK(u.host.empty());
    u = zkcoro::parse_redis_url("REDIS+CLUSTER://h:1", ec, &why);
    CHECK_FALSE(ec);
    const std::vector<std::pair<const char*, const char*>> bad = {
        {"redis+cluster://", "no cluster node is given"},
        {"redis+cluster://h:1/0", "database 0 only"},
        {"redis+cluster://h:1,", "cluster node 2 is empty"},
        {"redis+cluster://h:1,,h:2", "cluster node 2 is empty"},
        {"redis+cluster://h:1,h:99999", "cluster node 2: the port '99999'"},
        {"redis+cluster://:@h:1", "the password before '@' is empty"},
        {"rediss+cluster://h:1", "TLS is not supported"},
        {"cluster://h:1", "Redis Cluster URLs are redis+cluster://"},
        {"http://h:1", "redis+cluster://[[USER]:PASSWORD@]HOST:PORT"},
    };
    for (auto [text, expect] : bad) {
        CAPTURE(text);
        why.clear();
        zkcoro::parse_redis_url(text, ec, &why);
        CHECK(ec == redis_errc::bad_url);
        CHECK_MESSAGE(why.find(expect) != std::string::npos, why);
    }
    CHECK(zkcoro::redact_url("redis+cluster://u:secret@h:1,h:2") == "redis+cluster://u:***@h:1,h:2");
}

// Our slot of each key is the cluster's (CLUSTER KEYSLOT): tags, empty tags, nested braces.
TEST_CASE("slots agree with the cluster's CLUSTER KEYSLOT")
{
    auto& c = shared_cluster();
    std::vector<std::string> keys = {"foo", "bar", "", "{user1000}.following", "foo{}{bar}", "foo{{bar}}zap",
                                     "foo{bar}{zap}", "{}", "{", "}", "{{}}", "a{b}c", "locks:nightly",
                                     "{locks:nightly}:fencing", std::string("bin\0ary{\xff}", 10)};
    for (int i = 0; i < 200; ++i)
        keys.push_back(fmt::format("k{}:{{t{}}}:{}", i, i % 7, i * 7919));
    for (const auto& k : keys) {
        CAPTURE(k);
        CHECK(zkcoro::detail::key_slot(k) == c.keyslot(k));
    }
}

// In each shard: a lock held by one client excludes the other; released, the other gets it with
// a higher fencing token; the key lives on the master of its slot, under its tag.
TEST_CASE("redis_mutex on keys in every shard: exclusion between two clients, tokens rise")
{
    auto& c = shared_cluster();
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_client a(ex, c.url(1)), b(ex, c.url());
        co_await a.async_connect();
        CHECK(a.state() == zkcoro::redis_state::connected);
        for (auto port : c.master_ports()) {
            auto name = name_on(c, port, "shard");
            CAPTURE(name);
            zkcoro::redis_mutex ma(a, name, ttl(2s)), mb(b, name, ttl(2s));
            CHECK(ma.key() == "{" + name + "}");
            auto g1 = co_await ma.acquire(2s);
            REQUIRE(g1);
            CHECK(c.node_at(port).command(cmd("EXISTS", ma.key(), ma.key() + ":fencing")) == "2");
            CHECK_FALSE(co_await mb.try_acquire());
            CHECK_FALSE(co_await mb.acquire(200ms));
            const auto first = g1->fencing_token();
            co_await g1->release();
            auto g2 = co_await mb.acquire(2s);
            REQUIRE(g2);
            CHECK(g2->fencing_token() > first);
            co_await g2->release();
            CHECK(c.node_at(port).command(cmd("EXISTS", ma.key())) == "0");
        }
        // Plain commands go to their key's master; keyless ones to any master.
        auto r = co_await a.async_exec(cmd("PING"));
        CHECK(r.str == "PONG");
        for (int i = 0; i < 30; ++i) {
            auto k = fmt::format("plain:{}:{}", ::getpid(), i);
            co_await a.async_exec(cmd("SET", k, "v"));
            CHECK(c.node_at(c.master_of_slot(c.keyslot(k))).command(cmd("GET", k)) == "v");
            co_await a.async_exec(cmd("DEL", k));
        }
        CHECK(router_of(a).moved == 0);
        CHECK(router_of(a).asked == 0);
        CHECK_FALSE(a.server().empty());
        a.close();
        b.close();
    });
}

// The semaphore in each shard: its keys all on the master of its name's slot ({name}:...), 2
// leases of 2 exclude a second client, whose waiter is told of the release (sooner than its own
// refresh); tokens rise; only the counter is left.
TEST_CASE("redis_semaphore on keys in every shard: keys on one master, exclusion, release told, tokens rise")
{
    auto& c = shared_cluster();
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_client a(ex, c.url(1)), b(ex, c.url());
        zkcoro::redis_semaphore_options o;
        o.ttl = 2s;
        o.waiter_timeout = 3s;  // a waiter comes back on its own every second
        for (auto port : c.master_ports()) {
            auto name = name_on(c, port, "sem");
            CAPTURE(name);
            zkcoro::redis_semaphore sa(a, name, 2, o), sb(b, name, 2, o);
            auto g1 = co_await sa.acquire(2, 2s);
            REQUIRE(g1);
            const auto p = "{" + name + "}";
            CHECK(c.node_at(port).command(cmd("EXISTS", p + ":leases", p + ":max", p + ":fencing")) == "3");
            std::optional<zkcoro::guard> g2;
            std::chrono::steady_clock::time_point released, granted;
            rt::event got(ex);
            asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
                g2 = co_await sb.acquire(1, 3s);
                granted = std::chrono::steady_clock::now();
                got.fire();
            }, asio::detached);
            bool waiting = false;
            for (int i = 0; i < 200 && !waiting; ++i) {
                waiting = c.node_at(port).command(cmd("LLEN", p + ":queue")) == "1";
                if (!waiting)
                    co_await rt::pause(5ms);
            }
            REQUIRE(waiting);
            released = std::chrono::steady_clock::now();
            co_await g1->release();
            const bool told = co_await got.wait(2s);
            REQUIRE(told);
            REQUIRE(g2);
            CHECK(granted - released < 500ms);
            CHECK(g2->fencing_token() > g1->fencing_token());
            co_await g2->release();
            CHECK(c.node_at(port).command(cmd("EXISTS", p + ":leases", p + ":queue", p + ":timeouts", p + ":max")) ==
                  "0");
        }
        a.close();
        b.close();
    });
}

// The lock's slot moves from one master to another while it is held and another client waits:
// while the slot is migrating (its keys already on the target) commands meet ASK and are sent
// with ASKING to the target (the holder's renewal and release); the waiter's acquire, whose keys
// are then partly moved, meets TRYAGAIN until the slot is assigned to the target; from then on
// MOVED updates the map. No two holders; the waiter gets the lock after the release, with a
// higher token.
TEST_CASE("resharding a held lock's slot: ASK and TRYAGAIN while it moves, MOVED after; the waiter gets it")
{
    auto& c = shared_cluster();
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        auto masters = c.master_ports();
        const auto from = masters[0], to = masters[1];
        auto name = name_on(c, from, "move");
        const int slot = zkcoro::detail::key_slot(name);
        zkcoro::redis_client a(ex, c.url()), b(ex, c.url());
        zkcoro::redis_mutex ma(a, name, ttl(3s)), mb(b, name, ttl(3s));
        auto g1 = co_await ma.acquire(2s);
        REQUIRE(g1);
        const auto first = g1->fencing_token();
        // b waits for it.
        std::optional<zkcoro::guard> g2;
        bool b_done = false;
        asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
            g2 = co_await mb.acquire(15s);
            b_done = true;
        }, asio::detached);
        co_await rt::pause(100ms);
        CHECK_FALSE(b_done);
        // Move the slot's keys: IMPORTING on the target, MIGRATING on the source, MIGRATE.
        const auto from_id = c.node_id(from), to_id = c.node_id(to);
        c.node_at(to).command(cmd("CLUSTER", "SETSLOT", std::to_string(slot), "IMPORTING", from_id));
        c.node_at(from).command(cmd("CLUSTER", "SETSLOT", std::to_string(slot), "MIGRATING", to_id));
        c.node_at(from).command(cmd("MIGRATE", "127.0.0.1", std::to_string(to), "", "0", "5000", "KEYS", ma.key(),
                                    ma.key() + ":fencing"));
        // The holder renews through ASK (its TTL is 3 s: renewed every second), b still waits.
        co_await rt::pause(1500ms);
        CHECK_FALSE(g1->lost());
        CHECK_FALSE(b_done);
        CHECK(router_of(a).asked > 0);
        // Released through ASK. b is told (PUBLISH reaches every node) and tries: its acquire
        // script names the key (free: on neither node) and the fencing counter (moved), which
        // the target refuses with TRYAGAIN while the slot migrates: b keeps trying.
        co_await g1->release();
        for (int i = 0; i < 100 && router_of(b).tried_again == 0; ++i)
            co_await rt::pause(20ms);
        CHECK(router_of(b).tried_again > 0);
        CHECK_FALSE(b_done);
        // The slot is the target's now, on every master: b's next try meets MOVED, and is granted.
        for (auto p : masters)
            c.node_at(p).command(cmd("CLUSTER", "SETSLOT", std::to_string(slot), "NODE", to_id));
        for (int i = 0; i < 100 && !b_done; ++i)
            co_await rt::pause(20ms);
        REQUIRE(b_done);
        REQUIRE(g2);
        CHECK(g2->fencing_token() > first);
        CHECK(router_of(b).moved > 0);
        co_await g2->release();
        CHECK(c.node_at(to).command(cmd("EXISTS", ma.key())) == "0");
        CHECK(c.node_at(to).command(cmd("EXISTS", ma.key() + ":fencing")) == "1");
        // a's map (ASK left it as it was) still names the source: MOVED, then granted.
        auto g3 = co_await ma.acquire(2s);
        REQUIRE(g3);
        CHECK(g3->fencing_token() > g2->fencing_token());
        CHECK(router_of(a).moved > 0);
        co_await g3->release();
        MESSAGE("a: moved " << router_of(a).moved << " asked " << router_of(a).asked << " refreshes "
                            << router_of(a).refreshes << "; b: moved " << router_of(b).moved << " asked "
                            << router_of(b).asked << " tryagain " << router_of(b).tried_again);
        // Move it back so the other cases see the cluster as it was.
        c.node_at(from).command(cmd("CLUSTER", "SETSLOT", std::to_string(slot), "IMPORTING", to_id));
        c.node_at(to).command(cmd("CLUSTER", "SETSLOT", std::to_string(slot), "MIGRATING", from_id));
        c.node_at(to).command(cmd("MIGRATE", "127.0.0.1", std::to_string(from), "", "0", "5000", "KEYS",
                                  ma.key() + ":fencing"));
        for (auto p : masters)
            c.node_at(p).command(cmd("CLUSTER", "SETSLOT", std::to_string(slot), "NODE", from_id));
        a.close();
        b.close();
    });
}

// Replica-acknowledged grants, the default on a cluster (WAIT 1): the WAIT goes to the master of
// the lock's slot, on the connection the script ran on (INFO commandstats of that master counts
// it). Negative control: that shard's replica frozen (SIGSTOP by PID, SIGCONT after), the grant
// is not confirmed: not_replicated, and the key is given back.
TEST_CASE("on a cluster a grant waits for the shard's replica (WAIT 1 on the lock's master); frozen replica: not_replicated")
{
    auto& c = shared_cluster();
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const auto port = c.master_ports()[2];
        auto& master = c.node_at(port);
        const auto replica = c.replica_of(port);
        REQUIRE(replica != 0);
        zkcoro::redis_options o;
        o.replica_ack_timeout = 200ms;
        zkcoro::redis_client a(ex, c.url(), o);
        zkcoro::redis_mutex m(a, name_on(c, port, "acked"), ttl(3s));
        const auto waits = master.command_calls("wait");
        auto g = co_await m.acquire(2s);
        REQUIRE(g);
        CHECK(master.command_calls("wait") >= waits + 1);
        co_await g->release();
        c.node_at(replica).pause();
        auto [ec, g2] = co_await m.async_acquire(1, 2s, asio::as_tuple(asio::use_awaitable));
        c.node_at(replica).resume();
        CHECK(ec == redis_errc::not_replicated);
        co_await rt::pause(100ms);  // the take-back
        CHECK(master.command(cmd("EXISTS", m.key())) == "0");
        a.close();
    });
}

// A redis+cluster:// client pointed at a server without cluster support fails with the server's
// text at once.
TEST_CASE("redis+cluster:// at a server without cluster support: a clear error, not a hang")
{
    auto& srv = rt::shared_redis();
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_client rc(ex, fmt::format("redis+cluster://127.0.0.1:{}", srv.port()));
        auto [ec] = co_await rc.async_connect(asio::as_tuple(asio::use_awaitable));
        CHECK(ec == redis_errc::error_reply);
        CHECK(rc.state() == zkcoro::redis_state::closed);
        CHECK_MESSAGE(rc.last_error().find("cluster support disabled") != std::string::npos, rc.last_error());
        auto [xec, xr] = co_await rc.async_exec(cmd("GET", "k"), asio::as_tuple(asio::use_awaitable));
        CHECK(xec == redis_errc::error_reply);
    });
}

// The read-write lock (redis_shared_mutex) on a cluster: its keys (the name, {name}:fencing,
// {name}:readers, {name}:writers) on the name's master; two readers of two clients share, a
// writer waits for both and is then granted with a higher token; only the counter is left.
TEST_CASE("redis_shared_mutex on a cluster: readers share, a writer waits, keys on one shard")
{
    auto& c = shared_cluster();
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const auto port = c.master_ports()[2];
        const auto name = name_on(c, port, "rw");
        zkcoro::redis_client a(ex, c.url(1)), b(ex, c.url());
        zkcoro::redis_shared_mutex la(a, name, {.ttl = 2s}), lb(b, name, {.ttl = 2s});
        auto r1 = co_await la.acquire_read(2s);
        REQUIRE(r1);
        auto r2 = co_await lb.acquire_read(2s);
        REQUIRE(r2);
        auto& master = c.node_at(port);
        CHECK(master.command(cmd("ZCARD", "{" + name + "}:readers")) == "2");
        std::optional<std::int64_t> token;
        rt::event granted(ex);
        asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
            zkcoro::redis_shared_mutex lw(b, name, {.ttl = 2s});
            auto g = co_await lw.acquire_write(3s);
            if (g) {
                token = g->fencing_token();
                CHECK(master.command(cmd("EXISTS", name)) == "1");
                co_await g->release();
            }
            granted.fire();
        }, asio::detached);
        bool marked = false;
        for (int i = 0; i < 200 && !marked; ++i) {
            marked = master.command(cmd("ZCARD", "{" + name + "}:writers")) == "1";
            if (!marked)
                co_await rt::pause(5ms);
        }
        CHECK_MESSAGE(marked, "the writer did not mark itself as waiting on the name's master");
        co_await r1->release();
        CHECK_FALSE(granted.set);  // r2 still reads
        co_await r2->release();
        const bool done = co_await granted.wait(3s);
        REQUIRE(done);
        REQUIRE(token);
        CHECK(*token > r2->fencing_token());
        CHECK(master.command(cmd("EXISTS", name, "{" + name + "}:readers", "{" + name + "}:writers")) == "0");
        CHECK(master.command(cmd("EXISTS", "{" + name + "}:fencing")) == "1");
        a.close();
        b.close();
    });
}

// Issue 35 item 5: a shard with all its nodes stopped (its master and its replica, SIGTERM by
// PID): an acquisition of a lock in its slots ends by its deadline with the reason, not a hang.
// Last in the file: the cluster stays without that shard.
TEST_CASE("a shard with all its nodes stopped: the acquisition ends by its deadline, with the reason")
{
    auto& c = shared_cluster();
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const auto port = c.master_ports()[1];
        const auto replica = c.replica_of(port);
        REQUIRE(replica != 0);
        zkcoro::redis_client a(ex, c.url());
        zkcoro::redis_mutex m(a, name_on(c, port, "down"), ttl(2s));
        auto g = co_await m.acquire(2s);  // the master's link is open
        REQUIRE(g);
        co_await g->release();
        c.node_at(replica).stop();
        c.node_at(port).stop();
        const auto t0 = std::chrono::steady_clock::now();
        auto [ec, g2] = co_await m.async_acquire(1, 1500ms, asio::as_tuple(asio::use_awaitable));
        const auto took = std::chrono::steady_clock::now() - t0;
        MESSAGE("after " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms: "
                         << ec.message());
        CHECK_FALSE(g2);
        CHECK(ec == redis_errc::connection_lost);  // the master's connection dropped under it
        CHECK(took < 3s);
        a.close();
    }, 20s);
}
