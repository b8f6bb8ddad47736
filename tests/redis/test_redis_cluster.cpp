// Redis Cluster (issue 35 item 3): the slot rule against known values and against a real
// cluster's CLUSTER KEYSLOT, redis+cluster:// URLs, and the client's routing against a cluster of
// 3 masters + 3 replicas started by the test (redis_cluster.hpp): locks on keys in every shard,
// exclusion between two clients, rising fencing tokens, and a slot moved while its lock is held
// and waited for (ASK while it moves, MOVED once it has).
#include <zkcoro/detail/access.hpp>
#include <zkcoro/multi_lock.hpp>
#include <zkcoro/redis_fair_mutex.hpp>
#include <zkcoro/redis_mutex.hpp>
#include <zkcoro/redis_shared_mutex.hpp>
#include <zkcoro/redis_semaphore.hpp>

#include "../integration/common.hpp"
#include "redis/cluster.hpp"
#include "redis/redis_impl.hpp"
#include "redis/slot.hpp"
#include "redis_cluster.hpp"
#include "redis_test_util.hpp"

#include <interval_checker.hpp>

#include <boost/asio.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <optional>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using zkcoro::error_code;
using zkcoro::redis_errc;
using zktest::run_bounded;
using rt::cmd;
using rt::ttl;

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
        // Released through ASK: its SPUBLISH runs on the target, where b does not listen yet (b
        // subscribed on the source), so b tries again at the key's expiry (its TTL when b last
        // looked, about 3 s after b's first attempt): its acquire script names the key (free: on
        // neither node) and the fencing counter (moved), which the target refuses with TRYAGAIN
        // while the slot migrates: b keeps trying.
        co_await g1->release();
        for (int i = 0; i < 200 && router_of(b).tried_again == 0; ++i)
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
        // b learnt the slot's new master from a MOVED, or from the source unsubscribing it from
        // the lock's shard channel (its slot left: b reads the map again, subscribes at the target
        // and looks again), whichever came first.
        CHECK(router_of(b).moved + router_of(b).refreshes >= 2);
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

// A slot left migrating with the lock's keys partly moved (its fencing counter on the target, the
// key on neither node): the acquire script meets TRYAGAIN; past the router's 2 s of it the
// command completes with try_again, which is retriable: the acquisition tries again until its
// deadline and then fails with try_again (it failed at 2 s with error_reply before). Once the
// slot is assigned to the target, an acquisition waiting meanwhile is granted.
TEST_CASE("TRYAGAIN for over 2 s: try_again, retried until the acquisition's deadline; granted once the move ends")
{
    auto& c = shared_cluster();
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        auto masters = c.master_ports();
        const auto from = masters[1], to = masters[2];
        auto name = name_on(c, from, "tryagain");
        const int slot = zkcoro::detail::key_slot(name);
        zkcoro::redis_client a(ex, c.url());
        zkcoro::redis_mutex m(a, name, ttl(2s));
        auto g = co_await m.acquire(2s);  // the counter exists, the key goes with the release
        REQUIRE(g);
        const auto first = g->fencing_token();
        co_await g->release();
        const auto from_id = c.node_id(from), to_id = c.node_id(to);
        c.node_at(to).command(cmd("CLUSTER", "SETSLOT", std::to_string(slot), "IMPORTING", from_id));
        c.node_at(from).command(cmd("CLUSTER", "SETSLOT", std::to_string(slot), "MIGRATING", to_id));
        c.node_at(from).command(cmd("MIGRATE", "127.0.0.1", std::to_string(to), "", "0", "5000", "KEYS",
                                    m.key() + ":fencing"));
        const auto t0 = std::chrono::steady_clock::now();
        auto [ec, none] = co_await m.async_acquire(1, 2600ms, asio::as_tuple(asio::use_awaitable));
        const auto took = std::chrono::steady_clock::now() - t0;
        MESSAGE("after " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                         << " ms: " << ec.message() << "; TRYAGAIN met " << router_of(a).tried_again
                         << " times, answered " << router_of(a).try_again_answers << " times");
        CHECK_FALSE(none);
        CHECK(ec == redis_errc::try_again);
        CHECK(zkcoro::classify(ec) == zkcoro::error_kind::retriable);
        CHECK(took >= 2500ms);
        // The router's 2 s of TRYAGAIN ended in a try_again answer, and the acquisition went on
        // past it to its deadline (took, above). Time, not a count of tries: under the sanitizers
        // on a busy machine 100 tries took 3.1 s, past this deadline (it timed out instead).
        CHECK(router_of(a).try_again_answers >= 1);
        // Waiting again; the move ends meanwhile: granted, higher token.
        std::optional<zkcoro::guard> got;
        rt::event done(ex);
        asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
            got = co_await m.acquire(3s);
            done.fire();
        }, asio::detached);
        co_await rt::pause(300ms);
        CHECK_FALSE(done.set);
        const auto t1 = std::chrono::steady_clock::now();
        for (auto p : masters)
            c.node_at(p).command(cmd("CLUSTER", "SETSLOT", std::to_string(slot), "NODE", to_id));
        REQUIRE(co_await done.wait(3s));
        MESSAGE("granted " << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t1).count()
                           << " ms after the slot was assigned");
        REQUIRE(got);
        CHECK(got->fencing_token() > first);
        co_await got->release();
        // Back where it was, for the other cases.
        c.node_at(from).command(cmd("CLUSTER", "SETSLOT", std::to_string(slot), "IMPORTING", to_id));
        c.node_at(to).command(cmd("CLUSTER", "SETSLOT", std::to_string(slot), "MIGRATING", from_id));
        c.node_at(to).command(cmd("MIGRATE", "127.0.0.1", std::to_string(from), "", "0", "5000", "KEYS",
                                  m.key() + ":fencing"));
        for (auto p : masters)
            c.node_at(p).command(cmd("CLUSTER", "SETSLOT", std::to_string(slot), "NODE", from_id));
        a.close();
    });
}

