// Integration tests of the zklock tool against a real ZooKeeper (the zktest harness starts one;
// tick 200 ms, so sessions last 0.4-4 s; audit log on, so server.log records who deleted which
// node). Every process is started here, waited for with a bound, and ended by PID only. The
// children are zklock-test-child (monotonic hold logs in interval-check's format, signal
// records, zklock's environment). The test talks to ZooKeeper itself through a zkcoro client.
#include "zklock_test_util.hpp"
#include "../unit/skipped_cases.hpp"  // ZKTEST_SKIP_CASE
#include "../unit/slack.hpp"          // zktest::relaxed

#include <string_view>

using namespace zklock_test;
using namespace std::chrono_literals;

namespace {

// A command line zklock must refuse with exit 64, and what its message must say.
struct bad_usage {
    std::vector<std::string> args;
    std::string says;
};

// Runs each command line: exit 64, the message saying what it should, and none of `never`.
void check_bad_usage(const std::vector<bad_usage>& cases, std::string_view never = {})
{
    for (const auto& c : cases) {
        std::vector<std::string> argv{zklock_bin};
        argv.insert(argv.end(), c.args.begin(), c.args.end());
        proc p;
        const int rc = run(argv, 10s, &p);
        const std::string err = slurp(p.err);
        CAPTURE(fmt::format("{}", fmt::join(c.args, " ")));
        CAPTURE(err);
        CHECK(rc == 64);
        CHECK(err.find(c.says) != std::string::npos);
        if (!never.empty())
            CHECK(err.find(never) == std::string::npos);
    }
}

}  // namespace

TEST_CASE("bad usage exits 64 and names the problem")
{
    const std::vector<bad_usage> cases = {
        {{}, "LOCKPATH is required"},
        {{"/x"}, "COMMAND is missing"},
        {{"/x", "--"}, "COMMAND is missing"},
        {{"relative", "--", "true"}, "must start with '/'"},
        {{"/a//b", "--", "true"}, "empty node name"},
        {{"--bogus", "/x", "--", "true"}, "unknown option: --bogus"},
        {{"-t", "abc", "/x", "--", "true"}, "--timeout"},
        {{"-t", "-1", "/x", "--", "true"}, "--timeout"},
        {{"-n", "-t", "1", "/x", "--", "true"}, "excludes"},
        {{"-s", "--semaphore", "2", "/x", "--", "true"}, "excludes"},
        {{"--semaphore", "0", "/x", "--", "true"}, "--semaphore"},
        {{"--on-lost", "maybe", "/x", "--", "true"}, "--on-lost"},
        {{"--session-timeout", "x", "/x", "--", "true"}, "--session-timeout"},
        {{"-c", "no-port-here:", "/x", "--", "true"}, "--connect"},
        {{"/x", "true"}, "goes after '--'"},
        {{"status"}, "LOCKPATH"},
        {{"status", "/x", "--", "true"}, "no command"},
        // Messages that state the rule broken, not a generic one.
        {{"-t", "1e308", "/x", "--", "true"}, "from 0 to 1000000000"},
        {{"-t", "nan", "/x", "--", "true"}, "from 0 to 1000000000"},
        {{"--semaphore", "1.5", "/x", "--", "true"}, "whole number"},
        {{"--kill-after", "-1", "/x", "--", "true"}, "--kill-after"},
        {{"--lost-exit-code", "256", "/x", "--", "true"}, "from 0 to 255"},
        {{"-E", "x", "/x", "--", "true"}, "whole number"},
        {{"status", "-t", "3", "/x"}, "status takes LOCKPATH"},
        {{"/a\x1b[2Jb", "--", "true"}, "\\x1b[2Jb"},
        {{"--acl", "creator", "/x", "--", "true"}, "--acl creator needs credentials"},
        {{"--acl", "nobody", "/x", "--", "true"}, "--acl"},
        {{"--auth-file", "/nonexistent/auth", "/x", "--", "true"}, "--auth-file /nonexistent/auth"},
        // Revocation (--revocable, --on-revoke, revoke).
        {{"--on-revoke", "ignore", "/x", "--", "true"}, "--on-revoke requires --revocable"},
        {{"--revocable", "--on-revoke", "maybe", "/x", "--", "true"}, "--on-revoke"},
        {{"--revocable", "--data", "d", "/x", "--", "true"}, "--data excludes --revocable"},
        {{"--revocable", "-s", "/x", "--", "true"}, "excludes --revocable"},
        {{"--revocable", "--semaphore", "2", "/x", "--", "true"}, "excludes --revocable"},
        {{"revoke"}, "revoke: LOCKPATH is required"},
        {{"revoke", "/x", "a/b"}, "NODE 'a/b': a node name under LOCKPATH"},
        {{"revoke", "/x", "--", "true"}, "revoke takes no command"},
    };
    check_bad_usage(cases);
    // The escaped path: no raw escape character reaches the terminal.
    {
        proc p;
        CHECK(run({zklock_bin, "/a\x1b[2Jb", "--", "true"}, 10s, &p) == 64);
        CHECK(slurp(p.err).find('\x1b') == std::string::npos);
    }
    // A bad $ZK_CONNECT is blamed on $ZK_CONNECT, not on --connect.
    {
        ::setenv("ZK_CONNECT", "no-port-here:", 1);
        proc p;
        const int rc = run({zklock_bin, "/x", "--", "true"}, 10s, &p);
        ::unsetenv("ZK_CONNECT");
        CHECK(rc == 64);
        CHECK(slurp(p.err).find("$ZK_CONNECT 'no-port-here:'") != std::string::npos);
        CHECK(slurp(p.err).find("--connect") == std::string::npos);
    }
    // Malformed credentials: named by their origin, never echoed.
    {
        ::setenv("ZK_AUTH", "digest:only-a-user", 1);
        proc p;
        const int rc = run({zklock_bin, "/x", "--", "true"}, 10s, &p);
        ::unsetenv("ZK_AUTH");
        CHECK(rc == 64);
        CHECK(slurp(p.err).find("$ZK_AUTH") != std::string::npos);
        CHECK(slurp(p.err).find("only-a-user") == std::string::npos);
        const auto auth = file("auth");
        std::ofstream(auth) << "secret-without-scheme\n";
        CHECK(run({zklock_bin, "--auth-file", auth, "/x", "--", "true"}, 10s, &p) == 64);
        CHECK(slurp(p.err).find("--auth-file " + auth + ": expected scheme:credentials") != std::string::npos);
        CHECK(slurp(p.err).find("secret-without-scheme") == std::string::npos);
    }
    proc h;
    CHECK(run({zklock_bin, "--help"}, 10s, &h) == 0);
    const std::string help = slurp(h.out);
    for (const char* code : {"64", "69", "70", "75", "76", "126", "127", "128+N"})
        CHECK(help.find(code) != std::string::npos);
    // One synopsis (CLI11's generated "[LOCKPATH] [SUBCOMMAND]" line contradicted it), and examples.
    CHECK(help.find("Usage: zklock [OPTIONS] LOCKPATH -- COMMAND [ARGS...]") != std::string::npos);
    CHECK(help.find("[SUBCOMMAND]") == std::string::npos);
    CHECK(help.find("EXAMPLES") != std::string::npos);
    CHECK(help.find("zklock -n /locks/deploy -- make deploy") != std::string::npos);
    CHECK(help.find("ZKLOCK_FENCING_TOKEN") != std::string::npos);
    CHECK(run({zklock_bin, "--version"}, 10s) == 0);
}

TEST_CASE("the command's exit status is zklock's")
{
    const auto path = unique_path("codes");
    const auto events = file("events");
    CHECK(run(zklock({"-c", connect()}, path, {child_bin, "--id", "a", "--exit", "3"}), 20s) == 3);
    CHECK(run(zklock({"-c", connect()}, path, {child_bin, "--id", "b", "--raise", std::to_string(SIGUSR1)}), 20s) ==
          128 + SIGUSR1);
    CHECK(run(zklock({"-c", connect()}, path, {"/nonexistent/command"}), 20s) == 127);
    const auto not_executable = file("not-executable");
    std::ofstream(not_executable) << "data\n";
    CHECK(run(zklock({"-c", connect()}, path, {not_executable}), 20s) == 126);
    // Nothing listens on this port: 69 once the connect timeout (here -t 1) ran out.
    proc p;
    const auto dead = fmt::format("127.0.0.1:{}", zktest::free_loopback_port());
    CHECK(run(zklock({"-c", dead, "-t", "1"}, path, {"true"}), 20s, &p) == 69);
    CHECK(slurp(p.err).find("cannot connect") != std::string::npos);
    CHECK(slurp(p.err).find("client_config") == std::string::npos);  // no library internals
}

