// Issue 37: the same failure exits with the same status on ZooKeeper and on Redis, the status of
// zklock's one table (tools/zklock/exit_codes.hpp; check_exit_table.py holds the man page to it).
// Each case runs on both backends: nothing listening, refused credentials, a bad path or key, a
// refusal by the server, -t and -n against a held lock, the lock lost while the command runs.
#include "zklock_test_util.hpp"

#include "exit_codes.hpp"

#include <redis_server.hpp>

using namespace zklock_test;
namespace exit_code = zklock::exit_code;

namespace {

zktest::redis_server& redis()
{
    static zktest::redis_server r(zktest::redis_options{.password = "right-password"});
    return r;
}

std::string redis_url() { return redis().url(); }  // with its password

// Each backend's -c and its name for a lock (a ZooKeeper path, a Redis key).
struct backend {
    std::string name;
    std::function<std::string()> connect;
    std::function<std::string(std::string_view)> lock;
};

std::vector<backend> backends()
{
    return {
        {"zookeeper", [] { return zklock_test::connect(); }, [](std::string_view n) { return unique_path(n); }},
        {"redis", [] { return redis_url(); },
         [](std::string_view n) { return fmt::format("zklock-exit-{}-{}", ::getpid(), unique_path(n)); }},
    };
}

// Runs zklock and returns its exit status; its stderr goes to the test's output on a mismatch.
int exit_of(const std::vector<std::string>& argv, int want, const std::string& what)
{
    proc p;
    const int rc = run(argv, 20s, &p);
    CHECK_MESSAGE(rc == want, what << ": exit " << rc << ", the table says " << want << "; stderr: " << slurp(p.err));
    return rc;
}

}  // namespace

TEST_CASE("nothing listening: the same exit on both backends")
{
    const auto port = zktest::free_loopback_port();
    const int zk = exit_of(zklock_test::zklock({"-c", fmt::format("127.0.0.1:{}", port), "-t", "1"}, "/x", {"true"}),
                           exit_code::unavailable, "zookeeper");
    const int rd = exit_of(zklock_test::zklock({"-c", fmt::format("redis://127.0.0.1:{}", port), "-t", "1"}, "x", {"true"}),
                           exit_code::unavailable, "redis");
    CHECK(zk == rd);
}

TEST_CASE("credentials refused: the same exit on both backends")
{
    // ZooKeeper refuses a scheme it does not know (auth_failed); Redis a wrong password.
    ::setenv("ZK_AUTH", "no-such-scheme:x", 1);
    const int zk = exit_of(zklock_test::zklock({"-c", connect(), "-t", "5"}, unique_path("auth"), {"true"}), exit_code::unavailable,
                           "zookeeper");
    ::unsetenv("ZK_AUTH");
    const int rd = exit_of(zklock_test::zklock({"-c", fmt::format("redis://:wrong-password@127.0.0.1:{}", redis().port()), "-t", "5"},
                                  "auth", {"true"}),
                           exit_code::unavailable, "redis");
    CHECK(zk == rd);
}

TEST_CASE("the server refuses the lock: the same exit on both backends")
{
    // ZooKeeper: LOCKPATH whose ACL lets only its creator in; Redis: the key holds a list.
    const auto path = unique_path("refused");
    zkcoro::client_config owner;
    owner.auth = {{"digest", "alice:wonderland"}};
    owner.default_acl = zkcoro::creator_all_acl();
    with_zk([&](zkcoro::client& zk) { return create_all(zk, path); }, owner);
    const int zk = exit_of(zklock_test::zklock({"-c", connect(), "-t", "5"}, path, {"true"}), exit_code::refused, "zookeeper");
    const auto key = fmt::format("zklock-exit-{}-list", ::getpid());
    REQUIRE(redis().command({"RPUSH", key, "x"}) == "1");
    const int rd = exit_of(zklock_test::zklock({"-c", redis_url(), "-t", "5"}, key, {"true"}), exit_code::refused, "redis");
    CHECK(zk == rd);
}

TEST_CASE("-n and -t against a held lock: the same exit on both backends")
{
    for (const auto& b : backends()) {
        CAPTURE(b.name);
        const auto lock = b.lock("held");
        const auto events = file("events-" + b.name);
        reaper r;
        proc holder = start(zklock_test::zklock({"-c", b.connect()}, lock, child("holder", 20000, events)));
        r.procs.push_back(&holder);
        REQUIRE(started(events, "holder"));
        exit_of(zklock_test::zklock({"-c", b.connect(), "-n"}, lock, {"true"}), exit_code::tempfail, b.name + " -n");
        exit_of(zklock_test::zklock({"-c", b.connect(), "-t", "0.3"}, lock, {"true"}), exit_code::tempfail, b.name + " -t 0.3");
        ::kill(holder.pid, SIGTERM);
        CHECK(wait_for(holder, 10s) == 128 + SIGTERM);
    }
}

TEST_CASE("the lock taken away while the command runs: the same exit on both backends")
{
    for (const auto& b : backends()) {
        CAPTURE(b.name);
        const auto lock = b.lock("lost");
        const auto events = file("events-lost-" + b.name);
        reaper r;
        std::vector<std::string> opts{"-c", b.connect()};
        if (b.name == "redis")
            opts.insert(opts.end(), {"--ttl", "0.6"});  // renewed every 200 ms: the deletion is seen then
        proc p = start(zklock_test::zklock(opts, lock, child("lost", 15000, events)));
        r.procs.push_back(&p);
        REQUIRE(started(events, "lost"));
        if (b.name == "redis") {
            CHECK(redis().command({"DEL", lock}) == "1");
        } else {
            const auto holders = status_json(lock)["participants"];
            REQUIRE(holders.size() == 1);
            const std::string node = lock + "/" + holders[0]["node"].get<std::string>();
            with_zk([&](zkcoro::client& zk) -> asio::awaitable<void> { co_await zk.async_remove(node); });
        }
        const int rc = wait_for(p, 10s);
        CHECK_MESSAGE(rc == exit_code::lost, b.name << ": exit " << rc << "; stderr: " << slurp(p.err));
    }
}

TEST_CASE("a bad path or key: the same exit on both backends")
{
    // A path that ZooKeeper refuses (a relative one) and a key Redis' lock refuses (too long):
    // both are bad input, found before anything is sent.
    exit_of(zklock_test::zklock({"-c", connect()}, "relative/path", {"true"}), exit_code::usage, "zookeeper");
    exit_of(zklock_test::zklock({"-c", redis_url()}, std::string(2000, 'k'), {"true"}), exit_code::usage, "redis");
}
