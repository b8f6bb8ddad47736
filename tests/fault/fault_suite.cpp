// fault-suite: lock holders of three kinds under real faults, checked for mutual exclusion,
// orphan nodes, false losses and stale writes.
//
//   fault-suite --build-root BUILD --source-root SOURCE [--only NAME[,NAME...]] [--keep]
//               [--freeze-runs N]
//
// One 3-node ZooKeeper ensemble (tools/zkserver) serves every scenario. Each scenario runs, on a
// lock path of its own, a zkcoro library holder (tests/interop/zkcoro-holder, two tasks), a
// Curator holder (tests/interop/CuratorHolder.java) and a zklock holder (a loop of
// `zklock -- fault-child`), plus the scenario's own holder, then injects its fault:
//
//   baseline       no fault: the checks on a quiet run.
//   leader-kill    kill -9 of the leader while a zkcoro holder holds, then its restart.
//   follower-stop  SIGSTOP of the follower a holder is connected to, past the session timeout,
//                  then SIGCONT.
//   partition      a zkcoro holder in a network namespace of ours, reaching the servers through a
//                  relay in a second namespace (tests/fault/netns.hpp), is cut off by setting the
//                  far end of the veth down while it holds, past the session timeout; then healed.
//   follower-stop-twice    one zkcoro holder on the two followers through two follower stops in
//                  a row (the member it moved to is stopped next); -4: the same with two more
//                  connect-string entries where nothing listens (4 entries: ZOOKEEPER-2466).
//   follower-freeze  SIGSTOP of the follower a zkcoro holder with a 10 s session is on: it must
//                  move in about 1/3 of the session (its own ping), N runs (--freeze-runs, 3).
//   frozen         a zkcoro holder stops itself (SIGSTOP) between its lock check and its write,
//                  the worst moment; the suite resumes it (SIGCONT) once its session has expired
//                  and another holder has written a higher token.
//
// Every holder logs its holds (interval-check's format) and its events (session, expired,
// enter, lost, write, exit) and writes its fencing token at the end of each hold to a fence store
// that refuses tokens lower than the highest it has seen (tests/support/fence_store.hpp), and to
// a control store without that check. The checks:
//   overlaps      interval pairs that overlap: 0, except under the frozen holder, where they must
//                 all involve it;
//   orphans       lock nodes left under the path once every holder has ended: 0;
//   false losses  "lost" reports (zklock: exit 70) by holders whose session the fault was not
//                 meant to end: 0; and their sessions must not have expired;
//   stale writes  writes accepted by the fence store with a token lower than one it accepted
//                 before: 0; the control store must show the frozen holder's stale write getting
//                 through (the check can fail).
// Session timeout 12 s (servers: tick 200 ms, maxSessionTimeout 12 s), long enough for the
// ensemble faults, which the sessions must survive.
//
// The last line is the summary; the exit status is 0 only if every check passed (1 otherwise,
// 2 on bad usage or when the suite cannot set up). Every wait is bounded; only processes this
// program started are ended, by PID; the namespaces are deleted on every exit path (and those of
// an earlier run killed by SIGKILL are deleted at the next start).
//
// Why C++ rather than a bash script over zkcoro-with-server: the scenarios need the ensemble's
// members by index (kill -9 the leader, pause the follower a given client is on, restart), the
// relay's listening sockets must be created with setns(2), and the suite waits on events
// (inotify on the event log, pidfds for exits), none of which a shell does well.
#include "fence_store.hpp"
#include "interval_checker.hpp"
#include "netns.hpp"
#include "process.hpp"

#include <zk_server.hpp>
#include <zkcoro/client.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using ms = std::chrono::milliseconds;

// Session timeout of every holder, and the servers' limits that allow it.
constexpr int session_timeout_ms = 12000;
constexpr int tick_ms = 200;
constexpr int hold_ms = 30;
// Upper bound of every holder's run; the suite ends them earlier with the stop file.
constexpr int holder_duration_ms = 240000;

// A check that failed: the scenario goes on to its cleanup and is reported failed.
struct scenario_failure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

std::int64_t monotonic_ns()
{
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void append_line(const std::string& file, const std::string& line)
{
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        throw std::runtime_error(fmt::format("cannot open {}: {}", file, std::strerror(errno)));
    [[maybe_unused]] auto n = ::write(fd, line.data(), line.size());
    ::close(fd);
}

void log(const std::string& s)
{
    fmt::print("{}\n", s);
    std::fflush(stdout);
}

// ---------------------------------------------------------------------------------------------
// The event log: one file per scenario that every holder appends to, read as it grows.

struct event {
    std::int64_t t = 0;
    std::string id;  // as logged: "zk.1" for task 1 of holder "zk"
    std::string kind;
    std::vector<std::string> args;

    std::string holder() const { return id.substr(0, id.find('.')); }
    std::string arg(std::size_t i) const { return i < args.size() ? args[i] : std::string{}; }
    std::int64_t num(std::size_t i) const { return std::atoll(arg(i).c_str()); }
};

class event_log {
public:
    explicit event_log(std::string path) : path_(std::move(path))
    {
        append_line(path_, "");  // exists before it is watched
        fd_ = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        if (fd_ < 0 || ::inotify_add_watch(fd_, path_.c_str(), IN_MODIFY) < 0)
            throw std::runtime_error(fmt::format("inotify on {}: {}", path_, std::strerror(errno)));
    }
    ~event_log() { ::close(fd_); }
    event_log(const event_log&) = delete;
    event_log& operator=(const event_log&) = delete;

    const std::string& path() const { return path_; }

    // Every event so far.
    const std::vector<event>& all()
    {
        read_new();
        return events_;
    }

    // Waits (woken by inotify, at most `timeout`) for the first event that satisfies pred;
    // throws scenario_failure naming `what` on timeout.
    event wait_for(const std::function<bool(const event&)>& pred, ms timeout, const std::string& what)
    {
        const auto deadline = steady::now() + timeout;
        std::size_t checked = 0;
        for (;;) {
            read_new();
            for (; checked < events_.size(); ++checked)
                if (pred(events_[checked]))
                    return events_[checked];
            const auto left = std::chrono::duration_cast<ms>(deadline - steady::now()).count();
            if (left <= 0)
                throw scenario_failure(fmt::format("timed out after {} ms waiting for {}", timeout.count(), what));
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, static_cast<int>(left)) > 0) {
                char buf[4096];
                while (::read(fd_, buf, sizeof buf) > 0) {
                }
            }
        }
    }

private:
    void read_new()
    {
        std::ifstream in(path_);
        in.seekg(static_cast<std::streamoff>(offset_));
        std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        offset_ += chunk.size();
        partial_ += chunk;
        std::size_t pos = 0;
        for (;;) {
            const auto nl = partial_.find('\n', pos);
            if (nl == std::string::npos)
                break;
            std::istringstream line(partial_.substr(pos, nl - pos));
            pos = nl + 1;
            event e;
            if (!(line >> e.t >> e.id >> e.kind))
                continue;
            std::string a;
            while (line >> a)
                e.args.push_back(a);
            events_.push_back(std::move(e));
        }
        partial_.erase(0, pos);
    }

    std::string path_;
    int fd_ = -1;
    std::size_t offset_ = 0;
    std::string partial_;
    std::vector<event> events_;
};

