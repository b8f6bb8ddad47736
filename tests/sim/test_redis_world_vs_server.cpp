// The simulated Redis's data (redis_world: the lock's scripts as C++ models, strings with TTLs)
// against a real redis-server (started on a free loopback port): the same seeded command
// sequences on both, every reply compared. The commands: the three lock scripts by EVALSHA (first
// NOSCRIPT on both, then loaded by SCRIPT LOAD, later by EVAL) with values of three owners, TTLs
// and channels; the fencing counter set to good and bad values (letters, empty, negative, 2^53,
// 17 digits, leading zeros) or deleted; a foreign holder's SET NX PX (redis-py's Lock); GET, PTTL,
// PEXPIRE, EXISTS, DEL; PUBLISH with a subscriber listening.
//
// The clocks differ: before each command the model's clock is set to the server's TIME, so that a
// fencing token from the clock (max(counter + 1, TIME in microseconds)) must lie within 2 s after
// the model's, and a PTTL within 2 s of it (the clocks round their milliseconds apart); then the
// model takes the server's counter, so that the next comparisons are exact. TTLs are long (30 to
// 120 s): nothing expires on the server during a run (expiry on the model's clock is the
// simulation's to check).
#include "redis_world.hpp"

#include "redis/lock_scripts.hpp"
#include "redis/semaphore_scripts.hpp"
#include "redis/shared_scripts.hpp"

#include <redis_server.hpp>

#include <hiredis/hiredis.h>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

using zksim::resp;

namespace {

resp of(const redisReply* r)
{
    switch (r->type) {
    case REDIS_REPLY_STATUS: return resp::status(std::string(r->str, r->len));
    case REDIS_REPLY_ERROR: return resp::error(std::string(r->str, r->len));
    case REDIS_REPLY_INTEGER: return resp::number(r->integer);
    case REDIS_REPLY_STRING: return resp::bulk(std::string(r->str, r->len));
    case REDIS_REPLY_ARRAY: {
        std::vector<resp> e;
        for (std::size_t i = 0; i < r->elements; ++i)
            e.push_back(of(r->element[i]));
        return resp::array(std::move(e));
    }
    default: return resp::nil();
    }
}

struct connection {
    explicit connection(std::uint16_t port)
    {
        timeval tv{5, 0};
        c = redisConnectWithTimeout("127.0.0.1", port, tv);
        REQUIRE_MESSAGE((c && !c->err), "cannot connect to the redis-server on port " << port);
        redisSetTimeout(c, tv);
    }
    ~connection() { redisFree(c); }
    resp run(const std::vector<std::string>& args)
    {
        std::vector<const char*> argv;
        std::vector<std::size_t> lens;
        for (auto& a : args) {
            argv.push_back(a.data());
            lens.push_back(a.size());
        }
        auto* r = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), lens.data()));
        REQUIRE_MESSAGE(r != nullptr, "no reply from the redis-server to " << args[0]);
        auto out = of(r);
        freeReplyObject(r);
        return out;
    }
    resp next()  // a push on a subscribed connection
    {
        void* r = nullptr;
        REQUIRE_MESSAGE(redisGetReply(c, &r) == REDIS_OK, "no message on the subscribed connection within 5 s");
        auto out = of(static_cast<redisReply*>(r));
        freeReplyObject(r);
        return out;
    }
    redisContext* c = nullptr;
};

std::int64_t server_time_us(connection& c)
{
    auto t = c.run({"TIME"});
    return std::stoll(t.elements.at(0).str) * 1'000'000 + std::stoll(t.elements.at(1).str);
}

// The real reply against the model's: equal, but a clock's token within 2 s after the model's,
// and a PTTL within 2 s of it (`clock_token`: the model's token came from its clock).
bool matches(const resp& real, const resp& model, bool clock_token, const std::string& what)
{
    if (what == "acquire" && clock_token && real.type == resp::kind::array && model.type == resp::kind::array &&
        real.elements.size() == 2 && model.elements.size() == 2 && real.elements[0] == model.elements[0] &&
        model.elements[0].integer == 1) {
        const auto d = real.elements[1].integer - model.elements[1].integer;
        return d >= 0 && d < 2'000'000;
    }
    auto near_pttl = [](const resp& a, const resp& b) {
        return a.type == resp::kind::integer && b.type == resp::kind::integer &&
               (a.integer == b.integer || (a.integer >= 0 && b.integer >= 0 && std::abs(b.integer - a.integer) < 2000));
    };
    if (what == "pttl")
        return near_pttl(real, model);
    if (what == "acquire" && real.type == resp::kind::array && model.type == resp::kind::array &&
        real.elements.size() == 3 && model.elements.size() == 3)
        return real.elements[0] == model.elements[0] && near_pttl(real.elements[1], model.elements[1]) &&
               real.elements[2] == model.elements[2];
    return real == model;
}

}  // namespace

