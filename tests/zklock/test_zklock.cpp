// Integration tests of the zklock tool against a real ZooKeeper (the zktest harness starts one;
// tick 200 ms, so sessions last 0.4-4 s). Every process is started here, waited for with a
// bound, and ended by PID only. The children are zklock-test-child (monotonic hold logs in
// interval-check's format, signal records).
#include <zk_server.hpp>
#include <tcp_proxy.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

const std::string zklock_bin = ZKLOCK_BIN;
const std::string child_bin = ZKLOCK_TEST_CHILD_BIN;
const std::string interval_check_bin = INTERVAL_CHECK_BIN;
const std::string curator_build_sh = CURATOR_BUILD_SH;

zktest::zk_server& server()
{
    static zktest::zk_server s;
    return s;
}

std::string connect() { return server().connect_string(); }

const std::string& work_dir()
{
    static std::string dir = [] {
        std::string t = fmt::format("{}/zklock-test.XXXXXX", std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp");
        if (::mkdtemp(t.data()) == nullptr)
            throw std::runtime_error("mkdtemp failed");
        return t;
    }();
    return dir;
}

std::string unique_path(std::string_view name)
{
    static int n = 0;
    return fmt::format("/zklock-test-{}-{}/{}", ::getpid(), ++n, name);
}

std::string file(std::string_view name)
{
    static int n = 0;
    return fmt::format("{}/{}-{}", work_dir(), ++n, name);
}

std::string slurp(const std::string& path)
{
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

struct proc {
    pid_t pid = -1;
    std::string out, err;
    int status = -1;  // exit code, 128+N for a signal; -1 while running
    clock_type::time_point started;
};

// Starts argv with stdout/stderr in files, stdin from /dev/null.
proc start(std::vector<std::string> argv)
{
    proc p;
    p.out = file("out");
    p.err = file("err");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, p.out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, p.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<char*> args;
    for (auto& a : argv)
        args.push_back(a.data());
    args.push_back(nullptr);
    p.started = clock_type::now();
    const int rc = posix_spawn(&p.pid, args[0], &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    REQUIRE_MESSAGE(rc == 0, "cannot start " << argv[0] << ": " << std::strerror(rc));
    return p;
}

// Waits at most `limit` for p to end; on timeout kills it (SIGKILL, by PID) and fails.
int wait_for(proc& p, clock_type::duration limit)
{
    if (p.status >= 0)
        return p.status;
    const auto deadline = clock_type::now() + limit;
    int st = 0;
    for (;;) {
        const pid_t r = ::waitpid(p.pid, &st, WNOHANG);
        if (r == p.pid)
            break;
        if (clock_type::now() >= deadline) {
            ::kill(p.pid, SIGKILL);
            ::waitpid(p.pid, &st, 0);
            FAIL_CHECK("process " << p.pid << " did not end in time; stderr: " << slurp(p.err));
            p.status = 999;
            return p.status;
        }
        std::this_thread::sleep_for(10ms);
    }
    p.status = WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
    return p.status;
}

double seconds_since(clock_type::time_point t)
{
    return std::chrono::duration<double>(clock_type::now() - t).count();
}

// Ends (SIGKILL) a process still running at the end of a test: only ones started here.
struct reaper {
    std::vector<proc*> procs;
    ~reaper()
    {
        for (auto* p : procs)
            if (p->status < 0) {
                ::kill(p->pid, SIGKILL);
                int st = 0;
                ::waitpid(p->pid, &st, 0);
                p->status = 998;
            }
    }
};

std::vector<std::string> zklock(std::vector<std::string> opts, const std::string& path, std::vector<std::string> cmd)
{
    std::vector<std::string> argv{zklock_bin};
    argv.insert(argv.end(), opts.begin(), opts.end());
    argv.push_back(path);
    argv.emplace_back("--");
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    return argv;
}

std::vector<std::string> child(const std::string& id, long sleep_ms, const std::string& events,
                               const std::string& log = "", const std::string& mode = "X")
{
    std::vector<std::string> v{child_bin, "--id", id, "--sleep-ms", std::to_string(sleep_ms), "--events", events, "--mode", mode};
    if (!log.empty()) {
        v.emplace_back("--log");
        v.push_back(log);
    }
    return v;
}

// Polls until `pred()` or `limit`; returns pred's last value.
template <class Pred>
bool eventually(Pred pred, clock_type::duration limit)
{
    const auto deadline = clock_type::now() + limit;
    for (;;) {
        if (pred())
            return true;
        if (clock_type::now() >= deadline)
            return false;
        std::this_thread::sleep_for(20ms);
    }
}

bool contains(const std::string& file_name, const std::string& text)
{
    return slurp(file_name).find(text) != std::string::npos;
}

// The child's "start" line appeared: the lock is held and the command runs.
bool started(const std::string& events, const std::string& id)
{
    return eventually([&] { return contains(events, id + " start "); }, 20s);
}

int run(std::vector<std::string> argv, clock_type::duration limit, proc* out = nullptr)
{
    proc p = start(std::move(argv));
    const int rc = wait_for(p, limit);
    if (out != nullptr)
        *out = p;
    return rc;
}

nlohmann::json status_json(const std::string& path)
{
    proc p;
    const int rc = run({zklock_bin, "status", "--json", "-c", connect(), path}, 20s, &p);
    REQUIRE_MESSAGE(rc == 0, "zklock status failed: " << slurp(p.err));
    return nlohmann::json::parse(slurp(p.out));
}

}  // namespace

TEST_CASE("bad usage exits 64 and names the problem")
{
    struct bad {
        std::vector<std::string> args;
        std::string says;
    };
    const std::vector<bad> cases = {
        {{}, "LOCKPATH is required"},
        {{"/x"}, "COMMAND is missing"},
        {{"/x", "--"}, "COMMAND is missing"},
        {{"relative", "--", "true"}, "must start with '/'"},
        {{"/a//b", "--", "true"}, "empty node name"},
        {{"--bogus", "/x", "--", "true"}, "--bogus"},
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
    };
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
    }
    proc h;
    CHECK(run({zklock_bin, "--help"}, 10s, &h) == 0);
    const std::string help = slurp(h.out);
    for (const char* code : {"64", "69", "70", "75", "76", "126", "127", "128+N"})
        CHECK(help.find(code) != std::string::npos);
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

TEST_CASE("zklock runs never overlap: mutex, read-write, semaphore (interval-check)")
{
    struct scenario {
        std::string name;
        std::vector<std::pair<std::vector<std::string>, std::string>> kinds;  // options, log mode
        int max_leases;
    };
    const std::vector<scenario> scenarios = {
        {"mutex", {{{}, "X"}}, 1},
        {"rw", {{{"-s"}, "R"}, {{"-w"}, "W"}}, 1},
        {"semaphore", {{{"--semaphore", "2"}, "S"}}, 2},
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
            procs.push_back(start(zklock(opts, path, child(id, 60, events, log, kind.second))));
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
        MESSAGE(sc.name << ": " << slurp(check.out).substr(0, slurp(check.out).find('\n')));
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
    CHECK(took < 10.0);
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
    // A signal while waiting ends the wait (128+N) and leaves no node behind.
    const auto path = unique_path("signal-waiting");
    const auto events = file("events");
    reaper r;
    proc holder = start(zklock({"-c", connect()}, path, child("h", 60000, events)));
    r.procs.push_back(&holder);
    REQUIRE(started(events, "h"));
    proc waiter = start(zklock({"-c", connect()}, path, {"true"}));
    r.procs.push_back(&waiter);
    REQUIRE(eventually([&] { return status_json(path)["participants"].size() == 2; }, 10s));
    ::kill(waiter.pid, SIGTERM);
    CHECK(wait_for(waiter, 10s) == 128 + SIGTERM);
    CHECK(status_json(path)["participants"].size() == 1);
    ::kill(holder.pid, SIGTERM);
    CHECK(wait_for(holder, 10s) == 128 + SIGTERM);
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
    CHECK(took < 10.0);
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