// ---------------------------------------------------------------------------------------------
// Programs and settings shared by the scenarios.

struct suite_env {
    std::string holder;      // zkcoro-holder
    std::string zklock;      // zklock
    std::string child;       // fault-child
    std::string fence_tool;  // fault-fence
    std::string java = "java";
    std::string classpath;   // CuratorHolder's
    std::string work;        // temp dir
    std::string run_id;
    zktest::zk_ensemble* ensemble = nullptr;
};

// Lock nodes under path (0 when the path is gone), from a client of our own; nullopt on error.
// `names`: each node left, with the session that owns it ("name (owner 0x...)").
std::optional<std::size_t> count_children(const std::string& connect, const std::string& path, std::string& error,
                                          std::vector<std::string>* names = nullptr)
{
    asio::io_context ioc;
    zkcoro::client_config cfg;
    cfg.connect_string = connect;
    cfg.session_timeout = ms(session_timeout_ms);
    cfg.connect_timeout = 20s;
    zkcoro::client c(ioc.get_executor(), cfg);
    std::optional<std::size_t> n;
    asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
        auto [cec] = co_await c.async_connect(asio::as_tuple(asio::use_awaitable));
        if (cec) {
            error = cec.message();
            co_return;
        }
        auto [ec, r] = co_await c.async_get_children(path, asio::as_tuple(asio::use_awaitable));
        for (const auto& child : ec || names == nullptr ? std::vector<std::string>{} : r.children) {
            auto [dec, d] = co_await c.async_get_data(path + "/" + child, asio::as_tuple(asio::use_awaitable));
            names->push_back(dec ? fmt::format("{} ({})", child, dec.message())
                                 : fmt::format("{} (owner 0x{:x})", child, d.stat.ephemeral_owner));
        }
        if (!ec)
            n = r.children.size();
        else if (ec == zkcoro::zk_errc::no_node)  // the container is gone too
            n = 0;
        else
            error = ec.message();
        auto [xec] = co_await c.async_close(asio::as_tuple(asio::use_awaitable));
        (void)xec;
    }, asio::detached);
    ioc.run_for(40s);
    if (!n && error.empty())
        error = "no answer within 40 s";
    return n;
}

// Waits (children watch, bounded) until `path` has no child left; returns how long it took, or
// nullopt at the limit. A holder that gave up while its member was frozen could not close its
// session: its node goes when the server expires that session (at most a session timeout).
std::optional<ms> wait_path_empty(const std::string& connect, const std::string& path, ms limit)
{
    asio::io_context ioc;
    zkcoro::client_config cfg;
    cfg.connect_string = connect;
    cfg.session_timeout = ms(session_timeout_ms);
    cfg.connect_timeout = 20s;
    zkcoro::client c(ioc.get_executor(), cfg);
    const auto t0 = steady::now();
    std::optional<ms> took;
    asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
        auto [cec] = co_await c.async_connect(asio::as_tuple(asio::use_awaitable));
        for (int round = 0; !cec && round < 1000; ++round) {
            auto [ec, r] = co_await c.async_get_children(path, zkcoro::leave_watch, asio::as_tuple(asio::use_awaitable));
            if (ec == zkcoro::zk_errc::no_node || (!ec && r.children.empty())) {
                took = std::chrono::duration_cast<ms>(steady::now() - t0);
                break;
            }
            if (ec)
                break;
            auto [wec, ev] = co_await r.watch.async_wait(asio::as_tuple(asio::use_awaitable));
            if (wec)
                break;
        }
        auto [xec] = co_await c.async_close(asio::as_tuple(asio::use_awaitable));
        (void)xec;
    }, asio::detached);
    ioc.run_for(limit);
    return took;
}

// ---------------------------------------------------------------------------------------------
// One scenario: its files, its holders, its checks.

struct holder_info {
    std::string id;
    std::string kind;  // zkcoro, curator, zklock
    pid_t pid = -1;    // -1 for the zklock loop (a thread)
    std::string out, err;
    int status = -1;
};

struct zklock_loop {
    std::string id;
    std::thread thread;
    std::map<int, int> exits;  // zklock exit status -> count
    std::atomic<pid_t> current{-1};
};

struct result {
    std::string name;
    bool ok = true;
    std::vector<std::string> failures;
    std::vector<std::string> notes;
    std::size_t holders = 0;
    std::size_t acquisitions = 0;
    std::size_t overlaps = 0;
    std::size_t orphans = 0;
    std::size_t false_losses = 0;
    std::size_t stale_writes = 0;
    std::size_t control_stale = 0;
    std::size_t rejected = 0;
    std::size_t tokenless = 0;  // zklock holds without ZKLOCK_FENCING_TOKEN
    double seconds = 0;
};

class scenario {
public:
    scenario(const suite_env& env, std::string name) : env_(env), name_(std::move(name))
    {
        dir_ = fmt::format("{}/{}", env_.work, name_);
        fs::create_directories(dir_);
        holds_ = dir_ + "/holds.log";
        store_ = dir_ + "/fence.store";
        control_ = dir_ + "/control.store";
        path_ = fmt::format("/zkcoro-fault/{}/{}", env_.run_id, name_);
        append_line(holds_, "");
        events_ = std::make_unique<event_log>(dir_ + "/events.log");
        started_ = steady::now();
    }
    ~scenario()
    {
        try {
            stop_all();
        } catch (const std::exception& e) {
            std::fprintf(stderr, "fault-suite: stopping %s: %s\n", name_.c_str(), e.what());
        }
    }
    scenario(const scenario&) = delete;
    scenario& operator=(const scenario&) = delete;

    const std::string& name() const { return name_; }
    const std::string& path() const { return path_; }
    event_log& events() { return *events_; }
    std::string connect() const { return env_.ensemble->connect_string(); }

    // A zkcoro-holder. ns: run it in that network namespace (`ip netns exec`).
    void start_zkcoro(const std::string& id, int tasks, const std::vector<std::string>& extra,
                      const std::string& connect_string, const std::string& ns = {})
    {
        std::vector<std::string> argv;
        if (!ns.empty())
            argv = {"ip", "netns", "exec", ns};
        for (const std::string& a :
             {env_.holder, std::string("--connect"), connect_string, std::string("--path"), path_,
              std::string("--id"), id, std::string("--tasks"), std::to_string(tasks)})
            argv.push_back(a);
        add_common(argv, id);
        argv.insert(argv.end(), extra.begin(), extra.end());
        launch(id, "zkcoro", argv);
    }

    void start_curator(const std::string& id, const std::vector<std::string>& extra = {},
                       const std::string& connect_string = {})
    {
        std::vector<std::string> argv = {env_.java, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
                                         "-Xshare:auto", "-XX:-UsePerfData", "-cp", env_.classpath, "CuratorHolder",
                                         "--connect", connect_string.empty() ? connect() : connect_string, "--path", path_, "--id", id, "--recipe", "mutex",
                                         "--fence-tool", env_.fence_tool,
                                         "--retry-ms", std::to_string(session_timeout_ms * 2)};
        add_common(argv, id);
        argv.insert(argv.end(), extra.begin(), extra.end());
        launch(id, "curator", argv);
    }