// Issue 35 item 3: release notifications with sharded pub/sub on the lock's shard. A waiter of
// another client, behind a holder with a 3 s TTL, is woken by the release's SPUBLISH (granted
// within 500 ms; its own timer would wake it at the key's expiry, 3 s on): the channel is a shard
// channel of the lock's master only (PUBSUB SHARDNUMSUB there; none elsewhere), the release ran
// SPUBLISH on that master, and no node ran PUBLISH.
TEST_CASE("sharded pub/sub: a waiter is woken by the release's SPUBLISH on the lock's shard")
{
    auto& c = shared_cluster();
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const auto masters = c.master_ports();
        const auto port = masters[1];
        auto& master = c.node_at(port);
        zkcoro::redis_client a(ex, c.url()), b(ex, c.url());
        const auto name = name_on(c, port, "spub");
        zkcoro::redis_mutex ma(a, name, ttl(3s)), mb(b, name, ttl(3s));
        const auto channel = ma.key() + ":released";
        std::map<std::uint16_t, std::int64_t> publish_before;
        for (auto p : masters)
            publish_before[p] = c.node_at(p).command_calls("publish");
        const auto spublish_before = master.command_calls("spublish");
        auto g1 = co_await ma.acquire(2s);
        REQUIRE(g1);
        std::optional<zkcoro::guard> g2;
        rt::event granted(ex);
        asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
            g2 = co_await mb.acquire(10s);
            granted.fire();
        }, asio::detached);
        // b subscribed on the lock's master (its shard), nowhere else.
        std::string subs;
        for (int i = 0; i < 100; ++i) {
            subs = master.command(cmd("PUBSUB", "SHARDNUMSUB", channel));
            if (subs.ends_with("\n1"))
                break;
            co_await rt::pause(20ms);
        }
        CHECK_MESSAGE(subs.ends_with("\n1"), subs);
        for (auto p : masters)
            if (p != port)
                CHECK(c.node_at(p).command(cmd("PUBSUB", "SHARDNUMSUB", channel)).ends_with("\n0"));
        co_await rt::pause(200ms);  // b's first attempt and wait are behind it
        CHECK_FALSE(granted.set);
        const auto t0 = std::chrono::steady_clock::now();
        co_await g1->release();
        CHECK(co_await granted.wait(2s));
        const auto woke = std::chrono::steady_clock::now() - t0;
        MESSAGE("granted " << std::chrono::duration_cast<std::chrono::milliseconds>(woke).count()
                           << " ms after the release");
        REQUIRE(g2);
        CHECK(woke < 500ms);
        CHECK(master.command_calls("spublish") > spublish_before);
        for (auto p : masters)
            CHECK(c.node_at(p).command_calls("publish") == publish_before[p]);
        co_await g2->release();
        a.close();
        b.close();
    });
}