TEST_CASE("redis_world against a real redis-server: the lock scripts' models, strings, TTLs, fencing counters")
{
    zktest::redis_server server;
    connection real(server.port());
    connection listener(server.port());
    zksim::redis_world model;
    using namespace zkcoro::detail;
    const lua_script* scripts[] = {&acquire_script(), &release_script(), &renew_script()};
    const std::string key = "d:lock", fence = key + ":fencing", channel = key + ":released";
    // A subscriber on both: the release's PUBLISH must reach it on both.
    const int model_listener = 99;
    CHECK(listener.run({"SUBSCRIBE", channel}) == model.exec(model_listener, {"SUBSCRIBE", channel}).at(0));
    const char* seeds_env = std::getenv("ZKCORO_SIM_REDIS_DIFF_SEEDS");
    const int seeds = seeds_env ? std::atoi(seeds_env) : 5;
    const int ops = 600;
    std::map<std::string, long> counts;
    for (int seed = 1; seed <= seeds; ++seed) {
        std::mt19937_64 rng(static_cast<std::uint64_t>(seed));
        auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
        // A fresh start: no keys, no scripts (NOSCRIPT first).
        real.run({"DEL", key, fence});
        real.run({"SCRIPT", "FLUSH"});
        model.exec(1, {"DEL", key, fence});
        model.exec(1, {"SCRIPT", "FLUSH"});
        const std::string values[] = {"a:1:1", "b:2:7", "c:3:9", "684e9a8e-3849-4409-8010-001b6563dc99:5:22"};
        const std::string counters[] = {"5", "9007199254740990", "1700000000000000", "0000000000000001", "abc", "12a",
                                        "", "-5", "9007199254740992", "00000000000000001", "99999999999999999", "1.5"};
        for (int i = 0; i < ops; ++i) {
            std::vector<std::string> args;
            std::string what;
            const int op = pick(20);
            const auto ttl = std::to_string(30'000 + 1000 * pick(90));
            const auto& v = values[pick(4)];
            auto eval = [&](const lua_script& s, std::vector<std::string> rest, int nkeys) {
                std::vector<std::string> a;
                if (pick(10) == 0)
                    a = {"EVAL", s.text, std::to_string(nkeys)};
                else
                    a = {"EVALSHA", s.sha, std::to_string(nkeys)};
                a.insert(a.end(), rest.begin(), rest.end());
                return a;
            };
            if (op < 6) {
                what = "acquire";
                args = eval(acquire_script(), {key, fence, v, ttl}, 2);
            } else if (op < 9) {
                what = "release";
                args = eval(release_script(), {key, v, channel}, 1);
            } else if (op < 11) {
                what = "renew";
                args = eval(renew_script(), {key, v, ttl}, 1);
            } else if (op == 11) {
                what = "set counter";
                args = {"SET", fence, counters[pick(3) == 0 ? 4 + pick(8) : pick(4)]};  // a bad one 1 in 3
            } else if (op == 12 || (op == 19 && pick(2) == 0)) {
                what = "del counter";
                args = {"DEL", fence};
            } else if (op == 13) {
                what = "foreign holder";
                args = {"SET", key, "redis-py-token", "NX", "PX", ttl};
            } else if (op == 14) {
                what = "pttl";
                args = {"PTTL", key};
            } else if (op == 15) {
                what = "get";
                args = {"GET", pick(2) ? key : fence};
            } else if (op == 16) {
                what = "pexpire";
                args = {"PEXPIRE", key, ttl};
            } else if (op == 17) {
                what = "del";
                args = {"DEL", key};
            } else if (op == 18) {
                what = "script load";
                args = {"SCRIPT", "LOAD", scripts[pick(3)]->text};
            } else {
                what = "exists";
                args = {"EXISTS", key, fence};
            }
            model.set_now_us(server_time_us(real));
            const auto before = model.get(fence);
            const auto m = model.exec(1, args).at(0);
            const auto r = real.run(args);
            // The model's token came from its clock (not from the counter + 1)?
            bool clock_token = true;
            if (before && m.type == resp::kind::array && m.elements.size() == 2)
                clock_token = m.elements[1].integer != std::strtoll(before->c_str(), nullptr, 10) + 1;
            std::string shape;
            if (m.type == resp::kind::error)
                shape = m.str.substr(0, m.str.find(' '));  // NOSCRIPT, ZKFENCING, ERR
            else if (what == "acquire")
                shape = m.elements.at(0).integer == 1 ? "granted" : "held";
            else if (m.type == resp::kind::integer)
                shape = std::to_string(std::clamp<std::int64_t>(m.integer, -2, 2));
            else
                shape = m.type == resp::kind::nil ? "nil" : "ok";
            ++counts[what + " " + shape];
            REQUIRE_MESSAGE(matches(r, m, clock_token, what),
                            "seed " << seed << " op " << i << " (" << what << "): " << fmt::format("{}", fmt::join(args, " ")).substr(0, 160)
                                    << "\n  server: " << r.show() << "\n  model:  " << m.show());
            // The model takes the server's counter (a clock's token differs by the microseconds
            // between the two TIMEs).
            auto counter = real.run({"GET", fence});
            if (counter.type == resp::kind::bulk)
                model.exec(1, {"SET", fence, counter.str});
            // A release that deleted published to the listener on both.
            for (auto& [conn, push] : model.take_published()) {
                CHECK(conn == model_listener);
                CHECK(listener.next() == push);
            }
        }
    }
    std::string summary;
    for (auto& [what, n] : counts)
        summary += fmt::format("{} {}, ", what, n);
    MESSAGE("redis_world vs redis-server: " << seeds << " seeds x " << ops << " commands, every reply the same: " << summary);
}

// The fair lock's scripts (fair_acquire_script, fair_release_script; redis_world_fair.cpp) and
// the renewal on a fair lock's key, the same way: values of four waiters of two processes (their
// wake channels `P:wake:pa`, `P:wake:pb` listened to on both), TTLs and waiter timeouts of 30 to
// 120 s; between them: a waiter's timeout set in the past (the purge), a queue entry without a
// timeout (the head dropped) or a timeout without a queue entry (LPOS nil: a nil element in the
// reply), a foreign holder, the key or the counter deleted or set (bad ones too), the queue made
// a string (WRONGTYPE) or deleted. After every command the queue (LRANGE) and the key (GET) are
// compared exactly, the timeouts (ZRANGE WITHSCORES) member for member with the scores within
// 2 s, the PTTLs of both (they expire 1 ms after the latest timeout) within 2 s; then the model takes the server's counter and scores (the clocks differ by their TIMEs).
TEST_CASE("redis_world against a real redis-server: the fair lock's scripts' models, its queue and timeouts")
{
    zktest::redis_server server;
    connection real(server.port());
    connection listener(server.port());
    zksim::redis_world model;
    using namespace zkcoro::detail;
    const std::string key = "d:fair", p = "{d:fair}", fence = p + ":fencing", q = p + ":queue", z = p + ":timeouts",
                      prefix = p + ":wake:";
    const int model_listener = 99;
    for (const auto* proc : {"pa", "pb"}) {
        const std::vector<std::string> sub{"SUBSCRIBE", prefix + proc};
        CHECK(listener.run(sub) == model.exec(model_listener, sub).at(0));
    }
    const char* seeds_env = std::getenv("ZKCORO_SIM_REDIS_DIFF_SEEDS");
    const int seeds = seeds_env ? std::atoi(seeds_env) : 5;
    const int ops = 500;
    std::map<std::string, long> counts;
    auto scores_of = [](const resp& r) {
        std::map<std::string, std::int64_t> out;
        for (std::size_t i = 0; i + 1 < r.elements.size(); i += 2)
            out[r.elements[i].str] = std::stoll(r.elements[i + 1].str);
        return out;
    };
    for (int seed = 1; seed <= seeds; ++seed) {
        std::mt19937_64 rng(static_cast<std::uint64_t>(seed) + 1000);
        auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
        real.run({"DEL", key, fence, q, z});
        real.run({"SCRIPT", "FLUSH"});
        model.exec(1, {"DEL", key, fence, q, z});
        model.exec(1, {"SCRIPT", "FLUSH"});
        const std::string values[] = {"pa:1:1:q", "pa:2:2:q", "pb:3:3:q", "pb:4:4:q"};
        const std::string counters[] = {"5", "1700000000000000", "abc", "-5", "9007199254740992"};
        for (int i = 0; i < ops; ++i) {
            std::vector<std::string> args;
            std::string what;
            const int op = pick(24);
            const auto ms = [&] { return std::to_string(30'000 + 1000 * pick(90)); };
            const auto& v = values[pick(4)];
            auto eval = [&](const lua_script& s, std::vector<std::string> rest, int nkeys) {
                std::vector<std::string> a;
                if (pick(10) == 0)
                    a = {"EVAL", s.text, std::to_string(nkeys)};
                else
                    a = {"EVALSHA", s.sha, std::to_string(nkeys)};
                a.insert(a.end(), rest.begin(), rest.end());
                return a;
            };
            const auto now_ms = server_time_us(real) / 1000;
            if (op < 8) {
                what = "fair acquire";
                args = eval(fair_acquire_script(), {key, fence, q, z, v, ms(), ms(), prefix}, 4);
            } else if (op < 12) {
                what = "fair release";
                args = eval(fair_release_script(), {key, q, z, v, prefix}, 3);
            } else if (op == 12) {
                what = "renew";
                args = eval(renew_script(), {key, v, ms()}, 1);
            } else if (op == 13 || op == 14) {
                what = "timeout passed";
                args = {"ZADD", z, std::to_string(now_ms - 1000 - pick(5000)), v};
            } else if (op == 15) {
                what = "queue entry without a timeout";
                args = {"RPUSH", q, v};
            } else if (op == 16) {
                what = "timeout without a queue entry";
                args = {"ZADD", z, std::to_string(now_ms + 60'000), v};
            } else if (op == 17) {
                what = "foreign holder";
                args = {"SET", key, "redis-py-token", "NX", "PX", ms()};
            } else if (op == 18) {
                what = "del key";
                args = {"DEL", key};
            } else if (op == 19) {
                what = pick(2) == 0 ? "set counter" : "del counter";
                args = what == "set counter" ? std::vector<std::string>{"SET", fence, counters[pick(4) == 0 ? 2 + pick(3) : pick(2)]}
                                             : std::vector<std::string>{"DEL", fence};
            } else if (op == 20) {
                what = pick(8) == 0 ? "queue a string" : "del queue";
                args = what == "del queue" ? std::vector<std::string>{"DEL", q, z}
                                           : std::vector<std::string>{"SET", q, "x"};
            } else if (op == 21) {
                what = "type";
                args = {"TYPE", pick(2) ? q : z};
            } else if (op == 22) {
                what = "zscore";
                args = {"ZSCORE", z, v};
            } else {
                what = "script load";
                args = {"SCRIPT", "LOAD", pick(2) ? fair_acquire_script().text : fair_release_script().text};
            }
            model.set_now_us(server_time_us(real));
            const auto before = model.get(fence);
            const auto m = model.exec(1, args).at(0);
            const auto r = real.run(args);
            bool same = r == m;
            auto near = [](const resp& a, const resp& b) {
                return a.type == resp::kind::integer && b.type == resp::kind::integer &&
                       (a.integer == b.integer ||
                        (a.integer >= 0 && b.integer >= 0 && std::abs(b.integer - a.integer) < 2000));
            };
            std::string shape = m.type == resp::kind::error ? m.str.substr(0, m.str.find(' ')) : "ok";
            if (what == "fair acquire" && m.type == resp::kind::array && r.type == resp::kind::array &&
                m.elements.size() == r.elements.size() && !m.elements.empty() && m.elements[0] == r.elements[0]) {
                if (m.elements[0].integer == 1) {
                    shape = "granted";
                    const bool from_clock =
                        !before || m.elements[1].integer != std::strtoll(before->c_str(), nullptr, 10) + 1;
                    const auto d = r.elements[1].integer - m.elements[1].integer;
                    same = from_clock ? d >= 0 && d < 2'000'000 : d == 0;
                } else {
                    shape = m.elements.size() == 5 && m.elements[3].type == resp::kind::nil ? "queued, not in the list" : "queued";
                    same = near(r.elements[1], m.elements[1]) && r.elements[2] == m.elements[2] &&
                           m.elements.size() == 5 && r.elements[3] == m.elements[3] && near(r.elements[4], m.elements[4]);
                }
            }
            if (what == "zscore" && m.type == resp::kind::bulk && r.type == resp::kind::bulk)
                same = std::abs(std::stoll(m.str) - std::stoll(r.str)) < 2000;
            if (what == "fair release" && m.type == resp::kind::integer)
                shape = std::to_string(m.integer);
            ++counts[what + " " + shape];
            REQUIRE_MESSAGE(same, "seed " << seed << " op " << i << " (" << what << "): "
                                          << fmt::format("{}", fmt::join(args, " ")).substr(0, 160)
                                          << "\n  server: " << r.show() << "\n  model:  " << m.show());
            for (auto& [conn, push] : model.take_published()) {
                CHECK(conn == model_listener);
                CHECK(listener.next() == push);
            }
            // The state: the key and the queue exactly, the timeouts' members exactly and their
            // scores within 2 s; then the model takes the server's counter and scores.
            CHECK_MESSAGE(real.run({"GET", key}) == model.exec(1, {"GET", key}).at(0), "seed " << seed << " op " << i);
            CHECK_MESSAGE(real.run({"TYPE", q}) == model.exec(1, {"TYPE", q}).at(0), "seed " << seed << " op " << i);
            if (real.run({"TYPE", q}) == resp::status("list"))
                CHECK_MESSAGE(real.run({"LRANGE", q, "0", "-1"}) == model.exec(1, {"LRANGE", q, "0", "-1"}).at(0),
                              "seed " << seed << " op " << i);
            const auto rz = scores_of(real.run({"ZRANGE", z, "0", "-1", "WITHSCORES"}));
            const auto mz = scores_of(model.exec(1, {"ZRANGE", z, "0", "-1", "WITHSCORES"}).at(0));
            bool zsame = rz.size() == mz.size();
            for (auto& [member, score] : rz)
                zsame = zsame && mz.count(member) && std::abs(mz.at(member) - score) < 2000;
            REQUIRE_MESSAGE(zsame, "seed " << seed << " op " << i << " (" << what << "): the timeouts differ");
            for (const auto& k : {q, z}) {
                const auto rt = real.run({"PTTL", k});
                const auto mt = model.exec(1, {"PTTL", k}).at(0);
                CHECK_MESSAGE((rt == mt || (rt.integer >= 0 && mt.integer >= 0 && std::abs(rt.integer - mt.integer) < 2000)),
                              "seed " << seed << " op " << i << ": PTTL " << k << ": server " << rt.show() << ", model "
                                      << mt.show());
            }
            const auto zttl = real.run({"PTTL", z});
            model.exec(1, {"DEL", z});
            for (auto& [member, score] : rz)
                model.exec(1, {"ZADD", z, std::to_string(score), member});
            if (zttl.type == resp::kind::integer && zttl.integer > 0)
                model.exec(1, {"PEXPIRE", z, std::to_string(zttl.integer)});
            auto counter = real.run({"GET", fence});
            if (counter.type == resp::kind::bulk)
                model.exec(1, {"SET", fence, counter.str});
        }
    }
    std::string summary;
    for (auto& [what, n] : counts)
        summary += fmt::format("{} {}, ", what, n);
    MESSAGE("redis_world vs redis-server, the fair lock: " << seeds << " seeds x " << ops
                                                           << " commands, every reply and state the same: " << summary);
}

// The semaphore's scripts (semaphore_acquire_script, _release_, _renew_; redis_world_semaphore.cpp),
// the same way: values of five acquisitions of two processes wanting 1, 2 or 3 of 3 leases (their
// wake channels `P:wake:pa`, `P:wake:pb` listened to on both: every PUBLISH compared), TTLs and
// waiter timeouts of 30 to 120 s, now and then a participant made with 2 leases (ZKMAXLEASES);
// between them: a holder's leases or a waiter's timeout set in the past (the purge), a queue entry
// without a timeout (the head popped) or a timeout without a queue entry (LPOS nil), the keys
// deleted, P:max set to another count, the counter set (bad ones too) or deleted, the queue made a
// string (WRONGTYPE). After every command P:queue (LRANGE) and P:max (GET) are compared exactly,
// P:leases and P:timeouts member for member with the scores within 2 s, the four keys' PTTLs
// within 2 s; then the model takes the server's counter, scores and the two sets' TTLs.
TEST_CASE("redis_world against a real redis-server: the semaphore's scripts' models, its leases, queue and timeouts")
{
    zktest::redis_server server;
    connection real(server.port());
    connection listener(server.port());
    zksim::redis_world model;
    using namespace zkcoro::detail;
    const std::string p = "{d:sem}", leases = p + ":leases", fence = p + ":fencing", q = p + ":queue",
                      z = p + ":timeouts", mk = p + ":max", prefix = p + ":wake:";
    const int model_listener = 99;
    for (const auto* proc : {"pa", "pb"}) {
        const std::vector<std::string> sub{"SUBSCRIBE", prefix + proc};
        CHECK(listener.run(sub) == model.exec(model_listener, sub).at(0));
    }
    const char* seeds_env = std::getenv("ZKCORO_SIM_REDIS_DIFF_SEEDS");
    const int seeds = seeds_env ? std::atoi(seeds_env) : 4;
    const int ops = 400;
    std::map<std::string, long> counts;
    auto scores_of = [](const resp& r) {
        std::map<std::string, std::int64_t> out;
        for (std::size_t i = 0; i + 1 < r.elements.size(); i += 2)
            out[r.elements[i].str] = std::stoll(r.elements[i + 1].str);
        return out;
    };
    auto near = [](const resp& a, const resp& b) {
        return a.type == resp::kind::integer && b.type == resp::kind::integer &&
               (a.integer == b.integer || (a.integer >= 0 && b.integer >= 0 && std::abs(b.integer - a.integer) < 2000));
    };
    for (int seed = 1; seed <= seeds; ++seed) {
        std::mt19937_64 rng(static_cast<std::uint64_t>(seed) + 2000);
        auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
        real.run({"DEL", leases, fence, q, z, mk});
        real.run({"SCRIPT", "FLUSH"});
        model.exec(1, {"DEL", leases, fence, q, z, mk});
        model.exec(1, {"SCRIPT", "FLUSH"});
        const std::string values[] = {"pa:1:1:s1", "pa:2:2:s2", "pb:3:3:s3", "pb:4:4:s1", "pa:5:5:s2"};
        const std::string counters[] = {"5", "1700000000000000", "abc", "-5", "9007199254740992"};
        for (int i = 0; i < ops; ++i) {
            std::vector<std::string> args;
            std::string what;
            const int op = pick(26);
            const auto ms = [&] { return std::to_string(30'000 + 1000 * pick(90)); };
            const auto& v = values[pick(5)];
            const auto n = v.substr(v.size() - 1);
            const std::string mx = pick(15) == 0 ? "2" : "3";
            auto eval = [&](const lua_script& s) {
                std::vector<std::string> a;
                if (pick(10) == 0)
                    a = {"EVAL", s.text, "5"};
                else
                    a = {"EVALSHA", s.sha, "5"};
                a.insert(a.end(), {leases, fence, q, z, mk, v, ms(), ms(), prefix, mx, &s == &semaphore_acquire_script() ? n : "0"});
                return a;
            };
            const auto now_ms = server_time_us(real) / 1000;
            if (op < 9) {
                what = "acquire";
                args = eval(semaphore_acquire_script());
            } else if (op < 13) {
                what = "release";
                args = eval(semaphore_release_script());
            } else if (op < 15) {
                what = "renew";
                args = eval(semaphore_renew_script());
            } else if (op == 15) {
                what = "leases expired";
                args = {"ZADD", leases, std::to_string(now_ms - 1000 - pick(5000)), v};
            } else if (op == 16) {
                what = "timeout passed";
                args = {"ZADD", z, std::to_string(now_ms - 1000 - pick(5000)), v};
            } else if (op == 17) {
                what = "queue entry without a timeout";
                args = {"RPUSH", q, v};
            } else if (op == 18) {
                what = "timeout without a queue entry";
                args = {"ZADD", z, std::to_string(now_ms + 60'000), v};
            } else if (op == 19) {
                what = pick(2) == 0 ? "set counter" : "del counter";
                args = what == "set counter" ? std::vector<std::string>{"SET", fence, counters[pick(8) == 0 ? 2 + pick(3) : pick(2)]}
                                             : std::vector<std::string>{"DEL", fence};
            } else if (op == 20) {
                what = pick(8) == 0 ? "queue a string" : "del queue";
                args = what == "del queue" ? std::vector<std::string>{"DEL", q, z} : std::vector<std::string>{"SET", q, "x"};
            } else if (op == 21) {
                what = "del leases";
                args = {"DEL", leases};
            } else if (op == 22) {
                what = pick(3) == 0 ? "max set to 2" : "del max";
                args = what == "del max" ? std::vector<std::string>{"DEL", mk} : std::vector<std::string>{"SET", mk, "2"};
            } else if (op == 23) {
                what = "type";
                args = {"TYPE", pick(2) ? leases : mk};
            } else if (op == 24) {
                what = "zscore";
                args = {"ZSCORE", pick(2) ? leases : z, v};
            } else {
                what = "script load";
                const lua_script* s[] = {&semaphore_acquire_script(), &semaphore_release_script(), &semaphore_renew_script()};
                args = {"SCRIPT", "LOAD", s[pick(3)]->text};
            }
            model.set_now_us(server_time_us(real));
            const auto before = model.get(fence);
            const auto m = model.exec(1, args).at(0);
            const auto r = real.run(args);
            bool same = r == m;
            std::string shape = m.type == resp::kind::error ? m.str.substr(0, m.str.find(' ')) : "ok";
            if (what == "acquire" && m.type == resp::kind::array && r.type == resp::kind::array &&
                m.elements.size() == r.elements.size() && !m.elements.empty() && m.elements[0] == r.elements[0]) {
                if (m.elements[0].integer == 1) {
                    shape = "granted";
                    const bool from_clock =
                        !before || m.elements[1].integer != std::strtoll(before->c_str(), nullptr, 10) + 1;
                    const auto d = r.elements[1].integer - m.elements[1].integer;
                    same = from_clock ? d >= 0 && d < 2'000'000 : d == 0;
                } else {
                    shape = m.elements.size() == 4 && m.elements[1].type == resp::kind::nil ? "queued, not in the list"
                                                                                            : "queued";
                    same = m.elements.size() == 4 && r.elements[1] == m.elements[1] && near(r.elements[2], m.elements[2]) &&
                           near(r.elements[3], m.elements[3]);
                }
            }
            if (what == "zscore" && m.type == resp::kind::bulk && r.type == resp::kind::bulk)
                same = std::abs(std::stoll(m.str) - std::stoll(r.str)) < 2000;
            if ((what == "release" || what == "renew") && m.type == resp::kind::integer)
                shape = std::to_string(m.integer);
            ++counts[what + " " + shape];
            REQUIRE_MESSAGE(same, "seed " << seed << " op " << i << " (" << what << "): "
                                          << fmt::format("{}", fmt::join(args, " ")).substr(0, 160)
                                          << "\n  server: " << r.show() << "\n  model:  " << m.show());
            for (auto& [conn, push] : model.take_published()) {
                ++counts["published"];
                CHECK(conn == model_listener);
                CHECK(listener.next() == push);
            }
            // The state: the queue and P:max exactly, the sets' members exactly and their scores
            // within 2 s, the PTTLs within 2 s; then the model takes the server's scores and TTLs.
            const std::string where = fmt::format("seed {} op {} ({})", seed, i, what);
            CHECK_MESSAGE(real.run({"TYPE", q}) == model.exec(1, {"TYPE", q}).at(0), where);
            if (real.run({"TYPE", q}) == resp::status("list"))
                CHECK_MESSAGE(real.run({"LRANGE", q, "0", "-1"}) == model.exec(1, {"LRANGE", q, "0", "-1"}).at(0), where);
            CHECK_MESSAGE(real.run({"GET", mk}) == model.exec(1, {"GET", mk}).at(0), where);
            for (const auto& k : {leases, z}) {
                const auto rs = scores_of(real.run({"ZRANGE", k, "0", "-1", "WITHSCORES"}));
                const auto ms_ = scores_of(model.exec(1, {"ZRANGE", k, "0", "-1", "WITHSCORES"}).at(0));
                bool zsame = rs.size() == ms_.size();
                for (auto& [member, score] : rs)
                    zsame = zsame && ms_.count(member) && std::abs(ms_.at(member) - score) < 2000;
                REQUIRE_MESSAGE(zsame, where << ": " << k << " differs");
            }
            for (const auto& k : {leases, q, z, mk}) {
                const auto rt = real.run({"PTTL", k});
                const auto mt = model.exec(1, {"PTTL", k}).at(0);
                CHECK_MESSAGE(near(rt, mt), where << ": PTTL " << k << ": server " << rt.show() << ", model " << mt.show());
            }
            for (const auto& k : {leases, z}) {
                if (real.run({"TYPE", k}) != resp::status("zset"))
                    continue;
                const auto rs = scores_of(real.run({"ZRANGE", k, "0", "-1", "WITHSCORES"}));
                const auto ttl = real.run({"PTTL", k});
                model.exec(1, {"DEL", k});
                for (auto& [member, score] : rs)
                    model.exec(1, {"ZADD", k, std::to_string(score), member});
                if (ttl.type == resp::kind::integer && ttl.integer > 0)
                    model.exec(1, {"PEXPIRE", k, std::to_string(ttl.integer)});
            }
            for (const auto& k : {q, mk}) {
                const auto ttl = real.run({"PTTL", k});
                if (ttl.type == resp::kind::integer && ttl.integer > 0)
                    model.exec(1, {"PEXPIRE", k, std::to_string(ttl.integer)});
            }
            auto counter = real.run({"GET", fence});
            if (counter.type == resp::kind::bulk)
                model.exec(1, {"SET", fence, counter.str});
        }
    }
    std::string summary;
    for (auto& [what, n] : counts)
        summary += fmt::format("{} {}, ", what, n);
    MESSAGE("redis_world vs redis-server, the semaphore: " << seeds << " seeds x " << ops
                                                           << " commands, every reply and state the same: " << summary);
}

// The read-write lock's four scripts (rw_read_script, rw_write_script, rw_release_script,
// rw_renew_script; redis_world_shared.cpp), the same way: readers' and writers' values of two
// processes and two lock objects (a reader of the process and object of the write key's holder is
// granted beside it: the downgrade), TTLs and writer timeouts of 30 to 120 s; between them: a
// reader's lease or a writer's mark set in the past (the purge, and the renewal of a lease past its
// time), a mark of a writer nobody runs, a foreign holder of the key, the key, a set or the counter
// deleted or set (bad counters too), the readers' set made a string (WRONGTYPE), SCRIPT LOAD. The
// release channel listened to on both (every PUBLISH compared). After every command the key is
// compared exactly, both sets member for member with their scores within 2 s, the three PTTLs within
// 2 s; then the model takes the server's counter, scores and the sets' TTLs.
TEST_CASE("redis_world against a real redis-server: the read-write lock's scripts' models, its readers and writers")
{
    zktest::redis_server server;
    connection real(server.port());
    connection listener(server.port());
    zksim::redis_world model;
    using namespace zkcoro::detail;
    const std::string key = "d:rw", p = "{d:rw}", fence = p + ":fencing", readers = p + ":readers",
                      writers = p + ":writers", channel = p + ":released";
    const int model_listener = 99;
    CHECK(listener.run({"SUBSCRIBE", channel}) == model.exec(model_listener, {"SUBSCRIBE", channel}).at(0));
    const char* seeds_env = std::getenv("ZKCORO_SIM_REDIS_DIFF_SEEDS");
    const int seeds = seeds_env ? std::atoi(seeds_env) : 5;
    const int ops = 400;
    std::map<std::string, long> counts;
    auto scores_of = [](const resp& r) {
        std::map<std::string, std::int64_t> out;
        for (std::size_t i = 0; i + 1 < r.elements.size(); i += 2)
            out[r.elements[i].str] = std::stoll(r.elements[i + 1].str);
        return out;
    };
    auto near = [](const resp& a, const resp& b) {
        return a.type == resp::kind::integer && b.type == resp::kind::integer &&
               (a.integer == b.integer || (a.integer >= 0 && b.integer >= 0 && std::abs(b.integer - a.integer) < 2000));
    };
    for (int seed = 1; seed <= seeds; ++seed) {
        std::mt19937_64 rng(static_cast<std::uint64_t>(seed) + 2000);
        auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
        real.run({"DEL", key, fence, readers, writers});
        real.run({"SCRIPT", "FLUSH"});
        model.exec(1, {"DEL", key, fence, readers, writers});
        model.exec(1, {"SCRIPT", "FLUSH"});
        // "<process>:<task>:<n>:<lock object>" + r or w; the read script's owner prefix is the
        // value up to its second ':', its writers' suffix ":<lock object>w".
        const std::string writer_values[] = {"pa:1a:1:1w", "pb:2b:2:1w", "pa:1a:5:2w", "pa:3c:9:1w"};
        const std::string reader_values[] = {"pa:1a:3:1r", "pb:2b:4:1r", "pa:3c:6:1r", "pa:1a:7:2r"};
        const std::string counters[] = {"5", "1700000000000000", "abc", "-5", "9007199254740992"};
        for (int i = 0; i < ops; ++i) {
            std::vector<std::string> args;
            std::string what;
            const int op = pick(24);
            const auto ms = [&] { return std::to_string(30'000 + 1000 * pick(90)); };
            const auto& w = writer_values[pick(4)];
            const auto& r = reader_values[pick(4)];
            const auto& any = pick(2) ? w : r;
            auto eval = [&](const lua_script& s, std::vector<std::string> rest, int nkeys) {
                std::vector<std::string> a;
                if (pick(10) == 0)
                    a = {"EVAL", s.text, std::to_string(nkeys)};
                else
                    a = {"EVALSHA", s.sha, std::to_string(nkeys)};
                a.insert(a.end(), rest.begin(), rest.end());
                return a;
            };
            const auto now_ms = server_time_us(real) / 1000;
            if (op < 6) {
                what = "read";
                const auto owner = r.substr(0, r.find(':', 3) + 1);
                const auto object = r.substr(r.rfind(':'), r.size() - r.rfind(':') - 1);
                args = eval(rw_read_script(), {key, fence, readers, writers, r, ms(), owner, object + "w"}, 4);
            } else if (op < 10) {
                what = "write";
                args = eval(rw_write_script(), {key, fence, readers, writers, w, ms(), ms()}, 4);
            } else if (op < 13) {
                what = "release";
                args = eval(rw_release_script(), {key, readers, writers, any, channel}, 3);
            } else if (op < 15) {
                what = "renew";
                args = eval(rw_renew_script(), {key, readers, any, ms()}, 2);
            } else if (op == 15) {
                what = "lease run out";
                args = {"ZADD", readers, std::to_string(now_ms - 1000 - pick(5000)), r};
            } else if (op == 16) {
                what = pick(2) ? "mark run out" : "mark of nobody";
                args = {"ZADD", writers, std::to_string(what == "mark run out" ? now_ms - 1000 - pick(5000) : now_ms + 60'000),
                        w};
            } else if (op == 17) {
                what = "foreign holder";
                args = {"SET", key, "redis-py-token", "NX", "PX", ms()};
            } else if (op == 18) {
                what = "del key";
                args = {"DEL", key};
            } else if (op == 19) {
                what = pick(2) == 0 ? "set counter" : "del counter";
                args = what == "set counter" ? std::vector<std::string>{"SET", fence, counters[pick(4) == 0 ? 2 + pick(3) : pick(2)]}
                                             : std::vector<std::string>{"DEL", fence};
            } else if (op == 20) {
                what = pick(8) == 0 ? "readers a string" : "del sets";
                args = what == "del sets" ? std::vector<std::string>{"DEL", pick(2) ? readers : writers}
                                          : std::vector<std::string>{"SET", readers, "x"};
            } else if (op == 21) {
                what = "zscore";
                args = {"ZSCORE", pick(2) ? readers : writers, any};
            } else {
                what = "script load";
                const lua_script* all[] = {&rw_read_script(), &rw_write_script(), &rw_release_script(), &rw_renew_script()};
                args = {"SCRIPT", "LOAD", all[pick(4)]->text};
            }
            model.set_now_us(server_time_us(real));
            const auto before = model.get(fence);
            const auto m = model.exec(1, args).at(0);
            const auto rr = real.run(args);
            bool same = rr == m;
            std::string shape = m.type == resp::kind::error ? m.str.substr(0, m.str.find(' ')) : "ok";
            if ((what == "read" || what == "write") && m.type == resp::kind::array && rr.type == resp::kind::array &&
                m.elements.size() == rr.elements.size() && !m.elements.empty() && m.elements[0] == rr.elements[0]) {
                if (m.elements[0].integer == 1) {
                    shape = "granted";
                    const bool from_clock =
                        !before || m.elements[1].integer != std::strtoll(before->c_str(), nullptr, 10) + 1;
                    const auto d = rr.elements[1].integer - m.elements[1].integer;
                    same = m.elements.size() == 2 && (from_clock ? d >= 0 && d < 2'000'000 : d == 0);
                } else {
                    shape = m.elements[2].str.empty() ? "waits (no writer)" : "waits (a writer)";
                    same = m.elements.size() == 4 && near(rr.elements[1], m.elements[1]) &&
                           rr.elements[2] == m.elements[2] && near(rr.elements[3], m.elements[3]);
                }
            }
            if (what == "zscore" && m.type == resp::kind::bulk && rr.type == resp::kind::bulk)
                same = std::abs(std::stoll(m.str) - std::stoll(rr.str)) < 2000;
            if ((what == "release" || what == "renew") && m.type == resp::kind::integer)
                shape = std::to_string(m.integer);
            ++counts[what + " " + shape];
            REQUIRE_MESSAGE(same, "seed " << seed << " op " << i << " (" << what << "): "
                                          << fmt::format("{}", fmt::join(args, " ")).substr(0, 160)
                                          << "\n  server: " << rr.show() << "\n  model:  " << m.show());
            for (auto& [conn, push] : model.take_published()) {
                CHECK(conn == model_listener);
                CHECK(listener.next() == push);
            }
            CHECK_MESSAGE(real.run({"GET", key}) == model.exec(1, {"GET", key}).at(0), "seed " << seed << " op " << i);
            for (const auto& z : {readers, writers}) {
                CHECK_MESSAGE(real.run({"TYPE", z}) == model.exec(1, {"TYPE", z}).at(0), "seed " << seed << " op " << i);
                if (real.run({"TYPE", z}) != resp::status("zset"))
                    continue;
                const auto rz = scores_of(real.run({"ZRANGE", z, "0", "-1", "WITHSCORES"}));
                const auto mz = scores_of(model.exec(1, {"ZRANGE", z, "0", "-1", "WITHSCORES"}).at(0));
                bool zsame = rz.size() == mz.size();
                for (auto& [member, score] : rz)
                    zsame = zsame && mz.count(member) && std::abs(mz.at(member) - score) < 2000;
                REQUIRE_MESSAGE(zsame, "seed " << seed << " op " << i << " (" << what << "): " << z << " differs");
            }
            for (const auto& k : {key, readers, writers}) {
                const auto rt = real.run({"PTTL", k});
                const auto mt = model.exec(1, {"PTTL", k}).at(0);
                CHECK_MESSAGE(near(rt, mt), "seed " << seed << " op " << i << " (" << what << "): PTTL " << k
                                                    << ": server " << rt.show() << ", model " << mt.show());
            }
            // The model takes the server's scores, the sets' TTLs and the counter.
            for (const auto& z : {readers, writers}) {
                if (real.run({"TYPE", z}) != resp::status("zset"))
                    continue;
                const auto rz = scores_of(real.run({"ZRANGE", z, "0", "-1", "WITHSCORES"}));
                const auto zttl = real.run({"PTTL", z});
                model.exec(1, {"DEL", z});
                for (auto& [member, score] : rz)
                    model.exec(1, {"ZADD", z, std::to_string(score), member});
                if (zttl.type == resp::kind::integer && zttl.integer > 0)
                    model.exec(1, {"PEXPIRE", z, std::to_string(zttl.integer)});
            }
            auto counter = real.run({"GET", fence});
            if (counter.type == resp::kind::bulk)
                model.exec(1, {"SET", fence, counter.str});
        }
    }
    std::string summary;
    for (auto& [what, n] : counts)
        summary += fmt::format("{} {}, ", what, n);
    MESSAGE("redis_world vs redis-server, the read-write lock: " << seeds << " seeds x " << ops
                                                                 << " commands, every reply and state the same: " << summary);
}