    // zklock run again and again until the stop file appears, each run holding once through
    // fault-child (the first run for first_hold_ms if given). Exit 70 (lock lost) is logged as a
    // "lost" event. ns: run zklock in that network namespace, with connect_string.
    void start_zklock(const std::string& id, const std::string& connect_string, const std::string& ns = {},
                      int first_hold_ms = -1)
    {
        auto loop = std::make_unique<zklock_loop>();
        loop->id = id;
        auto* l = loop.get();
        holders_.push_back({id, "zklock", -1, dir_ + "/" + id + ".out", dir_ + "/" + id + ".err"});
        const std::string out = holders_.back().out, err = holders_.back().err;
        std::vector<std::string> prefix;
        if (!ns.empty())
            prefix = {"ip", "netns", "exec", ns};
        auto command = [=, this](int hold) {
            std::vector<std::string> argv = prefix;
            for (const std::string& a :
                 {env_.zklock, std::string("-c"), connect_string, std::string("-t"), std::string("3"),
                  std::string("--session-timeout"), std::to_string(session_timeout_ms), path_, std::string("--"),
                  env_.child, std::string("--id"), id, std::string("--log"), holds_, std::string("--events"),
                  events_->path(), std::string("--hold-ms"), std::to_string(hold), std::string("--fence-store"),
                  store_, std::string("--control-store"), control_})
                argv.push_back(a);
            return argv;
        };
        const auto first_argv = command(first_hold_ms >= 0 ? first_hold_ms : hold_ms);
        const auto argv = command(hold_ms);
        const std::string events = events_->path();
        const std::string stop = stop_file(id);
        l->thread = std::thread([l, first_argv, argv, out, err, events, stop] {
            const auto deadline = steady::now() + ms(holder_duration_ms);
            bool held = false;
            for (int run = 0; run < 10000 && steady::now() < deadline; ++run) {
                struct stat st{};
                if (::stat(stop.c_str(), &st) == 0)
                    break;
                int status = 0;
                try {
                    // The long first hold lasts until a run has held (timeouts do not count).
                    const pid_t pid = zkfault::spawn(held ? argv : first_argv, out, err);
                    l->current = pid;
                    auto s = zkfault::wait_exit(pid, 60s);
                    status = s ? *s : zkfault::end_process(pid, 5s);
                    l->current = -1;
                } catch (const std::exception& e) {
                    append_line(err, fmt::format("fault-suite: {}\n", e.what()));
                    status = 127;
                }
                ++l->exits[status];
                held = held || status == 0 || status == 70 || status >= 128;
                if (status == 70)
                    append_line(events, fmt::format("{} {} lost -1 ?\n", monotonic_ns(), l->id));
                else if (status != 0 && status != 75)
                    append_line(events, fmt::format("{} {} error zklock-exit {}\n", monotonic_ns(), l->id, status));
                if (status != 0 && status != 75 && status != 70) {
                    // Could not connect or failed: do not spin; retry shortly.
                    std::this_thread::sleep_for(200ms);
                }
            }
        });
        loops_.push_back(std::move(loop));
    }

    pid_t pid_of(const std::string& id) const
    {
        for (const auto& h : holders_)
            if (h.id == id)
                return h.pid;
        return -1;
    }

    // Waits until every holder has connected (a "session" event) or, for zklock, entered once.
    void wait_all_ready(ms timeout)
    {
        for (const auto& h : holders_) {
            const std::string id = h.id;
            const std::string kind = h.kind == "zklock" ? "enter" : "session";
            events_->wait_for([&](const event& e) { return e.holder() == id && e.kind == kind; }, timeout,
                              fmt::format("{} ({}) to start ('{}' event); see {}", id, h.kind, kind, h.err));
        }
    }

    // Asks every holder to stop (their stop files), waits for each (bounded), joins the zklock
    // loops.
    void stop_all()
    {
        if (stopped_)
            return;
        stopped_ = true;
        for (const auto& h : holders_)
            append_line(stop_file(h.id), "stop\n");
        for (auto& h : holders_)
            wait_stopped(h);
    }

    // Stops one holder before the others (bounded, like stop_all).
    void stop_holder(const std::string& id)
    {
        for (auto& h : holders_)
            if (h.id == id) {
                append_line(stop_file(h.id), "stop\n");
                wait_stopped(h);
            }
    }