TEST_CASE("--nonblock and --timeout give 75 while another zklock holds the lock")
{
    const auto path = unique_path("busy");
    const auto events = file("events");
    reaper r;
    proc holder = start(zklock({"-c", connect(), "--data", "the-holder"}, path, child("holder", 30000, events)));
    r.procs.push_back(&holder);
    REQUIRE(started(events, "holder"));

    proc nb;
    auto t0 = clock_type::now();
    CHECK(run(zklock({"-c", connect(), "-n"}, path, {"true"}), 10s, &nb) == 75);
    CHECK(seconds_since(t0) < 2.0);
    CHECK(slurp(nb.err).find("held") != std::string::npos);
    CHECK(slurp(nb.err).find("waiting for") == std::string::npos);  // no status line off a terminal

    t0 = clock_type::now();
    CHECK(run(zklock({"-c", connect(), "-t", "1"}, path, {"true"}), 10s) == 75);
    const double waited = seconds_since(t0);
    CHECK(waited >= 0.9);
    CHECK(waited < 3.0);

    // The holder ends (SIGTERM, forwarded); the lock is free at once.
    ::kill(holder.pid, SIGTERM);
    CHECK(wait_for(holder, 10s) == 128 + SIGTERM);
    CHECK(run(zklock({"-c", connect(), "-n"}, path, {"true"}), 10s) == 0);
}

// Where sharing is the point (readers, a semaphore of 2) it is asserted too: max_concurrency >= 2,
// else a read lock or semaphore that behaved like a mutex would pass. For that the holds there
// last 200 ms (600 ms under the sanitizers, where the zklocks start slower: slack.hpp), within
// which the 12 zklocks started together queue up, and the read-write run has 8 readers and 4
// writers: in any queue order two readers are next to each other (4 writers cannot separate 8
// readers), and those two hold together.
TEST_CASE("zklock runs never overlap: mutex, read-write, semaphore (interval-check)")
{
    struct scenario {
        std::string name;
        std::vector<std::pair<std::vector<std::string>, std::string>> kinds;  // options, log mode
        int max_leases;
        int hold_ms;
        bool shares;  // max_concurrency >= 2 is required
    };
    const std::vector<scenario> scenarios = {
        {"mutex", {{{}, "X"}}, 1, 60, false},
        {"rw", {{{"-s"}, "R"}, {{"-s"}, "R"}, {{"-w"}, "W"}}, 1, 200, true},
        {"semaphore", {{{"--semaphore", "2"}, "S"}}, 2, 200, true},
    };
    for (const auto& sc : scenarios) {
        CAPTURE(sc.name);
        const auto path = unique_path(sc.name);
        const auto log = file("holds.log");
        const auto events = file("events");
        std::vector<proc> procs;  // before the reaper, which must go first
        procs.reserve(12);
        reaper r;
        std::vector<std::string> ids;
        for (int i = 0; i < 12; ++i) {
            const auto& kind = sc.kinds[static_cast<std::size_t>(i) % sc.kinds.size()];
            const auto id = fmt::format("{}{}", sc.name, i);
            ids.push_back(id);
            auto opts = kind.first;
            opts.insert(opts.end(), {"-c", connect(), "-t", "60"});
            procs.push_back(start(zklock(opts, path, child(id, sc.shares ? zktest::relaxed(sc.hold_ms) : sc.hold_ms, events, log, kind.second))));
        }
        for (auto& p : procs)
            r.procs.push_back(&p);
        for (auto& p : procs)
            CHECK_MESSAGE(wait_for(p, 90s) == 0, slurp(p.err));
        proc check;
        const int rc = run({interval_check_bin, "--max-leases", std::to_string(sc.max_leases), "--expect-ids",
                            fmt::format("{}", fmt::join(ids, ",")), log},
                           30s, &check);
        CHECK_MESSAGE(rc == 0, slurp(check.out));
        const auto summary = slurp(check.out).substr(0, slurp(check.out).find('\n'));
        MESSAGE(sc.name << ": " << summary);
        if (sc.shares) {
            // "holds=N max_concurrency=M max_leases=L"
            const auto at = summary.find("max_concurrency=");
            REQUIRE_MESSAGE(at != std::string::npos, summary);
            const int most = std::atoi(summary.c_str() + at + std::string_view("max_concurrency=").size());
            CHECK_MESSAGE(most >= 2, sc.name << " never had 2 holders at once (it behaved like a mutex): " << summary);
        }
    }
}

TEST_CASE("the lock is lost while the command runs: SIGTERM to the command, exit 70")
{
    const auto path = unique_path("lost");
    const auto events = file("events");
    zktest::tcp_proxy proxy("127.0.0.1", server().port());
    reaper r;
    proc p = start(zklock({"-c", proxy.address(), "--session-timeout", "2000"}, path, child("victim", 60000, events)));
    r.procs.push_back(&p);
    REQUIRE(started(events, "victim"));
    const auto t0 = clock_type::now();
    proxy.set_blackhole(true);
    CHECK(wait_for(p, 20s) == 70);
    const double took = seconds_since(t0);
    MESSAGE("zklock ended " << took << " s after the link went dark");
    CHECK(took < zktest::relaxed(10.0));  // relaxed under the sanitizers (slack.hpp)
    CHECK(contains(events, fmt::format("victim signal {}", SIGTERM)));
    CHECK(slurp(p.err).find("lost") != std::string::npos);
    // Once the server expired the session, another zklock gets the lock.
    CHECK(run(zklock({"-c", connect(), "-t", "15"}, path, {"true"}), 30s) == 0);
}

TEST_CASE("INT, TERM and HUP are forwarded to the command; the lock is free at once")
{
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
        CAPTURE(sig);
        const auto path = unique_path("signals");
        const auto events = file("events");
        reaper r;
        proc p = start(zklock({"-c", connect()}, path, child("sig", 60000, events)));
        r.procs.push_back(&p);
        REQUIRE(started(events, "sig"));
        ::kill(p.pid, sig);
        CHECK(wait_for(p, 10s) == 128 + sig);
        CHECK(contains(events, fmt::format("sig signal {} ", sig)));
        // Session closed on the way out: no waiting for an expiry.
        CHECK(run(zklock({"-c", connect(), "-n"}, path, {"true"}), 10s) == 0);
    }
    // A signal while waiting (TERM, or INT as from Ctrl-C) ends the wait (128+N) and leaves no
    // node behind.
    for (const int sig : {SIGTERM, SIGINT}) {
        CAPTURE(sig);
        const auto path = unique_path("signal-waiting");
        const auto events = file("events");
        reaper r;
        proc holder = start(zklock({"-c", connect()}, path, child("h", 60000, events)));
        r.procs.push_back(&holder);
        REQUIRE(started(events, "h"));
        proc waiter = start(zklock({"-c", connect()}, path, {"true"}));
        r.procs.push_back(&waiter);
        REQUIRE(eventually([&] { return status_json(path)["participants"].size() == 2; }, 10s));
        ::kill(waiter.pid, sig);
        CHECK(wait_for(waiter, 10s) == 128 + sig);
        const auto j = status_json(path);
        CHECK_MESSAGE(j["participants"].size() == 1, "left behind: " << j.dump());
        ::kill(holder.pid, SIGTERM);
        CHECK(wait_for(holder, 10s) == 128 + SIGTERM);
    }
}