// The fair lock on a cluster: its key takes its name as its hash tag, as a redis_mutex's, so
// that all its keys and its wake channels share one slot (CROSSSLOT otherwise). In every shard
// it is taken and released; in one, 4 waiters of 2 clients are granted in their arrival order,
// each within 500 ms of the release before it (woken by SPUBLISH on their process's channel, not
// by their 1 s refresh or the 3 s TTL), tokens rising; only the fencing counter is left.
TEST_CASE("the fair lock on a cluster: one slot for all its keys, FIFO, woken by sharded pub/sub")
{
    auto& c = shared_cluster();
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        zkcoro::redis_fair_mutex_options fo;
        fo.ttl = 3s;
        zkcoro::redis_client a(ex, c.url()), b(ex, c.url()), h(ex, c.url());
        for (auto port : c.master_ports()) {
            auto name = name_on(c, port, "fairshard");
            zkcoro::redis_fair_mutex m(a, name, fo);
            CHECK(m.key() == "{" + name + "}");
            auto g = co_await m.acquire(2s);
            REQUIRE(g);
            CHECK(c.node_at(port).command(cmd("EXISTS", m.key(), m.key() + ":fencing")) == "2");
            co_await g->release();
        }
        const auto port = c.master_ports()[2];
        auto& master = c.node_at(port);
        auto name = name_on(c, port, "fairfifo");
        zkcoro::redis_fair_mutex mh(h, name, fo), ma(a, name, fo), mb(b, name, fo);
        auto held = co_await mh.acquire(2s);
        REQUIRE(held);
        std::vector<int> order;
        std::vector<std::int64_t> tokens{held->fencing_token()};
        std::vector<std::chrono::milliseconds> gaps;
        auto last_release = std::chrono::steady_clock::now();
        int done = 0;
        rt::event all_done(ex);
        auto waiter = [&](zkcoro::redis_fair_mutex& m, int id) -> asio::awaitable<void> {
            auto g = co_await m.acquire(10s);
            if (g) {
                gaps.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                                       last_release));
                order.push_back(id);
                tokens.push_back(g->fencing_token());
                co_await rt::pause(20ms);
                last_release = std::chrono::steady_clock::now();
                co_await g->release();
            }
            if (++done == 4)
                all_done.fire();
        };
        zkcoro::redis_fair_mutex* who[] = {&ma, &mb, &ma, &mb};
        for (int i = 0; i < 4; ++i) {
            asio::co_spawn(ex, waiter(*who[i], i), asio::detached);
            // Queued before the next one comes.
            for (int j = 0; j < 100 && master.command(cmd("LLEN", mh.key() + ":queue")) != std::to_string(i + 1); ++j)
                co_await rt::pause(10ms);
            REQUIRE(master.command(cmd("LLEN", mh.key() + ":queue")) == std::to_string(i + 1));
        }
        last_release = std::chrono::steady_clock::now();
        co_await held->release();
        REQUIRE(co_await all_done.wait(8s));
        CHECK(order == std::vector<int>{0, 1, 2, 3});
        for (std::size_t i = 1; i < tokens.size(); ++i)
            CHECK(tokens[i] > tokens[i - 1]);
        for (auto g : gaps) {
            MESSAGE("granted " << g.count() << " ms after the release before");
            CHECK(g < 500ms);
        }
        CHECK(master.command(cmd("EXISTS", mh.key(), mh.key() + ":queue", mh.key() + ":timeouts")) == "0");
        CHECK(master.command(cmd("EXISTS", mh.key() + ":fencing")) == "1");
        a.close();
        b.close();
        h.close();
    });
}

// The multi-lock over keys on 3 shards: all or nothing, in one global order (by key, the same in
// every process). One key held elsewhere: the multi-lock times out and holds none of the others.
// Free: it takes all three (each on its own master); a second multi-lock over the same keys,
// listed in another order, waits and then takes all three, with higher tokens.
TEST_CASE("a multi_lock over keys on 3 shards: all or nothing, in one order")
{
    auto& c = shared_cluster();
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const auto masters = c.master_ports();
        zkcoro::redis_client a(ex, c.url()), b(ex, c.url());
        std::vector<std::string> names;
        for (auto p : masters)
            names.push_back(name_on(c, p, "multi"));
        zkcoro::redis_mutex a0(a, names[0], ttl(2s)), a1(a, names[1], ttl(2s)), a2(a, names[2], ttl(2s));
        zkcoro::redis_mutex b0(b, names[0], ttl(2s)), b1(b, names[1], ttl(2s)), b2(b, names[2], ttl(2s));
        std::vector<zkcoro::lock_ref> ra{zkcoro::lock_ref(a0), zkcoro::lock_ref(a1), zkcoro::lock_ref(a2)};
        std::vector<zkcoro::lock_ref> rb{zkcoro::lock_ref(b2), zkcoro::lock_ref(b0), zkcoro::lock_ref(b1)};
        zkcoro::multi_lock ma(std::move(ra)), mb(std::move(rb));
        CHECK(ma.order() == mb.order());
        // The last in the order held elsewhere: the others are given back.
        const auto last_key = ma.order().back();  // order() returns a copy
        zkcoro::redis_mutex* lone = a0.key() == last_key ? &b0 : a1.key() == last_key ? &b1 : &b2;
        auto other = co_await lone->acquire(2s);
        REQUIRE(other);
        auto none = co_await ma.acquire(300ms);
        CHECK_FALSE(none);
        co_await rt::pause(100ms);  // the take-backs
        for (std::size_t i = 0; i < 3; ++i) {
            const auto key = "{" + names[i] + "}";
            CAPTURE(key);
            CHECK(c.node_at(masters[i]).command(cmd("EXISTS", key)) == (key == last_key ? "1" : "0"));
        }
        co_await other->release();
        auto all = co_await ma.acquire(2s);
        REQUIRE(all);
        CHECK(all->guards().size() == 3);
        for (std::size_t i = 0; i < 3; ++i)
            CHECK(c.node_at(masters[i]).command(cmd("EXISTS", "{" + names[i] + "}")) == "1");
        std::vector<std::int64_t> first;
        for (const auto& g : all->guards())
            first.push_back(g.fencing_token());
        std::optional<zkcoro::multi_guard> theirs;
        rt::event got(ex);
        asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
            theirs = co_await mb.acquire(5s);
            got.fire();
        }, asio::detached);
        CHECK_FALSE(co_await got.wait(300ms));
        co_await all->release();
        REQUIRE(co_await got.wait(3s));
        REQUIRE(theirs);
        REQUIRE(theirs->guards().size() == 3);
        for (std::size_t i = 0; i < 3; ++i)
            CHECK(theirs->guards()[i].fencing_token() > first[i]);  // both in the same (key) order
        co_await theirs->release();
        a.close();
        b.close();
    });
}