    // Everything after the run: the checks. victim: the holder the fault is meant to cost its
    // session ("" for none); frozen: its holds may overlap others.
    result finish(const std::string& victim, bool frozen)
    {
        stop_all();
        result r;
        r.name = name_;
        r.failures = failures_;
        r.holders = holders_.size();
        auto fail = [&](std::string s) { r.failures.push_back(std::move(s)); };

        // Holder exits.
        for (const auto& h : holders_) {
            if (h.kind == "zklock")
                continue;
            if (h.status != 0)
                fail(fmt::format("{} exited {}; see {}", h.id, h.status, h.err));
        }
        for (const auto& l : loops_) {
            std::string counts;
            for (const auto& [st, n] : l->exits)
                counts += fmt::format("{}exit {}: {}", counts.empty() ? "" : ", ", st, n);
            r.notes.push_back(fmt::format("{} runs: {}", l->id, counts));
            for (const auto& [st, n] : l->exits) {
                const std::string err = dir_ + "/" + l->id + ".err";
                if (st == 76) {
                    // zklock could not confirm its release (e.g. the reply was due from the member
                    // that was stopped): not an exclusion problem, the orphan check covers the node.
                    r.notes.push_back(fmt::format("{}: {} run(s) exited 76 (release not confirmed); see {}", l->id, n, err));
                } else if (st != 0 && st != 75 && st != 70 && st != 69) {
                    fail(fmt::format("zklock holder {} exited {} ({} times); see {}", l->id, st, n, err));
                }
            }
        }

        // Overlaps.
        std::vector<zktest::hold> holds;
        try {
            holds = zktest::read_holds({holds_});
        } catch (const std::exception& e) {
            fail(fmt::format("hold log: {}", e.what()));
        }
        r.acquisitions = holds.size();
        std::sort(holds.begin(), holds.end(), [](const auto& a, const auto& b) { return a.enter_ns < b.enter_ns; });
        std::size_t not_victim = 0;
        for (std::size_t i = 0; i < holds.size(); ++i)
            for (std::size_t j = i + 1; j < holds.size() && holds[j].enter_ns < holds[i].exit_ns; ++j) {
                if (std::min(holds[i].exit_ns, holds[j].exit_ns) <= holds[j].enter_ns)
                    continue;
                ++r.overlaps;
                const auto a = holds[i].id.substr(0, holds[i].id.find('.'));
                const auto b = holds[j].id.substr(0, holds[j].id.find('.'));
                if (a != victim && b != victim) {
                    ++not_victim;
                    if (not_victim <= 5)
                        fail(fmt::format("overlap: {} [{}, {}] and {} [{}, {}] ({} us)", holds[i].id,
                                         holds[i].enter_ns, holds[i].exit_ns, holds[j].id, holds[j].enter_ns,
                                         holds[j].exit_ns,
                                         (std::min(holds[i].exit_ns, holds[j].exit_ns) - holds[j].enter_ns) / 1000));
                }
            }
        if (!frozen && r.overlaps > 0 && not_victim == 0)
            fail(fmt::format("{} overlap(s) involving {}", r.overlaps, victim));
        if (frozen && r.overlaps == 0)
            fail("the frozen holder's hold overlapped nobody: the scenario did not freeze it while another held");
        // Cross-check with the interop checker (same rules, its own code).
        const auto rep = zktest::check_holds(holds);
        if (rep.violations.size() != r.overlaps)
            fail(fmt::format("interval checker counts {} violation(s), the suite {}", rep.violations.size(), r.overlaps));

        // Every holder must have held.
        std::map<std::string, std::size_t> per_holder;
        for (const auto& h : holds)
            ++per_holder[h.id.substr(0, h.id.find('.'))];
        for (const auto& h : holders_)
            if (per_holder[h.id] == 0)
                fail(fmt::format("{} ({}) never held the lock; see {}", h.id, h.kind, h.err));

        // Losses and expiries.
        std::map<std::string, std::size_t> lost, expired;
        for (const auto& e : events_->all()) {
            if (e.kind == "lost")
                ++lost[e.holder()];
            else if (e.kind == "expired")
                ++expired[e.holder()];
            else if (e.kind == "enter" && e.arg(0) == "-1" && e.holder() == "zl")
                ++r.tokenless;
        }
        for (const auto& [id, n] : lost)
            if (id != victim) {
                r.false_losses += n;
                fail(fmt::format("{} reported {} lost lock(s) although the fault was not meant to end its session", id, n));
            }
        for (const auto& [id, n] : expired)
            if (id != victim)
                fail(fmt::format("{}'s session expired {} time(s) under a fault it should survive", id, n));
        // Each zklock run has a session of its own: its exit 70 (a "lost" event) is the proof.
        if (!victim.empty() && expired[victim] == 0 && lost[victim] == 0)
            fail(fmt::format("{}'s session did not expire: the fault was too short to test anything", victim));

        // Stale writes.
        const auto store = zkfault::audit_store(store_);
        const auto control = zkfault::audit_store(control_);
        r.stale_writes = store.stale_accepted;
        r.control_stale = control.stale_accepted;
        r.rejected = store.rejected;
        for (const auto& l : store.stale_lines)
            fail("stale write accepted by the fence store: " + l);
        if (store.accepted == 0)
            fail("no token was written to the fence store");
        if (frozen) {
            if (store.rejected == 0)
                fail("the frozen holder's stale write was not rejected");
            if (control.stale_accepted == 0)
                fail("negative control: the unchecked store did not take the stale write (the check could not fail)");
        } else if (store.rejected > 0) {
            fail(fmt::format("{} write(s) rejected without a frozen holder: tokens out of order", store.rejected));
        }

        // Orphans: nothing of ours is left under the path.
        std::string error;
        std::vector<std::string> left;
        if (auto n = count_children(connect(), path_, error, &left)) {
            r.orphans = *n;
            if (*n > 0)
                fail(fmt::format("{} lock node(s) left under {}: {}", *n, path_, fmt::join(left, ", ")));
        } else {
            fail(fmt::format("cannot list {}: {}", path_, error));
        }
        // A zklock hold without its fencing token writes nothing to the stores: the stale-write
        // check would pass without having checked zklock at all.
        if (r.tokenless > 0)
            fail(fmt::format("{} zklock hold(s) without ZKLOCK_FENCING_TOKEN (nothing written to the stores); see {}",
                             r.tokenless, events_->path()));
        r.ok = r.failures.empty();
        r.seconds = std::chrono::duration<double>(steady::now() - started_).count();
        return r;
    }

    void note_failure(std::string s) { failures_.push_back(std::move(s)); }

private:
    // Each holder has a stop file of its own, so that one can be stopped before the others.
    std::string stop_file(const std::string& id) const { return dir_ + "/stop-" + id; }

    void wait_stopped(holder_info& h)
    {
        if (h.kind == "zklock") {
            for (auto& l : loops_)
                if (l->id == h.id && l->thread.joinable())
                    l->thread.join();  // each zklock run is bounded (60 s), so is the join
            return;
        }
        if (h.pid <= 0)
            return;
        // An acquire attempt (2 s), a hold, a release and a close: 40 s is plenty.
        auto st = zkfault::wait_exit(h.pid, 40s);
        if (!st) {
            failures_.push_back(fmt::format("{} did not stop within 40 s of the stop request: ended", h.id));
            st = zkfault::end_process(h.pid, 5s);
        }
        h.status = *st;
        h.pid = -h.pid;  // remembered, but no longer ours to signal
    }

    void add_common(std::vector<std::string>& argv, const std::string& id) const
    {
        for (const std::string& a :
             {std::string("--duration-ms"), std::to_string(holder_duration_ms), std::string("--hold-ms"),
              std::to_string(hold_ms), std::string("--log"), holds_, std::string("--events"), events_->path(),
              std::string("--fence-store"), store_, std::string("--control-store"), control_,
              std::string("--stop-file"), stop_file(id), std::string("--session-timeout-ms"),
              std::to_string(session_timeout_ms), std::string("--connection-timeout-ms"),
              std::to_string(session_timeout_ms), std::string("--acquire-timeout-ms"), std::string("2000"),
              std::string("--tolerate-errors")})
            argv.push_back(a);
    }

    void launch(const std::string& id, const std::string& kind, const std::vector<std::string>& argv)
    {
        holder_info h{id, kind, -1, dir_ + "/" + id + ".out", dir_ + "/" + id + ".err"};
        h.pid = zkfault::spawn(argv, h.out, h.err);
        holders_.push_back(h);
    }

    const suite_env& env_;
    std::string name_, dir_, holds_, store_, control_, path_;
    std::unique_ptr<event_log> events_;
    std::vector<holder_info> holders_;
    std::vector<std::unique_ptr<zklock_loop>> loops_;
    std::vector<std::string> failures_;
    steady::time_point started_;
    bool stopped_ = false;
};

// The standard cast: zkcoro (two tasks), Curator, zklock.
void start_standard(scenario& s)
{
    s.start_zkcoro("zk", 2, {}, s.connect());
    s.start_curator("cur");
    s.start_zklock("zl", s.connect());
}

const auto ready_timeout = 60s;
const auto fault_timeout = ms(3 * session_timeout_ms);

bool entered_after(const event& e, const std::string& holder, std::int64_t t)
{
    return e.kind == "enter" && e.holder() == holder && e.t > t;
}

// Waits until each of the standard holders has entered after time t: all recovered.
void wait_standard_recovered(scenario& s, std::int64_t t)
{
    for (const char* h : {"zk", "cur", "zl"})
        s.events().wait_for([&](const event& e) { return entered_after(e, h, t); }, fault_timeout,
                            fmt::format("{} to hold the lock again after the fault", h));
}

// ---------------------------------------------------------------------------------------------
// The scenarios.

result run_baseline(const suite_env& env)
{
    scenario s(env, "baseline");
    try {
        start_standard(s);
        s.wait_all_ready(ready_timeout);
        const std::int64_t t = monotonic_ns();
        wait_standard_recovered(s, t);
        // Some contention time with every holder running (the load, not a synchronisation).
        std::this_thread::sleep_for(3s);
    } catch (const std::exception& e) {
        s.note_failure(e.what());
    }
    return s.finish("", false);
}