// A message zklock writes while its stderr blocks (a terminal stopped by Ctrl-S or busy, a pipe
// nobody reads yet) is finished once the reader catches up, whatever signal comes meanwhile. The
// signals zklock handles (Asio's signal_set installs handlers without SA_RESTART) used to fail
// that write with EINTR: fmt's "cannot write to file: Interrupted system call", exit 76 instead
// of the command's status; a fresh run of test_zklock_safety saw it after a Ctrl-Z, when the
// killed command's SIGCHLD came during a message to the terminal.
TEST_CASE("a message to a blocked stderr survives the signals that come meanwhile")
{
    const auto path = unique_path("blocked-stderr");
    const auto events = file("events");
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    proc p = start(zklock({"-c", connect(), "-v"}, path, child("blk", 60000, events)), fds[1], fds[0]);
    reaper r;
    r.procs.push_back(&p);
    std::string err;
    const auto drain = [&] {  // what zklock wrote so far (the read end is non-blocking)
        char buf[4096];
        for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;)
            err.append(buf, static_cast<std::size_t>(n));
    };
    REQUIRE(::fcntl(fds[0], F_SETFL, O_NONBLOCK) == 0);
    REQUIRE(started(events, "blk"));
    drain();
    REQUIRE_MESSAGE(err.find("acquired") != std::string::npos, "no -v message: " << err);
    err.clear();
    // Fill the pipe (non-blocking only for the filling: the flag is the pipe's, zklock's too), so
    // that zklock's next write blocks.
    REQUIRE(::fcntl(fds[1], F_SETFL, O_NONBLOCK) == 0);
    const std::string chunk(4096, '.');
    std::size_t filled = 0;
    for (ssize_t n; (n = ::write(fds[1], chunk.data(), chunk.size())) > 0;)
        filled += static_cast<std::size_t>(n);
    REQUIRE(errno == EAGAIN);
    REQUIRE(::fcntl(fds[1], F_SETFL, 0) == 0);
    ::close(fds[1]);
    // TERM: zklock says it forwards it (-v), and that write blocks. SIGCHLDs while it is blocked
    // (no child has ended: zklock finds none to reap).
    ::kill(p.pid, SIGTERM);
    for (int i = 0; i < 25; ++i) {
        std::this_thread::sleep_for(20ms);  // paces the signals: the write's block has no event
        ::kill(p.pid, SIGCHLD);
    }
    // The reader catches up: zklock finishes the message, forwards TERM and exits 128+15.
    const auto deadline = clock_type::now() + 20s;
    const auto running = [&] {
        siginfo_t info{};
        return ::waitid(P_PID, static_cast<id_t>(p.pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == 0;
    };
    while (running() && clock_type::now() < deadline) {
        drain();
        std::this_thread::sleep_for(10ms);  // polls the pipe and the exit together (bounded)
    }
    const int rc = wait_for(p, 1s);
    drain();
    ::close(fds[0]);
    REQUIRE(err.size() >= filled);
    err.erase(0, err.find_first_not_of('.'));
    CHECK_MESSAGE(rc == 128 + SIGTERM, "stderr: " << err);
    CHECK_MESSAGE(err.find("forwarding SIGTERM") != std::string::npos, "stderr: " << err);
    CHECK_MESSAGE(err.find("Interrupted system call") == std::string::npos, "stderr: " << err);
    CHECK(contains(events, fmt::format("blk signal {} ", SIGTERM)));
    CHECK(run(zklock({"-c", connect(), "-n"}, path, {"true"}), 10s) == 0);
}

// A stderr that can take nothing more: a terminal that hung up (its window closed), where every
// write fails with EIO. zklock loses its messages, not its run: it forwards the signal and exits
// as the command did. It aborted (SIGABRT) there, on fmt::print's exception.
TEST_CASE("a hung-up terminal on stderr: -v messages are lost, the run is not")
{
    const auto path = unique_path("hung-up");
    const auto events = file("events");
    int master = -1, slave = -1;
    REQUIRE(::openpty(&master, &slave, nullptr, nullptr, nullptr) == 0);
    proc p = start(zklock({"-c", connect(), "-v"}, path, child("hup", 60000, events)), slave, master);
    ::close(slave);
    reaper r;
    r.procs.push_back(&p);
    REQUIRE(started(events, "hup"));
    ::close(master);  // the hang-up: zklock's writes to the terminal now fail (EIO)
    ::kill(p.pid, SIGTERM);  // -v: zklock says it forwards it
    CHECK(wait_for(p, 10s) == 128 + SIGTERM);
    CHECK(contains(events, fmt::format("hup signal {} ", SIGTERM)));
    CHECK(run(zklock({"-c", connect(), "-n"}, path, {"true"}), 10s) == 0);
}

// stderr a pipe whose reader went (`zklock -v ... 2>&1 | tee log`, tee killed): zklock's next
// message raised SIGPIPE, which killed it; its command was then killed (the guardian) and the lock
// stayed held until the session expired. Now the message is lost and the run goes on, as flock(1)
// would: the command gets SIGPIPE itself only if it writes there.
TEST_CASE("stderr a pipe nobody reads any more: -v messages are lost, the run is not")
{
    const auto path = unique_path("broken-pipe");
    const auto events = file("events");
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    proc p = start(zklock({"-c", connect(), "-v"}, path, child("pipe", 60000, events)), fds[1], fds[0]);
    ::close(fds[1]);
    reaper r;
    r.procs.push_back(&p);
    REQUIRE(started(events, "pipe"));
    ::close(fds[0]);  // the reader goes: zklock's writes to stderr now fail (EPIPE)
    ::kill(p.pid, SIGTERM);  // -v: zklock says it forwards it
    CHECK(wait_for(p, 10s) == 128 + SIGTERM);
    CHECK(contains(events, fmt::format("pipe signal {} ", SIGTERM)));
    CHECK(run(zklock({"-c", connect(), "-n"}, path, {"true"}), 10s) == 0);  // released, not left to expire
}

TEST_CASE("zklock killed with SIGKILL: the lock is free once its session expires")
{
    const auto path = unique_path("sigkill");
    const auto events = file("events");
    reaper r;
    proc p = start(zklock({"-c", connect(), "--session-timeout", "2000"}, path, child("k", 60000, events)));
    r.procs.push_back(&p);
    REQUIRE(started(events, "k"));
    ::kill(p.pid, SIGKILL);
    CHECK(wait_for(p, 5s) == 128 + SIGKILL);
    const auto t0 = clock_type::now();
    // The orphaned command is told (parent-death signal = the --on-lost signal).
    CHECK(eventually([&] { return contains(events, fmt::format("k signal {}", SIGTERM)); }, 5s));
    // Still held until the server expires the session...
    CHECK(run(zklock({"-c", connect(), "-n"}, path, {"true"}), 10s) == 75);
    // ...then free.
    CHECK(run(zklock({"-c", connect(), "-t", "15"}, path, {"true"}), 30s) == 0);
    const double took = seconds_since(t0);
    MESSAGE("lock free " << took << " s after SIGKILL (session timeout 2 s)");
    CHECK(took < zktest::relaxed(10.0));  // relaxed under the sanitizers (slack.hpp)
}

TEST_CASE("status --json lists the queue in order, Curator's nodes included")
{
    // Curator (Debian's jars, built like the interop tests).
    const auto java_dir = file("java");
    const int built = std::system(fmt::format("bash '{}' '{}' >'{}.log' 2>&1", curator_build_sh, java_dir, java_dir).c_str());
    REQUIRE_MESSAGE(built == 0, "building CuratorHolder failed: " << slurp(java_dir + ".log"));
    std::string cp = slurp(java_dir + "/classpath.txt");
    while (!cp.empty() && (cp.back() == '\n' || cp.back() == ' '))
        cp.pop_back();

    const auto path = unique_path("status");
    const auto events = file("events");
    const auto session_file = file("session");
    reaper r;
    proc holder = start(zklock({"-c", connect(), "--data", "zk-holder", "--session-file", session_file}, path,
                               child("holder", 60000, events)));
    r.procs.push_back(&holder);
    REQUIRE(started(events, "holder"));
    proc curator = start({"/usr/bin/java", "-cp", cp, "CuratorHolder", "--connect", connect(), "--path", path,
                          "--recipe", "mutex", "--duration-ms", "60000", "--max-count", "1", "--hold-ms", "10",
                          "--acquire-timeout-ms", "60000", "--log", file("curator.log"), "--id", "curator"});
    r.procs.push_back(&curator);
    REQUIRE(eventually([&] { return status_json(path)["participants"].size() == 2; }, 60s));
    proc waiter = start(zklock({"-c", connect(), "--data", "zk-waiter", "-t", "60"}, path, {"true"}));
    r.procs.push_back(&waiter);
    REQUIRE(eventually([&] { return status_json(path)["participants"].size() == 3; }, 20s));

    const auto j = status_json(path);
    INFO(j.dump(2));
    CHECK(j["path"] == path);
    CHECK(j["recipe"] == "mutex");
    const auto& ps = j["participants"];
    REQUIRE(ps.size() == 3);
    CHECK(ps[0]["data"] == "zk-holder");
    CHECK(ps[0]["holding"] == true);
    CHECK(ps[1]["holding"] == false);
    const std::string holder_session = slurp(session_file).substr(0, slurp(session_file).find(' '));
    CHECK(ps[0]["session"] == holder_session);
    CHECK(ps[2]["data"] == "zk-waiter");  // queued after Curator
    CHECK(ps[1]["data"] != "zk-waiter");
    for (const auto& e : ps) {
        CHECK(e["age_s"].get<double>() >= 0.0);
        CHECK(e["age_s"].get<double>() < 120.0);
        CHECK(e["session"].get<std::string>().starts_with("0x"));
    }
    // Curator's own view of the queue: the same nodes in the same order.
    proc cur_list;
    REQUIRE(run({"/usr/bin/java", "-cp", cp, "CuratorHolder", "--participants", "--connect", connect(), "--path", path,
                 "--recipe", "mutex"},
                60s, &cur_list) == 0);
    std::string expected;
    for (const auto& e : ps)
        expected += path + "/" + e["node"].get<std::string>() + "\n";
    CHECK(slurp(cur_list.out) == expected);

    // The text form names the same holder.
    proc text;
    CHECK(run({zklock_bin, "status", "-c", connect(), path}, 20s, &text) == 0);
    CHECK(slurp(text.out).find("zk-holder") != std::string::npos);

    ::kill(holder.pid, SIGTERM);
    CHECK(wait_for(holder, 10s) == 128 + SIGTERM);
    CHECK(wait_for(curator, 60s) == 0);
    CHECK(wait_for(waiter, 30s) == 0);
}

TEST_CASE("status --json for a read-write lock and a semaphore")
{
    {
        const auto path = unique_path("rw");
        const auto events = file("events");
        reaper r;
        proc r1 = start(zklock({"-c", connect(), "-s", "--data", "reader1"}, path, child("r1", 60000, events)));
        r.procs.push_back(&r1);
        REQUIRE(started(events, "r1"));
        proc r2 = start(zklock({"-c", connect(), "-s", "--data", "reader2"}, path, child("r2", 60000, events)));
        r.procs.push_back(&r2);
        REQUIRE(started(events, "r2"));
        proc w = start(zklock({"-c", connect(), "-w", "--data", "writer", "-t", "60"}, path, {"true"}));
        r.procs.push_back(&w);
        REQUIRE(eventually([&] { return status_json(path)["participants"].size() == 3; }, 10s));
        const auto j = status_json(path);
        INFO(j.dump(2));
        CHECK(j["recipe"] == "read-write");
        const auto& ps = j["participants"];
        REQUIRE(ps.size() == 3);
        CHECK(ps[0]["mode"] == "read");
        CHECK(ps[0]["holding"] == true);
        CHECK(ps[1]["mode"] == "read");
        CHECK(ps[1]["holding"] == true);
        CHECK(ps[2]["mode"] == "write");
        CHECK(ps[2]["holding"] == false);
        CHECK(ps[2]["data"] == "writer");
        for (proc* p : {&r1, &r2})
            ::kill(p->pid, SIGTERM);
        CHECK(wait_for(r1, 10s) == 128 + SIGTERM);
        CHECK(wait_for(r2, 10s) == 128 + SIGTERM);
        CHECK(wait_for(w, 20s) == 0);
    }
    {
        const auto path = unique_path("sem");
        const auto events = file("events");
        reaper r;
        proc h = start(zklock({"-c", connect(), "--semaphore", "1", "--data", "lease-holder"}, path,
                              child("s1", 60000, events)));
        r.procs.push_back(&h);
        REQUIRE(started(events, "s1"));
        proc w = start(zklock({"-c", connect(), "--semaphore", "1", "--data", "lease-waiter", "-t", "60"}, path,
                              {"true"}));
        r.procs.push_back(&w);
        REQUIRE(eventually(
            [&] {
                const auto j = status_json(path);
                for (const auto& e : j["participants"])
                    if (e["mode"] == "queued" && e["data"] == "lease-waiter")
                        return true;
                return false;
            },
            10s));
        const auto j = status_json(path);
        INFO(j.dump(2));
        CHECK(j["recipe"] == "semaphore");
        const auto& ps = j["participants"];
        REQUIRE(ps.size() >= 2);
        CHECK(ps[0]["mode"] == "lease");
        CHECK(ps[0]["data"] == "lease-holder");
        CHECK(ps[ps.size() - 1]["mode"] == "queued");
        ::kill(h.pid, SIGTERM);
        CHECK(wait_for(h, 10s) == 128 + SIGTERM);
        CHECK(wait_for(w, 20s) == 0);
    }
}

// Issue 1: the parent-death signal reached only zklock's direct child. Now the guardian signals
// the command's whole process group when zklock dies, and SIGKILLs it after --kill-after.
TEST_CASE("zklock killed with SIGKILL: the command's grandchildren get the signal, then SIGKILL")
{
    const auto path = unique_path("sigkill-tree");
    const auto events = file("events");
    const auto pid_file = file("pid");
    reaper r;
    // The shell stays (a command follows), so the test child is a grandchild of zklock; the
    // second shell ignores TERM and its sleep inherits that.
    const auto grandchild = fmt::format("( '{}' --id gk --sleep-ms 60000 --events '{}'; true )", child_bin, events);
    const auto stubborn = fmt::format("trap '' TERM; sh -c 'echo $$ > {}; exec sleep 33'; true", pid_file);
    // Session 4 s: the guardian's bound (a third of it, 1.33 s) leaves --kill-after 1 in force.
    proc p = start(zklock({"-c", connect(), "--session-timeout", "4000", "--kill-after", "1"}, path,
                          {"sh", "-c", grandchild + " & " + stubborn}));
    r.procs.push_back(&p);
    REQUIRE(started(events, "gk"));
    const pid_t sleeper = read_pid(pid_file);
    REQUIRE(alive(sleeper));
    ::kill(p.pid, SIGKILL);
    CHECK(wait_for(p, 5s) == 128 + SIGKILL);
    const auto t0 = clock_type::now();
    CHECK_MESSAGE(eventually([&] { return contains(events, fmt::format("gk signal {}", SIGTERM)); }, 5s),
                  "the grandchild got no SIGTERM after zklock's SIGKILL");
    // The sleep ignores SIGTERM: SIGKILL after --kill-after 1.
    CHECK_MESSAGE(eventually([&] { return !alive(sleeper); }, 6s), "sleep " << sleeper << " still runs");
    const double took = seconds_since(t0);
    MESSAGE("the TERM-ignoring sleep ended " << took << " s after zklock's SIGKILL (--kill-after 1)");
    CHECK(took >= 0.8);
    // Once the session expired, the lock is free, and nothing of the old tree runs any more.
    CHECK(run(zklock({"-c", connect(), "-t", "15"}, path, {"true"}), 30s) == 0);
}

// Issue 10: a background job started by the command outlived the lock. zklock (a subreaper)
// now holds the lock until every descendant has exited, a setsid() one included.
TEST_CASE("the lock is held until the command's background jobs have exited, setsid ones too")
{
    for (const std::string launcher : {"", "setsid "}) {
        CAPTURE(launcher);
        const auto path = unique_path("background");
        const auto events = file("events");
        const auto log = file("holds.log");
        reaper r;
        const auto script =
            fmt::format("{}'{}' --id bg --sleep-ms 2500 --events '{}' --log '{}' & exit 0", launcher, child_bin, events, log);
        proc p = start(zklock({"-c", connect(), "-v"}, path, {"sh", "-c", script}));
        r.procs.push_back(&p);
        REQUIRE(started(events, "bg"));
        // The shell has exited; the job runs; the lock is still held.
        CHECK(run(zklock({"-c", connect(), "-n"}, path, {"true"}), 10s) == 75);
        CHECK(wait_for(p, 20s) == 0);
        CHECK_MESSAGE(contains(log, "bg X "), "zklock exited before its background job did");
        CHECK(slurp(p.err).find("process(es) it left behind") != std::string::npos);
        CHECK(run(zklock({"-c", connect(), "-n"}, path, {"true"}), 10s) == 0);
    }
}

// Issue 2: a command that reads the terminal is stopped (SIGTTIN) and zklock waited forever with
// the lock held. Now zklock reports the stop, and Ctrl-C or TERM (timeout(1)) ends the command:
// every forwarded signal is followed by SIGCONT.
TEST_CASE("a command stopped by SIGTTIN is reported, and Ctrl-C or SIGTERM ends it")
{
    for (const bool ctrl_c : {true, false}) {
        CAPTURE(ctrl_c);
        const auto path = unique_path("tty");
        int master = -1;
        std::vector<std::string> argv = zklock({"-c", connect()}, path, {"sh", "-c", "read x; exit 9"});
        std::vector<char*> args;
        for (auto& a : argv)
            args.push_back(a.data());
        args.push_back(nullptr);
        const pid_t pid = ::forkpty(&master, nullptr, nullptr, nullptr);
        REQUIRE(pid >= 0);
        if (pid == 0) {
            ::execv(args[0], args.data());
            ::_exit(127);
        }
        proc p;
        p.pid = pid;
        p.err = file("unused");
        reaper r;
        r.procs.push_back(&p);
        std::string screen;
        auto read_screen = [&](const std::string& want, clock_type::duration limit) {
            const auto deadline = clock_type::now() + limit;
            while (screen.find(want) == std::string::npos && clock_type::now() < deadline) {
                pollfd pfd{master, POLLIN, 0};
                if (::poll(&pfd, 1, 100) > 0) {
                    char buf[512];
                    const ssize_t n = ::read(master, buf, sizeof buf);
                    if (n <= 0)
                        break;
                    screen.append(buf, static_cast<std::size_t>(n));
                }
            }
            return screen.find(want) != std::string::npos;
        };
        CHECK_MESSAGE(read_screen("was stopped by SIGTTIN", 20s), "zklock did not report the stop; screen: " << screen);
        if (ctrl_c) {
            const char intr = '\x03';  // the terminal sends SIGINT to zklock's foreground group
            REQUIRE(::write(master, &intr, 1) == 1);
        } else {
            ::kill(pid, SIGTERM);  // as timeout(1) does
        }
        const int rc = wait_for(p, 10s);
        CHECK(rc == 128 + (ctrl_c ? SIGINT : SIGTERM));
        read_screen("\n", 1s);
        ::close(master);
        // The lock was released.
        CHECK(run(zklock({"-c", connect(), "-n"}, path, {"true"}), 10s) == 0);
    }
}

// Issue 4: after a loss, a command that ignores SIGTERM kept the (lost) lock's command running.
// --kill-after escalates to SIGKILL; --lost-exit-code sets the status that says "lost".
TEST_CASE("lost lock, command ignores SIGTERM: SIGKILL after --kill-after, --lost-exit-code")
{
    const auto path = unique_path("kill-after");
    const auto pid_file = file("pid");
    zktest::tcp_proxy proxy("127.0.0.1", server().port());
    reaper r;
    proc p = start(zklock({"-c", proxy.address(), "--session-timeout", "2000", "--kill-after", "1", "--lost-exit-code", "99"},
                          path, {"sh", "-c", fmt::format("trap '' TERM; echo $$ > {}; exec sleep 30", pid_file)}));
    r.procs.push_back(&p);
    const pid_t sleeper = read_pid(pid_file);
    const auto t0 = clock_type::now();
    proxy.set_blackhole(true);
    CHECK(wait_for(p, 20s) == 99);
    const double took = seconds_since(t0);
    MESSAGE("zklock ended " << took << " s after the link went dark (session 2 s, --kill-after 1)");
    CHECK(took < zktest::relaxed(10.0));  // relaxed under the sanitizers (slack.hpp)
    CHECK(!alive(sleeper));
    const auto err = slurp(p.err);
    CHECK(err.find("sending SIGTERM") != std::string::npos);
    CHECK(err.find("SIGKILL (--kill-after)") != std::string::npos);
    CHECK(err.find("exit 99: the lock on " + path + " was lost") != std::string::npos);
}

// Issue 5: zklock never deleted its node (the release came from another task and its error was
// swallowed); only the session's end removed it. The audit log names the operation that
// removed the node.
TEST_CASE("the release deletes the lock node before the session ends, and says nothing of a loss")
{
    const auto path = unique_path("release");
    const auto env = file("env");
    const auto session_file = file("session");
    proc p;
    REQUIRE(run(zklock({"-c", connect(), "-v", "--session-file", session_file}, path,
                       {child_bin, "--id", "rel", "--env-file", env}),
                20s, &p) == 0);
    const auto vars = read_env_file(env);
    const std::string node = vars.at("ZKLOCK_NODE");
    CHECK(node.starts_with(path + "/_c_"));
    CHECK(slurp(p.err).find("lost") == std::string::npos);
    CHECK(slurp(p.err).find("released " + path + " (deleted " + node + ")") != std::string::npos);
    const std::string session = slurp(session_file).substr(0, slurp(session_file).find(' '));
    // Both audit lines are written once the session is closed; wait for the session's own line.
    const auto audit_of = [&](const std::string& operation) {
        std::istringstream in(slurp(server().log_path()));
        for (std::string line; std::getline(in, line);)
            if (line.find("session=" + session) != std::string::npos && line.find("operation=" + operation) != std::string::npos &&
                line.find("znode=" + node + "\t") != std::string::npos)
                return line;
        return std::string();
    };
    const auto audit_lines = [&] {
        std::string out;
        std::istringstream in(slurp(server().log_path()));
        for (std::string line; std::getline(in, line);)
            if (line.find("AuditLogger") != std::string::npos && line.find("session=" + session) != std::string::npos)
                out += line + "\n";
        return out;
    };
    CHECK_MESSAGE(eventually([&] { return !audit_of("delete").empty(); }, 5s),
                  "no audit line for zklock deleting " << node << " (session " << session << "); audit lines:\n"
                                                       << audit_lines());
    CHECK(audit_of("delete").find("result=success") != std::string::npos);
    CHECK(audit_of("ephemeralZNodeDeletionOnSessionCloseOrExpire").empty());
}

// Issue 5 (the other half): a release that ZooKeeper refuses is reported, never swallowed: the
// lock path's ACL lets anyone create a child but nobody delete one.
TEST_CASE("a refused release is reported with exit 76; the session close still removes the node")
{
    const auto path = unique_path("norelease");
    zkcoro::client_config cfg;
    cfg.default_acl = {zkcoro::acl_entry{zkcoro::perm::all & ~zkcoro::perm::remove, "world", "anyone"}};
    with_zk([&](zkcoro::client& zk) { return create_all(zk, path); }, cfg);
    proc p;
    CHECK(run(zklock({"-c", connect()}, path, {"sh", "-c", "exit 3"}), 20s, &p) == 76);
    const auto err = slurp(p.err);
    CHECK(err.find("cannot release " + path) != std::string::npos);
    CHECK(err.find("ZNOAUTH") != std::string::npos);
    CHECK(err.find("exited with 3") != std::string::npos);
    CHECK(status_json(path)["participants"].empty());
}

// Issue 3: a lock node deleted by someone else (an operator "breaking" the lock) was never
// noticed. Needs the library's lost signal on deletion.
TEST_CASE("the lock node deleted by someone else: the lock is lost at once, exit 70")
{
    const auto path = unique_path("deleted");
    const auto events = file("events");
    const auto env = file("env");
    reaper r;
    auto cmd = child("del", 6000, events);
    cmd.insert(cmd.end(), {"--env-file", env});
    proc p = start(zklock({"-c", connect(), "-v"}, path, cmd));
    r.procs.push_back(&p);
    REQUIRE(started(events, "del"));
    const auto holders = status_json(path)["participants"];
    REQUIRE(holders.size() == 1);
    const std::string node = path + "/" + holders[0]["node"].get<std::string>();
    const auto t0 = clock_type::now();
    with_zk([&](zkcoro::client& zk) -> asio::awaitable<void> { co_await zk.async_remove(node); });
    CHECK(wait_for(p, 10s) == 70);
    const double took = seconds_since(t0);
    MESSAGE("zklock noticed the deletion and ended " << took << " s after the test connected to delete it");
    CHECK(took < zktest::relaxed(2.5));  // relaxed under the sanitizers (slack.hpp)
    CHECK(contains(events, fmt::format("del signal {}", SIGTERM)));
    CHECK(slurp(p.err).find("lock on " + path + " lost") != std::string::npos);
}

// Issue 6: a foreign child that sorts first blocks the lock; status, the waiting line (-v) and
// the JSON said nothing of it.
TEST_CASE("a foreign child that sorts first: status, -v and the timeout name it")
{
    const auto path = unique_path("foreign");
    with_zk([&](zkcoro::client& zk) { return create_all(zk, path + "/0", "by hand"); });
    proc p;
    CHECK(run(zklock({"-c", connect(), "-v", "-t", "2"}, path, {"true"}), 20s, &p) == 75);
    CHECK(slurp(p.err).find("foreign node 0 sorts first and blocks the lock") != std::string::npos);
    CHECK(slurp(p.err).find("0 ahead") == std::string::npos);

    auto j = status_json(path);
    INFO(j.dump(2));
    CHECK(j["recipe"] == "none");
    REQUIRE(j["participants"].size() == 1);
    CHECK(j["participants"][0]["node"] == "0");
    CHECK(j["participants"][0]["mode"] == "foreign");
    CHECK(j["participants"][0]["session"] == "0x0");
    REQUIRE(j.contains("notes"));
    REQUIRE(j["notes"].size() == 1);
    CHECK(j["notes"][0].get<std::string>().find("foreign node 0 sorts first") != std::string::npos);

    // With a waiter queued behind it: the waiter does not hold, the foreign node is first.
    const auto events = file("events");
    reaper r;
    proc w = start(zklock({"-c", connect(), "-t", "30", "--data", "waiter"}, path, child("w", 10, events)));
    r.procs.push_back(&w);
    REQUIRE(eventually([&] { return status_json(path)["participants"].size() == 2; }, 10s));
    j = status_json(path);
    CHECK(j["recipe"] == "mutex");
    CHECK(j["participants"][0]["node"] == "0");
    CHECK(j["participants"][1]["data"] == "waiter");
    CHECK(j["participants"][1]["holding"] == false);
    REQUIRE(j.contains("notes"));
    CHECK(j["notes"][0].get<std::string>().find("foreign node 0 sorts first and blocks the lock") != std::string::npos);
    proc text;
    CHECK(run({zklock_bin, "status", "-c", connect(), path}, 20s, &text) == 0);
    CHECK(slurp(text.out).find("foreign") != std::string::npos);
    CHECK(slurp(text.out).find("note: foreign node 0 sorts first") != std::string::npos);
    // The operator deletes it: the waiter gets the lock.
    with_zk([&](zkcoro::client& zk) -> asio::awaitable<void> { co_await zk.async_remove(path + "/0"); });
    CHECK(wait_for(w, 20s) == 0);
}

// Issue 11: a mutex and a semaphore on one path; status showed only the semaphore.
TEST_CASE("status shows a mutex and a semaphore on one path, and says they do not exclude each other")
{
    const auto path = unique_path("mixed");
    const auto events = file("events");
    reaper r;
    proc m = start(zklock({"-c", connect(), "--data", "the-mutex"}, path, child("m", 60000, events)));
    r.procs.push_back(&m);
    proc s = start(zklock({"-c", connect(), "--semaphore", "1", "--data", "the-lease"}, path, child("s", 60000, events)));
    r.procs.push_back(&s);
    REQUIRE(started(events, "m"));
    REQUIRE(started(events, "s"));
    const auto j = status_json(path);
    INFO(j.dump(2));
    CHECK(j["recipe"] == "mutex+semaphore");
    bool mutex_seen = false, lease_seen = false;
    for (const auto& e : j["participants"]) {
        mutex_seen = mutex_seen || (e.value("data", "") == "the-mutex" && e.value("recipe", "") == "mutex" &&
                                    e.value("holding", false));
        lease_seen = lease_seen || (e.value("data", "") == "the-lease" && e.value("recipe", "") == "semaphore" &&
                                    e.value("mode", "") == "lease");
    }
    CHECK(mutex_seen);
    CHECK(lease_seen);
    REQUIRE(j.contains("notes"));
    REQUIRE(!j["notes"].empty());
    CHECK(j["notes"].back().get<std::string>().find("do not exclude each other") != std::string::npos);
    for (proc* p : {&m, &s})
        ::kill(p->pid, SIGTERM);
    CHECK(wait_for(m, 10s) == 128 + SIGTERM);
    CHECK(wait_for(s, 10s) == 128 + SIGTERM);
}

// ZKLOCK_FENCING_TOKEN, ZKLOCK_NODE and ZKLOCK_SESSION_ID in the command's environment; -E.
TEST_CASE("the command gets the fencing token, node and session; -E sets the conflict status")
{
    const auto path = unique_path("env");
    std::int64_t last_token = 0;
    for (int i = 0; i < 2; ++i) {
        const auto env = file("env");
        const auto session_file = file("session");
        CHECK(run(zklock({"-c", connect(), "--session-file", session_file}, path, {child_bin, "--id", "e", "--env-file", env}),
                  20s) == 0);
        const auto vars = read_env_file(env);
        CHECK(vars.at("ZKLOCK_NODE").starts_with(path + "/_c_"));
        CHECK(vars.at("ZKLOCK_SESSION_ID") == slurp(session_file).substr(0, slurp(session_file).find(' ')));
        const std::int64_t token = std::stoll(vars.at("ZKLOCK_FENCING_TOKEN"));
        CHECK(token > last_token);  // strictly increasing per grant
        last_token = token;
    }
    const auto events = file("events");
    reaper r;
    proc holder = start(zklock({"-c", connect()}, path, child("h", 60000, events)));
    r.procs.push_back(&holder);
    REQUIRE(started(events, "h"));
    CHECK(run(zklock({"-c", connect(), "-n", "-E", "3"}, path, {"true"}), 10s) == 3);
    ::kill(holder.pid, SIGTERM);
    CHECK(wait_for(holder, 10s) == 128 + SIGTERM);
}

// Issue 9: credentials (--auth-file, $ZK_AUTH), --acl creator, and ZNOAUTH messages that name
// the path and the fix.
TEST_CASE("ACL-protected paths: ZNOAUTH names the path and the fix; --auth-file, ZK_AUTH, --acl creator")
{
    const auto path = unique_path("acl");
    zkcoro::client_config owner;
    owner.auth = {{"digest", "alice:wonderland"}};
    owner.default_acl = zkcoro::creator_all_acl();
    with_zk([&](zkcoro::client& zk) { return create_all(zk, path); }, owner);

    proc p;
    CHECK(run(zklock({"-c", connect()}, path, {"true"}), 20s, &p) == 76);
    CHECK(slurp(p.err).find("cannot acquire " + path) != std::string::npos);
    CHECK(slurp(p.err).find("ZNOAUTH") != std::string::npos);
    CHECK(slurp(p.err).find("--auth-file FILE or ZK_AUTH") != std::string::npos);
    CHECK(run({zklock_bin, "status", "-c", connect(), path}, 20s, &p) == 76);
    CHECK(slurp(p.err).find(path) != std::string::npos);
    CHECK(slurp(p.err).find("--auth-file FILE or ZK_AUTH") != std::string::npos);

    const auto auth = file("auth");
    std::ofstream(auth) << "digest:alice:wonderland\n";
    CHECK(run(zklock({"-c", connect(), "--auth-file", auth}, path, {"true"}), 20s, &p) == 0);
    CHECK(run({zklock_bin, "status", "-c", connect(), "--auth-file", auth, path}, 20s, &p) == 0);
    ::setenv("ZK_AUTH", "digest:alice:wonderland", 1);
    const int with_env = run(zklock({"-c", connect()}, path, {"true"}), 20s, &p);
    ::setenv("ZK_AUTH", "digest:mallory:guess", 1);
    const int wrong = run(zklock({"-c", connect()}, path, {"true"}), 20s, &p);
    ::unsetenv("ZK_AUTH");
    CHECK(with_env == 0);
    CHECK(wrong == 76);
    CHECK(slurp(p.err).find("does not allow the credentials given") != std::string::npos);

    // --acl creator: the lock's parent (created by zklock) is alice's alone.
    const auto own = unique_path("acl-creator");
    const auto events = file("events");
    reaper r;
    proc holder = start(zklock({"-c", connect(), "--auth-file", auth, "--acl", "creator"}, own, child("c", 60000, events)));
    r.procs.push_back(&holder);
    REQUIRE(started(events, "c"));
    CHECK(run(zklock({"-c", connect(), "-n"}, own, {"true"}), 20s, &p) == 76);
    CHECK(slurp(p.err).find("ZNOAUTH") != std::string::npos);
    CHECK(run(zklock({"-c", connect(), "-n", "--auth-file", auth}, own, {"true"}), 20s, &p) == 75);
    ::kill(holder.pid, SIGTERM);
    CHECK(wait_for(holder, 10s) == 128 + SIGTERM);
}

// Issues 7 and 8: an unresolvable host and a missing chroot are "unavailable" (69) with a message
// that names them, not a usage error. Needs the library's name_resolution_failed and
// chroot_not_found.
TEST_CASE("unresolvable host, bracketed IPv6, missing chroot: exit 69 naming the problem")
{
    const auto path = unique_path("connect");
    proc p;
    // The name lookup runs in a network namespace of its own (util-linux unshare; needs root):
    // no resolver is reachable there, so it fails at once and no query leaves the machine.
    if (::geteuid() == 0) {
        auto isolated = [](std::vector<std::string> argv) {
            argv.insert(argv.begin(), {"/usr/bin/unshare", "--net", "--"});
            return argv;
        };
        CHECK(run(isolated(zklock({"-c", "no-such-host.invalid:2181", "-t", "5"}, path, {"true"})), 20s, &p) == 69);
        CHECK(slurp(p.err).find("resolve") != std::string::npos);
        CHECK(slurp(p.err).find("no-such-host.invalid") != std::string::npos);
        CHECK(run(isolated({zklock_bin, "status", "-c", "no-such-host.invalid:2181", path}), 30s, &p) == 69);
        CHECK(slurp(p.err).find("resolve") != std::string::npos);
    } else {
        // The program exits 77 (skipped_cases.hpp) once the rest passed.
        ZKTEST_SKIP_CASE("name resolution cases: they need root for a network namespace");
    }

    // Nothing listens on [::1] (the server is IPv4 only): a connect failure, not a usage error.
    CHECK(run(zklock({"-c", fmt::format("[::1]:{}", zktest::free_loopback_port()), "-t", "1"}, path, {"true"}), 20s, &p) ==
          69);
    CHECK(slurp(p.err).find("invalid connect string") == std::string::npos);

    const auto chroot = fmt::format("/nochroot-{}", ::getpid());
    CHECK(run(zklock({"-c", connect() + chroot}, path, {"true"}), 20s, &p) == 69);
    CHECK(slurp(p.err).find(chroot) != std::string::npos);
    CHECK(slurp(p.err).find("does not exist") != std::string::npos);
}

// Issue 11: raw control characters in --data reach no terminal: status escapes them (the JSON
// escapes them its own way).
TEST_CASE("control characters in node data are escaped by status")
{
    const auto path = unique_path("escape");
    const auto events = file("events");
    reaper r;
    proc h = start(zklock({"-c", connect(), "--data", "evil\x1b]0;owned\x07\n"}, path, child("x", 60000, events)));
    r.procs.push_back(&h);
    REQUIRE(started(events, "x"));
    proc text;
    CHECK(run({zklock_bin, "status", "-c", connect(), path}, 20s, &text) == 0);
    const auto out = slurp(text.out);
    CHECK(out.find("evil\\x1b]0;owned\\x07\\n") != std::string::npos);
    CHECK(out.find('\x1b') == std::string::npos);
    CHECK(out.find('\x07') == std::string::npos);
    CHECK(status_json(path)["participants"][0]["data"] == "evil\x1b]0;owned\x07\n");
    ::kill(h.pid, SIGTERM);
    CHECK(wait_for(h, 10s) == 128 + SIGTERM);
}

// Issue 32 item 9: `status -r /` scans the whole tree (it was refused: "the root cannot be a
// lock"); the root is still refused as a lock to take.
TEST_CASE("status -r / lists the locks of the whole tree; / is still no lock to take")
{
    const auto path = unique_path("rootscan");
    const auto events = file("events");
    reaper r;
    proc h = start(zklock({"-c", connect()}, path, child("root-holder", 60000, events)));
    r.procs.push_back(&h);
    REQUIRE(started(events, "root-holder"));
    proc s;
    CHECK(run({zklock_bin, "status", "-r", "--json", "-c", connect(), "/"}, 30s, &s) == 0);
    const auto j = nlohmann::json::parse(slurp(s.out));
    bool found = false;
    for (const auto& l : j["locks"])
        found = found || (l["path"] == path && l["holders"].size() == 1);
    CHECK_MESSAGE(found, "status -r / did not list " << path << ": " << slurp(s.out) << slurp(s.err));
    proc bad;
    CHECK(run({zklock_bin, "-c", connect(), "/", "--", "true"}, 20s, &bad) == 64);
    CHECK(slurp(bad.err).find("the root cannot be a lock") != std::string::npos);
    ::kill(h.pid, SIGTERM);
    CHECK(wait_for(h, 20s) != 0);
}

// Issue 32 item 12: `zklock /A -- zklock /B ...` beside `zklock /B -- zklock /A ...` is a real
// deadlock: the inner zklock records its parent's session ($ZKLOCK_SESSION_ID) in its node's data,
// and the wait-for graph adds the parent's edge. --cycles said "no wait-for cycle".
TEST_CASE("nested zklocks taken in two orders: status -r --cycles names the deadlock")
{
    const auto root = unique_path("nested");
    const auto a = root + "/A", b = root + "/B";
    const auto go = file("go");
    // Each outer zklock holds its lock, waits for `go` (at most 30 s), then takes the other one.
    auto outer = [&](const std::string& first, const std::string& second) {
        return zklock({"-c", connect()}, first,
                      {"sh", "-c",
                       fmt::format("for i in $(seq 600); do [ -e '{}' ] && break; sleep 0.05; done; "
                                   "exec '{}' -c '{}' -t 20 '{}' -- true",
                                   go, zklock_bin, connect(), second)});
    };
    proc p1, p2;  // before the reaper, which must go first
    reaper r;
    p1 = start(outer(a, b));
    r.procs.push_back(&p1);
    p2 = start(outer(b, a));
    r.procs.push_back(&p2);
    REQUIRE(eventually([&] {
        return status_json(a)["participants"].size() == 1 && status_json(b)["participants"].size() == 1;
    }, 20s));
    { std::ofstream(go).put('\n'); }
    std::string out;
    const bool found = eventually([&] {
        proc s;
        const int rc = run({zklock_bin, "status", "-r", "--cycles", "-c", connect(), root}, 20s, &s);
        out = slurp(s.out);
        return rc == 1;
    }, 20s);
    CHECK_MESSAGE(found, "no cycle reported: " << out);
    CHECK(out.find("deadlock candidate") != std::string::npos);
    ::kill(p1.pid, SIGTERM);
    ::kill(p2.pid, SIGTERM);
    CHECK(wait_for(p1, 30s) != 0);
    CHECK(wait_for(p2, 30s) != 0);
}

// Issue 32 item 13: --help says what -c takes (Sentinel, an ACL user), what exit 69 covers on
// Redis, status -r --cycles' exit 1, status -r's --auth-file, and what revoke does to a holder
// that is not revocable.
TEST_CASE("--help: the Redis URL forms, exit 69 on Redis, status -r's exit 1 and --auth-file, revoke's overwrite")
{
    proc h;
    REQUIRE(run({zklock_bin, "--help"}, 10s, &h) == 0);
    const std::string help = slurp(h.out);
    CHECK(help.find("redis://[[USER]:PASSWORD@]HOST:PORT[/DB]") != std::string::npos);
    CHECK(help.find("redis+sentinel://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT...]/MASTER[/DB]") != std::string::npos);
    const auto e69 = help.find("69  EX_UNAVAILABLE");
    const auto e70 = help.find("70  EX_SOFTWARE");
    REQUIRE(e69 != std::string::npos);
    REQUIRE(e70 != std::string::npos);
    const std::string line69 = help.substr(e69, e70 - e69);
    CHECK(line69.find("Sentinel") != std::string::npos);
    CHECK(line69.find("WAIT") != std::string::npos);
    CHECK(help.find("status -r --cycles: 1 when sessions wait for each other") != std::string::npos);
    const auto syn = help.find("zklock status -r ");
    REQUIRE(syn != std::string::npos);
    CHECK(help.substr(syn, help.find('\n', syn) - syn).find("[--auth-file FILE]") != std::string::npos);
    CHECK(help.find("holder data, is overwritten, as Curator's Revoker does") != std::string::npos);
    REQUIRE(run({zklock_bin, "revoke", "--help"}, 10s, &h) == 0);
    CHECK(slurp(h.out).find("holder data overwritten") != std::string::npos);
}

// Issue 32 item 13: a positive duration too small to tell from 0 (1e-400 underflows to 0) is
// refused, naming the text given; --data and --session-timeout, which a Redis lock has no use for,
// are refused on Redis; a database above 15 is the server's to refuse (here: no server, 69).
TEST_CASE("underflowing durations, --data and --session-timeout on Redis, databases above 15")
{
    const std::vector<bad_usage> cases = {
        {{"--kill-after", "1e-400", "/x", "--", "true"}, "--kill-after: needs a number of seconds from 0 to 86400, got '1e-400' (too small"},
        {{"--kill-after", "1e-320", "/x", "--", "true"}, "got '1e-320' (too small"},
        {{"-t", "1e-400", "/x", "--", "true"}, "--timeout: needs a number of seconds from 0 to 1000000000, got '1e-400' (too small"},
        {{"-c", "redis://127.0.0.1:1", "--ttl", "1e-400", "k", "--", "true"}, "got '1e-400' (too small"},
        {{"status", "-r", "--older-than", "1e-400s", "/"}, "--older-than '1e-400s': too small to tell from 0"},
        {{"status", "-r", "--older-than", "1e-320ms", "/"}, "--older-than '1e-320ms': too small to tell from 0"},
        {{"status", "-r", "--older-than", "1e400s", "/"}, "--older-than '1e400s': too large"},
        {{"-c", "redis://127.0.0.1:1", "--data", "x", "k", "--", "true"}, "--data is stored in a ZooKeeper lock node"},
        {{"-c", "redis://127.0.0.1:1", "--session-timeout", "500", "k", "--", "true"}, "use --ttl"},
        {{"-c", "redis://127.0.0.1:1/x", "k", "--", "true"}, "the database 'x' is not a whole number from 0 to 2147483647"},
        {{"-c", "redis://127.0.0.1:1/2147483648", "k", "--", "true"}, "the database '2147483648' is not"},
        {{"-c", "redis://127.0.0.1:1/-1", "k", "--", "true"}, "the database '-1' is not"},
    };
    check_bad_usage(cases, "--kill-after 0:");
    // 0 itself is still 0 (-t 0: one try), and a database above 15 goes to the server.
    proc p;
    CHECK(run({zklock_bin, "-c", "redis://127.0.0.1:1/16", "k", "--", "true"}, 20s, &p) == 69);
    CHECK(slurp(p.err).find("Connection refused") != std::string::npos);
    CHECK(run({zklock_bin, "-c", "redis://127.0.0.1:1/99", "-t", "0", "k", "--", "true"}, 20s, &p) == 69);
}

// Issue 32 item 13: revoke on a path the user may not list says "listing PATH" once.
TEST_CASE("revoke on a path without READ permission: one 'listing PATH', exit 76")
{
    const auto path = unique_path("revoke-noread");
    zkcoro::client_config owner;
    owner.auth = {{"digest", "alice:wonderland"}};
    owner.default_acl = zkcoro::creator_all_acl();
    with_zk([&](zkcoro::client& zk) { return create_all(zk, path); }, owner);
    proc p;
    CHECK(run({zklock_bin, "revoke", "-c", connect(), path}, 20s, &p) == 76);
    const std::string err = slurp(p.err);
    CAPTURE(err);
    const auto first = err.find("listing " + path);
    REQUIRE(first != std::string::npos);
    CHECK(err.find("listing " + path, first + 1) == std::string::npos);
    CHECK(err.find("ZNOAUTH") != std::string::npos);
    CHECK(err.find("--auth-file FILE or ZK_AUTH") != std::string::npos);
}

// Issue 32 item 13, what the docs now say: revoke of a holder that is not revocable writes
// __REVOKE__ over its holder data (as Curator's Revoker does); the holder keeps the lock.
TEST_CASE("revoke of a holder that is not revocable: its data overwritten, the lock still held")
{
    const auto path = unique_path("revoke-plain");
    const auto events = file("events");
    reaper r;
    proc holder = start(zklock({"-c", connect(), "--data", "mine"}, path, child("plain", 60000, events)));
    r.procs.push_back(&holder);
    REQUIRE(started(events, "plain"));
    CHECK(status_json(path)["participants"][0]["data"] == "mine");
    proc p;
    CHECK(run({zklock_bin, "revoke", "-c", connect(), path}, 20s, &p) == 0);
    const auto j = status_json(path);
    INFO(j.dump(2));
    REQUIRE(j["participants"].size() == 1);
    CHECK(j["participants"][0]["data"] == "__REVOKE__");
    CHECK(j["participants"][0]["holding"] == true);
    CHECK(alive(holder.pid));
    ::kill(holder.pid, SIGTERM);
    CHECK(wait_for(holder, 10s) == 128 + SIGTERM);
}

// Issue 39: -t bounds the whole wait, the first connection included: a ZooKeeper that comes up
// 3 s after zklock started is waited for (the first connection waited 10 s at most, whatever -t
// said: -t 20 against a server started 12 s later failed); -n tries once (2 s at most) against a
// stopped server. A server of its own, stopped and started again on the same port.
TEST_CASE("-t 20 waits for a ZooKeeper started later; -n against a stopped one fails at once (issue 39)")
{
    zktest::zk_server srv;
    const std::string cs = srv.connect_string();
    srv.stop();
    {
        proc p;
        const auto t0 = clock_type::now();
        const int rc = run({zklock_bin, "-c", cs, "-n", "/i39-first", "--", "true"}, 20s, &p);
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t0).count();
        MESSAGE("-n, server stopped: exit " << rc << " after " << ms << " ms: " << slurp(p.err));
        CHECK(rc == 69);
        CHECK(ms < 3500);
    }
    auto p = start({zklock_bin, "-c", cs, "-t", "20", "/i39-first", "--", "sh", "-c", "echo $ZKLOCK_FENCING_TOKEN"});
    // The scenario: zklock waits from the start; the server comes up 11 s later, past the 10 s
    // the first connection used to be given.
    std::this_thread::sleep_for(11s);
    srv.restart();
    const int rc = wait_for(p, 30s);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - p.started).count();
    MESSAGE("-t 20, server started 11 s later: exit " << rc << " after " << ms << " ms: " << slurp(p.err));
    CHECK(rc == 0);
    CHECK(ms < 20000);
    CHECK_FALSE(slurp(p.out).empty());
}