// Issue 35 item 5: a master SIGKILLed while a lock in its slots is held (granted with WAIT 1: its
// replica has the key) and another client waits. The replica is made master at once with CLUSTER
// FAILOVER TAKEOVER (no election, no wait for cluster-node-timeout: deterministic and fast; an
// automatic failover ends in the same state, later), and the old master is restarted, rejoining
// as the new master's replica (WAIT 1 can be met again). The clients follow (their links to the
// dead master drop, the map is read again, from another seed if theirs died). Never two holders:
// when the waiter is granted, the holder's guard has been released or signalled lost; the key
// and its counter were on the replica; tokens keep rising.
TEST_CASE("a master SIGKILLed while holding: the replica takes over, never two holders, tokens rise")
{
    auto& c = shared_cluster();
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const auto port = c.master_ports()[0];
        const auto replica = c.replica_of(port);
        REQUIRE(replica != 0);
        zkcoro::redis_options o;
        o.replica_ack_timeout = 300ms;
        zkcoro::redis_client a(ex, c.url(), o), b(ex, c.url(), o);
        auto name = name_on(c, port, "failover");
        zkcoro::redis_mutex ma(a, name, ttl(3s)), mb(b, name, ttl(3s));
        auto g1 = co_await ma.acquire(2s);
        REQUIRE(g1);
        const auto first = g1->fencing_token();
        bool released = false, overlap = false;
        std::optional<zkcoro::guard> g2;
        rt::event granted(ex);
        asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
            g2 = co_await mb.acquire(15s);
            overlap = g2 && !released && !g1->lost();
            granted.fire();
        }, asio::detached);
        co_await rt::pause(100ms);
        const auto refreshes = router_of(a).refreshes;
        c.node_at(port).kill9();
        c.node_at(replica).command(cmd("CLUSTER", "FAILOVER", "TAKEOVER"));
        std::string role;
        for (int i = 0; i < 100 && role != "master"; ++i) {
            role = c.node_at(replica).info("replication")["role"];
            if (role != "master")
                co_await rt::pause(20ms);
        }
        REQUIRE(role == "master");
        // WAIT 1 made the replica have the key and its counter before the grant.
        CHECK(c.node_at(replica).command(cmd("EXISTS", ma.key(), ma.key() + ":fencing")) == "2");
        c.node_at(port).restart();  // rejoins as the new master's replica
        c.wait_ok(10s);
        CHECK(c.replica_of(replica) == port);
        CHECK(c.master_of_slot(zkcoro::detail::key_slot(ma.key())) == replica);
        // The holder renews on the new master (if it kept its lock through the failover).
        co_await rt::pause(1200ms);
        const bool kept = !g1->lost();
        MESSAGE("the holder " << std::string(kept ? "kept its lock" : "lost its lock (signalled)")
                              << " through the failover; a: refreshes " << router_of(a).refreshes);
        CHECK(router_of(a).refreshes > refreshes);
        if (kept) {
            CHECK_FALSE(granted.set);
            released = true;
            co_await g1->release();
        }
        REQUIRE(co_await granted.wait(5s));
        REQUIRE(g2);
        CHECK_FALSE(overlap);
        CHECK(g2->fencing_token() > first);
        CHECK(c.node_at(replica).command(cmd("GET", mb.key())) != "");
        co_await g2->release();
        // And on: a third grant, higher again.
        auto g3 = co_await ma.acquire(2s);
        REQUIRE(g3);
        CHECK(g3->fencing_token() > g2->fencing_token());
        co_await g3->release();
        a.close();
        b.close();
    }, 30s);
}