// Starts a holder of the given kind ("zkcoro", "curator", "zklock") whose first hold lasts hold
// ms (a zkcoro holder's ends early if its lock is lost); returns its id, e.g. "zklong".
std::string start_long_holder(scenario& s, const std::string& kind, const std::string& suffix, int hold,
                              const std::string& connect_string)
{
    const std::string h = std::to_string(hold);
    if (kind == "curator") {
        s.start_curator("cur" + suffix, {"--first-hold-ms", h}, connect_string);
        return "cur" + suffix;
    }
    if (kind == "zklock") {
        s.start_zklock("zl" + suffix, connect_string, {}, hold);
        return "zl" + suffix;
    }
    s.start_zkcoro("zk" + suffix, 1, {"--first-hold-ms", h}, connect_string);
    return "zk" + suffix;
}

// The member whose `cons` lists a connection of session sid ("0x..."), -1 if none.
int member_with_session(const zktest::zk_ensemble& ens, const std::string& sid)
{
    for (int i = 0; i < ens.size(); ++i) {
        if (ens.member_pid(i) <= 0)
            continue;
        const std::string cons = ens.four_letter(i, "cons", 2000ms);
        if (cons.find("sid=" + sid + ",") != std::string::npos || cons.find("sid=" + sid + ")") != std::string::npos)
            return i;
    }
    return -1;
}

const std::vector<std::string> holder_kinds = {"zkcoro", "curator", "zklock"};

// One round per holder kind: a long holder of that kind holds while the leader is killed with
// SIGKILL, a new leader is elected and the old one restarts.
result run_leader_kill(const suite_env& env)
{
    scenario s(env, "leader-kill");
    auto& ens = *env.ensemble;
    int killed = -1;
    try {
        ens.wait_for_quorum(60s);
        start_standard(s);
        s.wait_all_ready(ready_timeout);
        for (const auto& kind : holder_kinds) {
            // Holds for 10 s: the kill, the election and the restart happen inside it.
            const std::string id = start_long_holder(s, kind, "long", 10000, s.connect());
            const auto enter = s.events().wait_for([&](const event& e) { return e.holder() == id && e.kind == "enter"; },
                                                   ready_timeout, fmt::format("{} to take its long hold", id));
            killed = ens.leader();
            if (killed < 0)
                throw scenario_failure("no leader to kill");
            log(fmt::format("  leader-kill: {} holds (token {}); kill -9 of leader member {} (pid {})", id,
                            enter.arg(0), killed, ens.member_pid(killed)));
            const std::int64_t t_kill = monotonic_ns();
            ens.kill(killed);
            ens.wait_for_quorum(60s);
            log(fmt::format("  leader-kill: new leader member {} after {} ms; restarting member {}", ens.leader(),
                            (monotonic_ns() - t_kill) / 1'000'000, killed));
            ens.restart(killed);
            killed = -1;
            ens.wait_for_quorum(60s);
            const auto exit = s.events().wait_for(
                [&](const event& e) { return e.holder() == id && e.kind == "exit"; }, fault_timeout,
                fmt::format("{} to end its long hold", id));
            if (exit.t < t_kill)
                throw scenario_failure(fmt::format("{}'s long hold ended before the kill", id));
            wait_standard_recovered(s, t_kill);
        }
    } catch (const std::exception& e) {
        s.note_failure(e.what());
    }
    if (killed >= 0) {
        try {
            ens.restart(killed);
        } catch (const std::exception& e) {
            s.note_failure(fmt::format("restarting member {}: {}", killed, e.what()));
        }
    }
    return s.finish("", false);
}

// One round per holder kind: a long holder of that kind, which knows only the two followers,
// holds while the follower it is connected to is stopped past the session timeout; it must fail
// over to the other follower with its session and its lock. The round's holder stops after its
// round.
result run_follower_stop(const suite_env& env, const std::string& name)
{
    scenario s(env, name);
    auto& ens = *env.ensemble;
    int paused = -1;
    try {
        ens.wait_for_quorum(60s);
        start_standard(s);
        s.wait_all_ready(ready_timeout);
        for (const auto& kind : holder_kinds) {
            const int leader = ens.leader();
            std::string followers;
            for (int i = 0; i < ens.size(); ++i)
                if (i != leader)
                    followers += (followers.empty() ? "" : ",") + ens.member_connect_string(i);
            const auto pause_for = ms(session_timeout_ms + 2000);
            const std::int64_t t_round = monotonic_ns();
            const std::string id =
                start_long_holder(s, kind, "follow", static_cast<int>(pause_for.count()) + 4000, followers);
            const auto enter = s.events().wait_for(
                [&](const event& e) { return e.holder() == id && e.kind == "enter" && e.t > t_round; }, ready_timeout,
                fmt::format("{} to take the lock", id));
            // The member its session is on now, from the servers' own connection lists.
            const std::string sid = enter.arg(1);
            paused = member_with_session(ens, sid);
            if (paused < 0)
                throw scenario_failure(fmt::format("no member lists {}'s session {}", id, sid));
            if (paused == ens.leader())
                throw scenario_failure(fmt::format("{} is on the leader although it knows only the followers", id));
            log(fmt::format("  {}: {} holds on member {} (session {}); SIGSTOP to it for {} ms", name, id, paused, sid,
                            pause_for.count()));
            const std::int64_t t_stop = monotonic_ns();
            ens.pause(paused);
            // The fault lasts this long by definition: past the session timeout.
            std::this_thread::sleep_for(pause_for);
            // Before the resume: the session must be on the other follower by now.
            const int now_on = member_with_session(ens, sid);
            ens.resume(paused);
            const int was = paused;
            paused = -1;
            if (now_on < 0 || now_on == was)
                throw scenario_failure(fmt::format("{}'s session {} did not move off the stopped member {}", id, sid, was));
            log(fmt::format("  {}: {} moved to member {}; SIGCONT to member {}", name, id, now_on, was));
            ens.wait_for_quorum(60s);
            s.events().wait_for([&](const event& e) { return e.holder() == id && e.kind == "exit" && e.t > t_stop; },
                                fault_timeout, fmt::format("{} to end its hold", id));
            wait_standard_recovered(s, t_stop);
            s.stop_holder(id);
        }
    } catch (const std::exception& e) {
        s.note_failure(e.what());
    }
    if (paused >= 0)
        ens.resume(paused);
    return s.finish("", false);
}

// A loopback port where nothing listens: bound, never listening, so a connect is refused at once
// and no other process takes the port while the suite runs.
class dead_port {
public:
    dead_port()
    {
        fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
            ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
            throw std::runtime_error(fmt::format("dead port: {}", std::strerror(errno)));
        port_ = ntohs(a.sin_port);
    }
    ~dead_port() { ::close(fd_); }
    dead_port(const dead_port&) = delete;
    dead_port& operator=(const dead_port&) = delete;
    std::string connect_string() const { return fmt::format("127.0.0.1:{}", port_); }

private:
    int fd_ = -1;
    std::uint16_t port_ = 0;
};

// The followers' connect string, then `dead` more entries where nothing listens.
std::string followers_connect(const zktest::zk_ensemble& ens, std::vector<std::unique_ptr<dead_port>>& dead, int n)
{
    const int leader = ens.leader();
    std::string c;
    for (int i = 0; i < ens.size(); ++i)
        if (i != leader)
            c += (c.empty() ? "" : ",") + ens.member_connect_string(i);
    for (int i = 0; i < n; ++i) {
        dead.push_back(std::make_unique<dead_port>());
        c += "," + dead.back()->connect_string();
    }
    return c;
}