// zklock -c redis+cluster://... (issue 35 item 4): the command runs under the lock on the key
// {LOCKPATH} (ZKLOCK_NODE) with a fencing token above the last holder's; with the key held by
// another client, zklock -n gives up at once (a nonzero exit status), and status shows the holder;
// -s and --semaphore 2 run on the name's shard.
TEST_CASE("zklock with a redis+cluster:// URL")
{
    const char* zklock = std::getenv("ZKLOCK_BIN");
    if (zklock == nullptr || *zklock == '\0') {
        MESSAGE("ZKLOCK_BIN not set (built without the tools): skipped");
        return;
    }
    auto& c = shared_cluster();
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const auto port = c.master_ports()[2];
        const auto name = name_on(c, port, "zklock");
        zkcoro::redis_client a(ex, c.url());
        zkcoro::redis_mutex m(a, name, ttl(3s));
        auto g = co_await m.acquire(2s);
        REQUIRE(g);
        const auto held_token = g->fencing_token();
        std::string refused;
        try {
            c.run_cli({zklock, "-n", "-c", c.url(), name, "--", "/bin/true"}, std::chrono::seconds(10));
        } catch (const std::exception& e) {
            refused = e.what();
        }
        MESSAGE("zklock -n while held: " << refused);
        CHECK(refused.find("is held by another process") != std::string::npos);
        // status reads the holder's key {name} on its master (issue 35 item 4).
        const auto st = c.run_cli({zklock, "-c", c.url(), "status", name}, std::chrono::seconds(10));
        CAPTURE(st);
        CHECK(st.find(name + " (mutex): 1 entry\n") != std::string::npos);
        CHECK(st.find("  {" + name + "}\n") != std::string::npos);
        CHECK(st.find("fencing counter: ") != std::string::npos);
        CHECK(st.find(" ({" + name + "}:fencing)\n") != std::string::npos);
        co_await g->release();
        const auto out = c.run_cli({zklock, "-t", "5", "-c", c.url(), name, "--", "/bin/sh", "-c",
                                    "echo \"node=$ZKLOCK_NODE token=$ZKLOCK_FENCING_TOKEN\""},
                                   std::chrono::seconds(10));
        CAPTURE(out);
        const auto at = out.find("node={" + name + "} token=");
        REQUIRE(at != std::string::npos);
        const auto token = std::stoll(out.substr(at + name.size() + 14));
        CHECK(token > held_token);
        CHECK(c.node_at(port).command(cmd("EXISTS", m.key())) == "0");
        // The read side and a semaphore's lease through zklock: their keys ({name}:...) on the
        // name's shard, tokens from {name}:fencing.
        for (const char* recipe : {"-s", "--semaphore=2"}) {
            CAPTURE(recipe);
            const auto o = c.run_cli({zklock, "-n", recipe, "-c", c.url(), name, "--", "/bin/sh", "-c",
                                      "echo \"token=$ZKLOCK_FENCING_TOKEN\""},
                                     std::chrono::seconds(10));
            CAPTURE(o);
            const auto t = o.find("token=");
            REQUIRE(t != std::string::npos);
            CHECK(std::stoll(o.substr(t + 6)) > token);
        }
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

// The read-write lock (redis_shared_mutex) on a cluster: its keys ({name}: the write key, {name}:fencing,
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
                CHECK(master.command(cmd("EXISTS", "{" + name + "}")) == "1");  // the write key: {name}
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
        CHECK(la.key() == "{" + name + "}");
        CHECK(master.command(cmd("EXISTS", la.key(), "{" + name + "}:readers", "{" + name + "}:writers")) == "0");
        CHECK(master.command(cmd("EXISTS", "{" + name + "}:fencing")) == "1");
        a.close();
        b.close();
    });
}