// Member i serves again after a SIGCONT (it may have to sync with the leader first). There is no
// event to wait on: polled, bounded.
void wait_serving(const zktest::zk_ensemble& ens, int i, ms limit)
{
    const auto deadline = steady::now() + limit;
    for (;;) {
        const std::string srvr = ens.four_letter(i, "srvr", 1000ms);
        if (srvr.find("Mode: follower") != std::string::npos || srvr.find("Mode: leader") != std::string::npos)
            return;
        if (steady::now() >= deadline)
            throw scenario_failure(fmt::format("member {} does not serve {} ms after its SIGCONT", i, limit.count()));
        std::this_thread::sleep_for(50ms);
    }
}

// One SIGSTOP of the follower that `id` (a zkcoro holder on the followers only) holds the lock
// on; ends when the holder has its session on another member (its "session" event), then
// resumes the member and waits until it serves. Returns the time from the SIGSTOP to that event.
ms stop_until_moved(scenario& s, zktest::zk_ensemble& ens, const std::string& id, std::int64_t t_round,
                    int& paused, const std::string& what)
{
    const auto enter = s.events().wait_for(
        [&](const event& e) { return e.holder() == id && e.kind == "enter" && e.t > t_round; }, ready_timeout,
        fmt::format("{} to take the lock", id));
    const std::string sid = enter.arg(1);
    paused = member_with_session(ens, sid);
    if (paused < 0)
        throw scenario_failure(fmt::format("no member lists {}'s session {}", id, sid));
    if (paused == ens.leader())
        throw scenario_failure(fmt::format("{} is on the leader although it knows only the followers", id));
    const std::string server = ens.member_connect_string(paused);
    const std::int64_t t_stop = monotonic_ns();
    ens.pause(paused);
    const auto moved = s.events().wait_for(
        [&](const event& e) { return e.holder() == id && e.t > t_stop && (e.kind == "session" || e.kind == "expired"); },
        fault_timeout, fmt::format("{} to reconnect after the SIGSTOP of member {}", id, paused));
    const ms took((moved.t - t_stop) / 1'000'000);
    if (moved.kind != "session" || moved.arg(0) != sid || moved.arg(1) == server)
        throw scenario_failure(fmt::format("{}: {} lost session {} or stayed on member {} ({} {} {})", what, id, sid,
                                           paused, moved.kind, moved.arg(0), moved.arg(1)));
    const int now_on = member_with_session(ens, sid);
    log(fmt::format("  {}: {} held on member {}; SIGSTOP; on {} (member {}) with session {} after {} ms", what, id,
                    paused, moved.arg(1), now_on, sid, took.count()));
    const int was = paused;
    ens.resume(was);
    paused = -1;
    if (now_on < 0 || now_on == was)
        throw scenario_failure(fmt::format("{}: {}'s session {} is not on another member", what, id, sid));
    wait_serving(ens, was, 30s);
    return took;
}

// Ends every holder, then lets the sessions that a frozen member cut off expire before the orphan
// check (a zklock that timed out while its member was frozen could not close its session, and
// its node goes with that session): bounded by the session timeout, and noted when it happened.
result finish_after_expiries(scenario& s)
{
    s.stop_all();
    const auto took = wait_path_empty(s.connect(), s.path(), ms(session_timeout_ms + 5000));
    auto r = s.finish("", false);
    if (took && *took > 500ms)
        r.notes.push_back(fmt::format("the last node(s) went {} ms after every holder ended (a session that a "
                                      "frozen member cut off, expired by the server)", took->count()));
    return r;
}

// Two follower stops in a row for one zkcoro holder: the member it moved to in the first is
// stopped in the second (ZOOKEEPER-2466: with an even count of addresses the C client went back
// to the stopped member and the session expired). `dead` entries where nothing listens make the
// connect string longer: 0 gives 2 members, 2 gives 4 entries.
result run_follower_stop_twice(const suite_env& env, const std::string& name, int dead)
{
    scenario s(env, name);
    auto& ens = *env.ensemble;
    int paused = -1;
    try {
        ens.wait_for_quorum(60s);
        start_standard(s);
        s.wait_all_ready(ready_timeout);
        std::vector<std::unique_ptr<dead_port>> ports;
        const std::string connect = followers_connect(ens, ports, dead);
        log(fmt::format("  {}: zktwice knows {}", name, connect));
        // Holds of 6 s: each stop falls inside one (the move takes about 1/3 of the session).
        s.start_zkcoro("zktwice", 1, {"--hold-ms", "6000"}, connect);
        for (int round = 1; round <= 2; ++round) {
            const std::int64_t t_round = monotonic_ns();
            stop_until_moved(s, ens, "zktwice", t_round, paused, fmt::format("{} round {}", name, round));
            wait_standard_recovered(s, monotonic_ns());
        }
        s.stop_holder("zktwice");
    } catch (const std::exception& e) {
        s.note_failure(e.what());
    }
    if (paused >= 0)
        ens.resume(paused);
    return finish_after_expiries(s);
}

// A frozen follower: a zkcoro holder with a 10 s session on the two followers holds the lock;
// the follower it is on gets SIGSTOP. Its own ping must move it to the other follower in about
// 1/3 of the session timeout (the C client alone waits 2/3), keeping the session and the lock.
// `runs` times; the times to the next member are reported (min, median, max).
result run_follower_freeze(const suite_env& env, int runs)
{
    scenario s(env, "follower-freeze");
    auto& ens = *env.ensemble;
    int paused = -1;
    std::vector<ms> times;
    try {
        ens.wait_for_quorum(60s);
        start_standard(s);
        s.wait_all_ready(ready_timeout);
        std::vector<std::unique_ptr<dead_port>> none;
        const std::string connect = followers_connect(ens, none, 0);
        s.start_zkcoro("zkfreeze", 1, {"--hold-ms", "6000", "--session-timeout-ms", "10000"}, connect);
        for (int run = 1; run <= runs; ++run) {
            const std::int64_t t_round = monotonic_ns();
            times.push_back(stop_until_moved(s, ens, "zkfreeze", t_round, paused,
                                             fmt::format("follower-freeze run {}/{}", run, runs)));
            // The hold that spanned the stop ends normally: no loss.
            s.events().wait_for(
                [&](const event& e) { return e.holder() == "zkfreeze" && e.kind == "exit" && e.t > t_round; },
                fault_timeout, "zkfreeze to end its hold");
        }
        s.stop_holder("zkfreeze");
    } catch (const std::exception& e) {
        s.note_failure(e.what());
    }
    if (paused >= 0)
        ens.resume(paused);
    auto r = finish_after_expiries(s);
    if (!times.empty()) {
        std::sort(times.begin(), times.end());
        r.notes.push_back(fmt::format("time to the next member over {} runs (session 10 s): min {} ms, median {} ms, "
                                      "max {} ms", times.size(), times.front().count(),
                                      times[times.size() / 2].count(), times.back().count()));
        if (static_cast<int>(times.size()) != runs)
            r.notes.push_back(fmt::format("only {} of {} runs completed", times.size(), runs));
        // About 1/3 of the session timeout, with room for a loaded machine.
        if (times.back() > 4500ms) {
            r.ok = false;
            r.failures.push_back(fmt::format("a move took {} ms: more than 4.5 s of a 10 s session", times.back().count()));
        }
    }
    return r;
}