// One naming rule for every Redis recipe (slot.hpp, recipe_key): on a cluster a name without a
// hash tag is {name} for the mutex, the fair lock, the read-write lock and the semaphore alike,
// so a redis_mutex and a redis_shared_mutex's writer on one name write one key and exclude each
// other there, as on one server (the read-write lock's write key was the bare name on a
// cluster, beside the mutex's {name}: both held at once). They share {name}:fencing and
// {name}:released too: tokens rise across them, and a release wakes the other's waiter.
TEST_CASE("one name, one key: a redis_mutex and a redis_shared_mutex's writer exclude each other on a cluster")
{
    auto& c = shared_cluster();
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const auto port = c.master_ports()[1];
        const auto name = name_on(c, port, "onekey");
        zkcoro::redis_client a(ex, c.url()), b(ex, c.url(1));
        zkcoro::redis_mutex m(a, name, ttl(2s));
        zkcoro::redis_shared_mutex rw(b, name, {.ttl = 2s});
        zkcoro::redis_fair_mutex f(b, name);
        zkcoro::redis_semaphore s(b, name, 2);
        const auto key = "{" + name + "}";
        CHECK(m.key() == key);
        CHECK(rw.key() == key);
        CHECK(f.key() == key);
        CHECK(s.key() == key);
        auto g = co_await m.acquire(2s);
        REQUIRE(g);
        auto refused = co_await rw.acquire_write(200ms);
        CHECK_MESSAGE(!refused, "the writer was granted while the mutex held the name");
        // A writer waiting while the mutex holds: granted after the mutex's release.
        std::optional<zkcoro::guard> w;
        std::chrono::steady_clock::time_point released, granted;
        rt::event got(ex);
        asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
            w = co_await rw.acquire_write(3s);
            granted = std::chrono::steady_clock::now();
            got.fire();
        }, asio::detached);
        co_await rt::pause(100ms);
        CHECK_FALSE(got.set);
        released = std::chrono::steady_clock::now();
        co_await g->release();
        REQUIRE(co_await got.wait(3s));
        REQUIRE(w);
        const auto after = std::chrono::duration_cast<std::chrono::milliseconds>(granted - released);
        MESSAGE("the writer granted " << after.count() << " ms after the mutex's release");
        CHECK(after < 1s);  // the writer's own refresh: writer_timeout / 3 = 667 ms
        CHECK(w->fencing_token() > g->fencing_token());
        CHECK(c.node_at(port).command(cmd("EXISTS", key)) == "1");
        auto refused2 = co_await m.acquire(200ms);
        CHECK_MESSAGE(!refused2, "the mutex was granted while the read-write lock's writer held the name");
        co_await w->release();
        auto g2 = co_await m.acquire(2s);
        REQUIRE(g2);
        CHECK(g2->fencing_token() > w->fencing_token());
        co_await g2->release();
        CHECK(c.node_at(port).command(cmd("EXISTS", name)) == "0");  // the bare name: never written
        a.close();
        b.close();
    });
}

// Issue 35 item 5's interop: redis-py's RedisCluster Lock (Debian python3-redis, run as
// tests/interop/redis_py_holder.py against this cluster) on "{name}" and our redis_mutex on
// "name" (which is {name} on a cluster: the same key) take turns; both logs, in
// CLOCK_MONOTONIC ns, checked by the interval checker: no overlap, both held, interleaved. Each
// pauses 20 ms after a release: redis-py re-acquiring at once keeps a waiter of ours out (Redis
// keeps no queue; docs/redis.md), and this case is about exclusion.
TEST_CASE("redis-py's RedisCluster Lock and our redis_mutex on one key exclude each other")
{
    const char* holder = std::getenv("REDIS_PY_HOLDER");
    REQUIRE_MESSAGE(holder != nullptr, "REDIS_PY_HOLDER not set (run through meson test)");
    auto& c = shared_cluster();
    const auto dir = std::filesystem::path(c.nodes().at(0)->dir());
    const bool skips = std::getenv("ZKCORO_ALLOW_SKIPS") && std::string(std::getenv("ZKCORO_ALLOW_SKIPS")) == "1";
    try {
        c.run_cli({"/usr/bin/python3", "-c", "import redis.cluster"}, 10s);
    } catch (const std::exception& e) {
        if (skips) {
            MESSAGE("redis-py's redis.cluster missing (ZKCORO_ALLOW_SKIPS=1): skipped: " << e.what());
            return;
        }
        FAIL("redis-py's redis.cluster missing (install python3-redis; ZKCORO_ALLOW_SKIPS=1 skips): " << e.what());
    }
    const auto py_log = (dir / "redis-py-holds.log").string();
    const auto our_log = (dir / "zkcoro-holds.log").string();
    std::filesystem::remove(py_log);
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const auto name = name_on(c, c.master_ports()[0], "redispy");
        zkcoro::redis_client a(ex, c.url());
        zkcoro::redis_mutex m(a, name, ttl(2s));
        CHECK(m.key() == "{" + name + "}");
        constexpr int py_holds = 20, our_holds = 10;
        const pid_t py = zktest::redis_cluster::start_process(
                {"/usr/bin/python3", holder, "--url", c.url(), "--key", "{" + name + "}", "--holds",
                 std::to_string(py_holds), "--hold-ms", "20", "--id", "redis-py", "--log", py_log, "--sleep", "0.005",
                 "--gap-ms", "20", "--ttl-ms", "2000", "--time-limit", "20"},
                (dir / "redis-py-holder.out").string());
        // Ours start once redis-py has held once (its start, imports included, takes ~0.3 s).
        bool started = false;
        for (int i = 0; i < 500 && !started; ++i) {
            std::error_code fec;
            started = std::filesystem::file_size(py_log, fec) > 0 && !fec;
            if (!started)
                co_await rt::pause(20ms);
        }
        if (!started)
            ::kill(py, SIGKILL);
        REQUIRE_MESSAGE(started, "redis-py's holder logged no hold within 10 s");
        std::string lines;
        std::chrono::steady_clock::duration longest{};
        auto ns = [](std::chrono::steady_clock::time_point t) {
            return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
        };
        for (int i = 0; i < our_holds; ++i) {
            const auto asked = std::chrono::steady_clock::now();
            auto g = co_await m.acquire(5s);
            REQUIRE(g);
            const auto enter = std::chrono::steady_clock::now();
            longest = std::max(longest, enter - asked);
            co_await rt::pause(20ms);
            const auto exit = std::chrono::steady_clock::now();
            lines += fmt::format("zkcoro X {} {}\n", ns(enter), ns(exit));
            co_await g->release();
            co_await rt::pause(20ms);  // as redis-py's --gap-ms: each lets the other in (Redis keeps no queue)
        }
        const int status = zktest::redis_cluster::wait_process(py, 20s);
        std::ifstream out((dir / "redis-py-holder.out").string());
        std::stringstream text;
        text << out.rdbuf();
        CHECK_MESSAGE((status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0),
                      "redis-py's holder: status " << status << ": " << text.str());
        std::ofstream(our_log) << lines;
        auto holds = zktest::read_holds({py_log, our_log});
        auto first = std::numeric_limits<std::int64_t>::max(), last = std::int64_t{0};
        for (const auto& h : holds)
            if (h.id == "zkcoro") {
                first = std::min(first, h.enter_ns);
                last = std::max(last, h.exit_ns);
            }
        int between = 0;  // redis-py's holds inside our first..last: the two took turns
        for (const auto& h : holds)
            between += h.id == "redis-py" && h.enter_ns > first && h.exit_ns < last;
        auto report = zktest::check_holds(holds);
        std::string violations;
        for (const auto& v : report.violations)
            violations += v + "\n";
        MESSAGE("redis-py " << report.per_id["redis-py"] << " holds, ours " << report.per_id["zkcoro"] << ", "
                            << between << " of redis-py's between our first and last; our longest wait "
                            << std::chrono::duration_cast<std::chrono::milliseconds>(longest).count() << " ms");
        CHECK_MESSAGE(report.ok, violations);
        CHECK(report.per_id["redis-py"] == py_holds);
        CHECK(report.per_id["zkcoro"] == our_holds);
        CHECK(between > 0);
        CHECK(c.node_at(c.master_of_slot(zkcoro::detail::key_slot(m.key()))).command(cmd("EXISTS", m.key())) == "0");
        a.close();
    });
}