// victim_kind: "zkcoro" (a zkcoro-holder whose hold ends when its lock is lost) or "zklock" (zklock,
// which must SIGTERM its command and exit 70 when the lock is lost).
result run_partition(const suite_env& env, const std::string& name, const std::string& victim_kind)
{
    scenario s(env, name);
    auto& ens = *env.ensemble;
    const std::string victim = victim_kind == "zklock" ? "zlnear" : "zknear";
    std::unique_ptr<zkfault::netns_partition> net;
    // The root namespace must look the same before, during and after: nothing of ours goes there.
    const std::string root_before = zkfault::netns_partition::root_snapshot();
    auto check_root = [&](const char* when) {
        const std::string now = zkfault::netns_partition::root_snapshot();
        if (now != root_before)
            s.note_failure(fmt::format("the root namespace changed {}:\n--- before\n{}--- {}\n{}", when, root_before,
                                       when, now));
    };
    try {
        ens.wait_for_quorum(60s);
        std::vector<std::uint16_t> ports;
        for (int i = 0; i < ens.size(); ++i)
            ports.push_back(ens.member_port(i));
        net = std::make_unique<zkfault::netns_partition>(ports);
        check_root("with the namespaces set up");
        log(fmt::format("  {}: namespaces {} ({}) and the relay's; {} connects to {}", name, net->near_namespace(),
                        victim, victim, net->relay_connect_string()));
        start_standard(s);
        s.wait_all_ready(ready_timeout);
        // Its first hold lasts until the lock is lost (60 s at most).
        if (victim_kind == "zklock")
            s.start_zklock(victim, net->relay_connect_string(), net->near_namespace(), 60000);
        else
            s.start_zkcoro(victim, 1, {"--first-hold-ms", "60000"}, net->relay_connect_string(), net->near_namespace());
        const auto enter = s.events().wait_for(
            [&](const event& e) { return e.holder() == victim && e.kind == "enter"; }, ready_timeout,
            fmt::format("{} to hold the lock", victim));
        const std::int64_t t_cut = monotonic_ns();
        net->partition();
        log(fmt::format("  {}: {} holds (token {}); far end of the veth down", name, victim, enter.arg(0)));
        const auto lost = s.events().wait_for(
            [&](const event& e) { return e.holder() == victim && e.kind == "lost"; }, fault_timeout,
            fmt::format("{} to report its lock lost", victim));
        const auto next = s.events().wait_for(
            [&](const event& e) { return e.kind == "write" && e.holder() != victim && e.t > t_cut && e.arg(1) == "accepted"; },
            fault_timeout, "another holder to take the lock and write after the partition");
        log(fmt::format("  {}: {} lost its lock after {} ms; {} wrote token {} after {} ms; healing", name, victim,
                        (lost.t - t_cut) / 1'000'000, next.id, next.arg(0), (next.t - t_cut) / 1'000'000));
        if (victim_kind == "zklock") {
            // zklock ended the command with SIGTERM before it exited 70.
            bool signalled = false;
            for (const auto& e : s.events().all())
                if (e.holder() == victim && e.kind == "signal" && e.t > t_cut && e.t <= lost.t)
                    signalled = e.arg(0) == std::to_string(SIGTERM);
            if (!signalled)
                throw scenario_failure("zklock exited 70 without ending its command with SIGTERM first");
        }
        check_root("during the partition");
        const std::int64_t t_heal = monotonic_ns();
        net->heal();
        s.events().wait_for([&](const event& e) { return entered_after(e, victim, t_heal); }, fault_timeout,
                            fmt::format("{} to hold the lock again after the partition healed", victim));
        wait_standard_recovered(s, t_heal);
    } catch (const std::exception& e) {
        s.note_failure(e.what());
    }
    // Every holder ends before the namespaces go (the near one holds the victim).
    s.stop_all();
    net.reset();
    check_root("after the namespaces were deleted");
    return s.finish(victim, false);
}

result run_frozen(const suite_env& env)
{
    scenario s(env, "frozen");
    auto& ens = *env.ensemble;
    pid_t frozen = -1;
    try {
        ens.wait_for_quorum(60s);
        start_standard(s);
        s.wait_all_ready(ready_timeout);
        s.start_zkcoro("zkfrozen", 1, {"--freeze-before-write", "1", "--first-hold-ms", "200"}, s.connect());
        const auto freezing = s.events().wait_for(
            [](const event& e) { return e.holder() == "zkfrozen" && e.kind == "freezing"; }, ready_timeout,
            "zkfrozen to freeze in its first hold");
        frozen = s.pid_of("zkfrozen");
        // raise(SIGSTOP) follows the event at once; the kernel shows it within microseconds.
        const auto until = steady::now() + 5s;
        while (zkfault::process_state(frozen) != 'T' && steady::now() < until)
            std::this_thread::sleep_for(1ms);
        if (zkfault::process_state(frozen) != 'T')
            throw scenario_failure("zkfrozen logged 'freezing' but is not stopped");
        const std::int64_t token = freezing.num(0);
        log(fmt::format("  frozen: zkfrozen (pid {}) stopped itself holding token {}, before its write", frozen, token));
        const auto later = s.events().wait_for(
            [&](const event& e) {
                return e.kind == "write" && e.holder() != "zkfrozen" && e.arg(1) == "accepted" && e.num(0) > token;
            },
            fault_timeout, "another holder to write a higher token while zkfrozen is stopped");
        log(fmt::format("  frozen: {} wrote token {} after {} ms; SIGCONT to zkfrozen", later.id, later.arg(0),
                        (later.t - freezing.t) / 1'000'000));
        const std::int64_t t_resume = monotonic_ns();
        ::kill(frozen, SIGCONT);
        frozen = -1;
        const auto verdict = s.events().wait_for(
            [&](const event& e) { return e.holder() == "zkfrozen" && e.kind == "write" && e.num(0) == token; }, 30s,
            "zkfrozen's write after it resumed");
        log(fmt::format("  frozen: the fence store {} zkfrozen's token {}", verdict.arg(1), token));
        s.events().wait_for([&](const event& e) { return entered_after(e, "zkfrozen", t_resume); }, fault_timeout,
                            "zkfrozen to hold the lock again with a new session");
        wait_standard_recovered(s, t_resume);
    } catch (const std::exception& e) {
        s.note_failure(e.what());
    }
    if (frozen > 0)
        ::kill(frozen, SIGCONT);
    return s.finish("zkfrozen", true);
}

// ---------------------------------------------------------------------------------------------

// Signals end the run in an orderly way from this thread: holders killed, namespaces deleted.
// The ZooKeeper JVMs die with the process (PR_SET_PDEATHSIG).
void signal_thread(sigset_t set)
{
    int sig = 0;
    if (sigwait(&set, &sig) != 0)
        return;
    std::fprintf(stderr, "fault-suite: signal %d: ending holders, deleting namespaces\n", sig);
    zkfault::kill_registered();
    zkfault::netns_partition::remove_own();
    std::_Exit(128 + sig);
}

std::string require_program(const std::string& p)
{
    if (::access(p.c_str(), X_OK) != 0)
        throw std::runtime_error(fmt::format("missing {} (build it with ninja)", p));
    return p;
}

}  // namespace

int main(int argc, char** argv)
{
    std::string build, source;
    std::set<std::string> only;
    bool keep = false;
    int freeze_runs = 3;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--build-root" && i + 1 < argc)
            build = argv[++i];
        else if (a == "--source-root" && i + 1 < argc)
            source = argv[++i];
        else if (a == "--only" && i + 1 < argc) {
            std::stringstream ss(argv[++i]);
            std::string n;
            while (std::getline(ss, n, ','))
                only.insert(n);
        } else if (a == "--keep") {
            keep = true;
        } else if (a == "--freeze-runs" && i + 1 < argc) {
            freeze_runs = std::atoi(argv[++i]);
            if (freeze_runs < 1 || freeze_runs > 100) {
                fmt::print(stderr, "fault-suite: --freeze-runs must be from 1 to 100\n");
                return 2;
            }
        }
        else {
            fmt::print(stderr, "usage: fault-suite --build-root BUILD --source-root SOURCE [--only NAME,...] [--keep] [--freeze-runs N]\n");
            return 2;
        }
    }
    if (build.empty() || source.empty()) {
        fmt::print(stderr, "usage: fault-suite --build-root BUILD --source-root SOURCE [--only NAME,...] [--keep] [--freeze-runs N]\n");
        return 2;
    }
    const auto t0 = steady::now();

    // Signals go to one thread that cleans up; every other thread (and so every child before its
    // exec resets the mask) has them blocked.
    sigset_t set;
    sigemptyset(&set);
    for (int s : {SIGINT, SIGTERM, SIGHUP})
        sigaddset(&set, s);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::thread(signal_thread, set).detach();

    suite_env env;
    std::unique_ptr<zktest::zk_ensemble> ens;
    try {
        if (::geteuid() != 0)
            throw std::runtime_error("the partition scenario needs root (network namespaces)");
        env.holder = require_program(build + "/tests/interop/zkcoro-holder");
        env.zklock = require_program(build + "/tools/zklock/zklock");
        env.child = require_program(build + "/tests/fault/fault-child");
        env.fence_tool = require_program(build + "/tests/fault/fault-fence");
        if (const char* j = std::getenv("JAVA"); j != nullptr && *j != '\0')
            env.java = j;
        const char* tmp = std::getenv("TMPDIR");
        std::string templ = fmt::format("{}/zkcoro-fault.XXXXXX", tmp != nullptr && *tmp != '\0' ? tmp : "/tmp");
        if (::mkdtemp(templ.data()) == nullptr)
            throw std::runtime_error(fmt::format("mkdtemp: {}", std::strerror(errno)));
        env.work = templ;
        env.run_id = fmt::format("{}-{}", std::time(nullptr), ::getpid());
        zkfault::netns_partition::remove_stale();

        log(fmt::format("fault-suite: work dir {}", env.work));
        std::string out;
        if (zkfault::run_command({"sh", source + "/tests/interop/build.sh", env.work + "/java"}, &out) != 0)
            throw std::runtime_error("building CuratorHolder failed:\n" + out);
        std::ifstream cpf(env.work + "/java/classpath.txt");
        std::getline(cpf, env.classpath);

        zktest::server_options opts;
        opts.tick_ms = tick_ms;
        opts.max_session_timeout_ms = session_timeout_ms;
        ens = std::make_unique<zktest::zk_ensemble>(3, opts);
        env.ensemble = ens.get();
        log(fmt::format("fault-suite: ensemble {} ready after {:.1f} s (session timeout {} ms)", ens->connect_string(),
                        std::chrono::duration<double>(steady::now() - t0).count(), session_timeout_ms));
    } catch (const std::exception& e) {
        fmt::print(stderr, "fault-suite: setup failed: {}\n", e.what());
        return 2;
    }

    const std::vector<std::pair<std::string, std::function<result(const suite_env&)>>> all = {
        {"baseline", run_baseline},
        {"leader-kill", run_leader_kill},
        {"follower-stop", [](const suite_env& e) { return run_follower_stop(e, "follower-stop"); }},
        {"follower-stop-twice", [](const suite_env& e) { return run_follower_stop_twice(e, "follower-stop-twice", 0); }},
        {"follower-stop-twice-4",
         [](const suite_env& e) { return run_follower_stop_twice(e, "follower-stop-twice-4", 2); }},
        {"follower-freeze", [freeze_runs](const suite_env& e) { return run_follower_freeze(e, freeze_runs); }},
        {"partition", [](const suite_env& e) { return run_partition(e, "partition", "zkcoro"); }},
        {"partition-zklock", [](const suite_env& e) { return run_partition(e, "partition-zklock", "zklock"); }},
        {"frozen", run_frozen},
    };
    std::vector<result> results;
    for (const auto& [name, fn] : all) {
        if (!only.empty() && !only.contains(name))
            continue;
        log(fmt::format("== {}", name));
        result r;
        try {
            r = fn(env);
        } catch (const std::exception& e) {
            r.name = name;
            r.ok = false;
            r.failures.push_back(e.what());
        }
        for (const auto& n : r.notes)
            log(fmt::format("  note: {}", n));
        for (const auto& f : r.failures)
            log(fmt::format("  FAIL: {}", f));
        log(fmt::format("{}: {} holders={} acquisitions={} overlaps={} orphans={} false_losses={} stale_writes={} "
                        "rejected={} control_stale={} ({:.1f} s)",
                        r.ok ? "PASS" : "FAIL", r.name, r.holders, r.acquisitions, r.overlaps, r.orphans,
                        r.false_losses, r.stale_writes, r.rejected, r.control_stale, r.seconds));
        results.push_back(std::move(r));
    }

    ens.reset();
    bool ok = !results.empty();
    std::size_t holders = 0, acquisitions = 0, overlaps = 0, frozen_overlaps = 0, orphans = 0, false_losses = 0,
                stale = 0, control = 0, tokenless = 0;
    for (const auto& r : results) {
        ok = ok && r.ok;
        holders += r.holders;
        acquisitions += r.acquisitions;
        (r.name == "frozen" ? frozen_overlaps : overlaps) += r.overlaps;
        orphans += r.orphans;
        false_losses += r.false_losses;
        stale += r.stale_writes;
        control += r.control_stale;
        tokenless += r.tokenless;
    }
    if (!keep && ok)
        fs::remove_all(env.work);
    else
        log(fmt::format("fault-suite: logs kept in {}", env.work));
    const double secs = std::chrono::duration<double>(steady::now() - t0).count();
    log(fmt::format("fault-suite: {} scenarios={} holders={} acquisitions={} overlaps={} (frozen: {}, expected) "
                    "orphans={} false_losses={} stale_writes={} (control: {} got through){} time={:.0f}s",
                    ok ? "PASS" : "FAIL", results.size(), holders, acquisitions, overlaps, frozen_overlaps, orphans,
                    false_losses, stale, control,
                    tokenless > 0 ? fmt::format(" zklock_tokenless={}", tokenless) : std::string(), secs));
    return ok ? 0 : 1;
}