// Issue 35's read-write lock through a shard's failover: two readers hold, a writer waits (its
// mark in {name}:writers, on the replica too), a later reader waits behind the mark; the master
// is SIGKILLed and its replica promoted (CLUSTER FAILOVER TAKEOVER), the old master restarted as
// its replica. The readers keep their leases (granted with WAIT 1) and renew them on the new
// master; never a reader and the writer inside at once; the writer is granted after both
// readers release (within 1.5 s: its own refresh is 1 s), before the later reader, with a token
// above every earlier one; the later reader after the writer, higher again.
TEST_CASE("a master SIGKILLed while readers hold and a writer waits: the writer next, alone, tokens rise")
{
    auto& c = shared_cluster();
    asio::io_context ioc;
    run_bounded(ioc, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const auto port = c.master_ports()[2];
        const auto replica = c.replica_of(port);
        REQUIRE(replica != 0);
        zkcoro::redis_options o;
        o.replica_ack_timeout = 300ms;
        zkcoro::redis_client a(ex, c.url(), o), b(ex, c.url(), o), w(ex, c.url(), o), d(ex, c.url(), o);
        const auto name = name_on(c, port, "rwfailover");
        const auto writers = "{" + name + "}:writers";
        zkcoro::redis_shared_mutex la(a, name, {.ttl = 3s}), lb(b, name, {.ttl = 3s}), lw(w, name, {.ttl = 3s}),
                ld(d, name, {.ttl = 3s});
        auto r1 = co_await la.acquire_read(2s);
        REQUIRE(r1);
        auto r2 = co_await lb.acquire_read(2s);
        REQUIRE(r2);
        bool readers_out = false, overlap = false;
        std::optional<zkcoro::guard> wg, rg;
        std::chrono::steady_clock::time_point released, granted;
        rt::event wgot(ex), rgot(ex);
        asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
            wg = co_await lw.acquire_write(15s);
            granted = std::chrono::steady_clock::now();
            overlap = wg && !readers_out && !(r1->lost() && r2->lost());
            wgot.fire();
        }, asio::detached);
        bool marked = false;
        for (int i = 0; i < 200 && !marked; ++i) {
            marked = c.node_at(port).command(cmd("ZCARD", writers)) == "1";
            if (!marked)
                co_await rt::pause(5ms);
        }
        REQUIRE_MESSAGE(marked, "the writer did not mark itself as waiting within 1 s");
        // The mark on the replica too: its replication offset past the master's after the mark.
        const auto offset = std::stoll(c.node_at(port).info("replication")["master_repl_offset"]);
        bool copied = false;
        for (int i = 0; i < 200 && !copied; ++i) {
            copied = std::stoll(c.node_at(replica).info("replication")["slave_repl_offset"]) >= offset;
            if (!copied)
                co_await rt::pause(5ms);
        }
        REQUIRE_MESSAGE(copied, "the replica did not reach the master's replication offset within 1 s");
        bool writer_held_then = false, writer_done_before = false;
        asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
            rg = co_await ld.acquire_read(15s);
            writer_held_then = wg.has_value() && !readers_out;
            writer_done_before = wgot.set;
            rgot.fire();
        }, asio::detached);
        co_await rt::pause(100ms);
        CHECK_FALSE_MESSAGE(rgot.set, "a reader passed the waiting writer before the failover");
        c.node_at(port).kill9();
        c.node_at(replica).command(cmd("CLUSTER", "FAILOVER", "TAKEOVER"));
        std::string role;
        for (int i = 0; i < 100 && role != "master"; ++i) {
            role = c.node_at(replica).info("replication")["role"];
            if (role != "master")
                co_await rt::pause(20ms);
        }
        REQUIRE(role == "master");
        c.node_at(port).restart();  // rejoins as the new master's replica
        c.wait_ok(10s);
        co_await rt::pause(1200ms);  // the readers renew on the new master
        const bool kept = !r1->lost() && !r2->lost();
        MESSAGE("the readers " << std::string(kept ? "kept their leases" : "lost a lease (signalled)")
                               << " through the failover");
        CHECK_FALSE_MESSAGE(rgot.set, "a reader passed the waiting writer across the failover");
        if (kept)
            CHECK_FALSE(wgot.set);
        readers_out = true;
        released = std::chrono::steady_clock::now();
        co_await r1->release();
        co_await r2->release();
        REQUIRE(co_await wgot.wait(5s));
        REQUIRE(wg);
        CHECK_FALSE(overlap);
        const auto after = std::chrono::duration_cast<std::chrono::milliseconds>(granted - released);
        MESSAGE("the writer granted " << after.count() << " ms after the readers' release");
        if (kept)
            CHECK(after < 1500ms);
        CHECK(wg->fencing_token() > r1->fencing_token());
        CHECK(wg->fencing_token() > r2->fencing_token());
        co_await rt::pause(50ms);
        CHECK_FALSE(rgot.set);  // the writer holds
        co_await wg->release();
        REQUIRE(co_await rgot.wait(5s));
        REQUIRE(rg);
        CHECK(writer_done_before);
        CHECK_FALSE(writer_held_then);
        CHECK(rg->fencing_token() > wg->fencing_token());
        co_await rg->release();
        a.close();
        b.close();
        w.close();
        d.close();
    }, 30s);
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
        // The failure's log line names the lock's slot and the seeds (it said "redis://:0").
        std::vector<std::string> lines;
        zkcoro::redis_options o;
        o.log = [&lines](zkcoro::log_level, std::string_view m) { lines.emplace_back(m); };
        zkcoro::redis_client a(ex, c.url(), o);
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
        const auto site = fmt::format("on Redis Cluster slot {} (seeds 127.0.0.1:", zkcoro::detail::key_slot(m.key()));
        bool named = false;
        for (const auto& l : lines) {
            CHECK_MESSAGE(l.find("redis://:0") == std::string::npos, l);
            named = named || (l.find(m.key()) != std::string::npos && l.find(site) != std::string::npos);
        }
        CHECK_MESSAGE(named, fmt::format("no line names {} {}", m.key(), site));
        a.close();
    }, 20s);
}
