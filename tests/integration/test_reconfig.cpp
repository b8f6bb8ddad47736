// The client follows the ensemble as it is reconfigured (issue 42): members added, removed and
// replaced with ZooKeeper's dynamic reconfiguration while a lock is held. One reconfigurable
// ensemble is shared by the cases, in order: (a) 3 members grow to 5, the 3 of the start leave one
// by one and one joins (3 again); twelve holders through 2 members added (the sessions spread) and
// removed again; (b) one member is replaced by a new one; (c) the negative
// control: (a) with client_config::follow_ensemble off, which loses the lock. Each MESSAGE gives
// the time from a reconfig to the client reading the new configuration and connecting with the new
// list. RECONFIG_DEBUG=1 logs the clients at debug level (shown when a check fails).
#include "common.hpp"

#include <zookeeper/zookeeper.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <future>
#include <map>
#include <set>
#include <thread>
#include <sstream>

using namespace zktest;
using namespace zkcoro;
using asio::awaitable;

namespace {

using clock_type = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------------------
// A reconfig through the ZooKeeper C client (zoo_areconfig), run in a child process: the
// single-threaded C library has process-global state that every call in this process must
// share under zkcoro's lock, which a test cannot take. The child keeps only a pipe to us.

struct reconfig_done {
    int rc = ZSYSTEMERROR;
    std::string config;  // the new configuration the server returned
    clock_type::time_point sent{}, replied{};  // steady_clock is CLOCK_MONOTONIC: one clock for both processes
};

std::int64_t now_ns()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now().time_since_epoch()).count();
}

void discard(const char*) {}

[[noreturn]] void reconfig_child(int out, const char* server, const char* joining, const char* leaving)
{
    const auto deadline = clock_type::now() + 20s;
    zhandle_t* zh = zookeeper_init2(server, nullptr, 4000, nullptr, nullptr, ZOO_NO_LOG_CLIENTENV, &discard);
    struct ctx_t {
        bool done = false;
        int rc = ZSYSTEMERROR;
        std::string config;
        std::int64_t sent = 0, replied = 0;
    } ctx;
    bool sent = false;
    while (zh && !ctx.done && clock_type::now() < deadline) {
        if (!sent && zoo_state(zh) == ZOO_CONNECTED_STATE) {
            int rc = zoo_areconfig(
                zh, joining, leaving, nullptr, -1,
                [](int result, const char* value, int len, const Stat*, const void* data) {
                    auto* c = static_cast<ctx_t*>(const_cast<void*>(data));
                    c->done = true;
                    c->replied = now_ns();
                    c->rc = result;
                    if (value && len > 0)
                        c->config.assign(value, static_cast<std::size_t>(len));
                },
                &ctx);
            if (rc != ZOK) {
                ctx.rc = rc;
                break;
            }
            ctx.sent = now_ns();
            sent = true;
        }
        int fd = -1, interest = 0;
        timeval tv{};
        if (zookeeper_interest(zh, &fd, &interest, &tv) == ZINVALIDSTATE)
            break;
        pollfd p{fd, 0, 0};
        if (interest & ZOOKEEPER_READ)
            p.events |= POLLIN;
        if (interest & ZOOKEEPER_WRITE)
            p.events |= POLLOUT;
        int wait_ms = static_cast<int>(tv.tv_sec * 1000 + tv.tv_usec / 1000);
        wait_ms = std::clamp(wait_ms, 1, 100);
        int r = ::poll(&p, fd >= 0 ? 1 : 0, wait_ms);
        int events = 0;
        if (r > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)))
            events |= ZOOKEEPER_READ;
        if (r > 0 && (p.revents & POLLOUT))
            events |= ZOOKEEPER_WRITE;
        zookeeper_process(zh, events);
    }
    std::string msg = fmt::format("{}\n{}\n{}\n{}", ctx.rc, ctx.sent, ctx.replied, ctx.config);
    [[maybe_unused]] auto n = ::write(out, msg.data(), msg.size());
    ::_exit(0);
}

// Sends a reconfig to `server` ("127.0.0.1:port"): `joining` and `leaving` as zoo_areconfig takes
// them (comma separated server lines, and ids), either may be empty.
reconfig_done reconfig(const std::string& server, const std::string& joining, const std::string& leaving)
{
    int fds[2];
    REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        prepare_child_after_fork(parent);
        const int out = fds[1];
        if (out > 3)
            ::close_range(3, static_cast<unsigned>(out) - 1, 0);
        ::close_range(static_cast<unsigned>(out) + 1, ~0U, 0);
        reconfig_child(out, server.c_str(), joining.empty() ? nullptr : joining.c_str(),
                       leaving.empty() ? nullptr : leaving.c_str());
    }
    ::close(fds[1]);
    std::string text;
    const auto deadline = clock_type::now() + 25s;
    char buf[4096];
    for (;;) {
        pollfd p{fds[0], POLLIN, 0};
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now()).count();
        if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0)
            break;
        ssize_t n = ::read(fds[0], buf, sizeof buf);
        if (n <= 0)
            break;
        text.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fds[0]);
    ::kill(pid, SIGKILL);  // a no-op when it has exited
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    reconfig_done d;
    std::istringstream in(text);
    std::int64_t sent = 0, replied = 0;
    if (in >> d.rc >> sent >> replied) {
        d.sent = clock_type::time_point(std::chrono::nanoseconds(sent));
        d.replied = clock_type::time_point(std::chrono::nanoseconds(replied));
        std::getline(in, d.config);
        d.config.assign(std::istreambuf_iterator<char>(in), {});
    }
    return d;
}

server_options reconfig_options()
{
    server_options o;
    o.reconfig = true;
    return o;
}

// The shared ensemble and which of its members are in the configuration (and running). Three to
// start with; each case leaves three or more.
struct cluster {
    zk_ensemble ens{3, reconfig_options()};
    std::vector<int> live{0, 1, 2};

    std::string connect(const std::vector<int>& members, std::string_view chroot = "") const
    {
        std::string s;
        for (int m : members)
            s += (s.empty() ? "" : ",") + ens.member_connect_string(m);
        return s + std::string(chroot);
    }
    std::string connect() const { return connect(live); }

    // Starts `n` new members and adds them with one reconfig (sent to a live member).
    std::vector<int> add(int n)
    {
        std::vector<int> added;
        for (int k = 0; k < n; ++k)
            added.push_back(ens.add_member(live));
        std::string joining;
        for (int m : added) {
            ens.wait_serving(m, 30s);
            joining += (joining.empty() ? "" : ",") + ens.member_spec(m);
        }
        last = send(live.front(), joining, "", [&](const std::string& conf) {
            for (int m : added)
                if (conf.find(fmt::format("server.{}=", ens.member_id(m))) == std::string::npos)
                    return false;
            return true;
        });
        live.insert(live.end(), added.begin(), added.end());
        return added;
    }

    // Removes member i with a reconfig sent to another live member (the server is not stopped).
    void remove(int i)
    {
        int via = -1;
        for (int m : live)
            if (m != i)
                via = m;
        REQUIRE(via >= 0);
        last = send(via, "", std::to_string(ens.member_id(i)), [&](const std::string& conf) {
            return conf.find(fmt::format("server.{}=", ens.member_id(i))) == std::string::npos;
        });
        std::erase(live, i);
    }

    // The last reconfig, as the child saw it.
    reconfig_done last;

    // Sends a reconfig to member `via` once it serves. A reconfig that meets a connection loss
    // (an election after the leader left) is sent again unless `done` finds it applied in the
    // member's configuration (four-letter word conf). Bounded: 10 attempts.
    template <class Done>
    reconfig_done send(int via, const std::string& joining, const std::string& leaving, Done done)
    {
        reconfig_done d;
        for (int attempt = 1; attempt <= 10; ++attempt) {
            ens.wait_serving(via, 30s);
            d = reconfig(ens.member_connect_string(via), joining, leaving);
            if (d.rc == ZOK)
                return d;
            MESSAGE("reconfig (joining " << joining << ", leaving " << leaving << ") via member " << via
                                         << ", attempt " << attempt << ": " << std::string(zerror(d.rc)));
            // The member's configuration (it may not answer during an election: asked again).
            std::string conf;
            for (int ask = 0; ask < 30 && conf.find("membership:") == std::string::npos; ++ask) {
                if (ask > 0)
                    std::this_thread::sleep_for(100ms);
                conf = ens.four_letter(via, "conf");
            }
            if (conf.find("membership:") != std::string::npos && done(conf)) {
                d.config = conf;  // applied, its reply lost: the version from the member
                return d;
            }
            std::this_thread::sleep_for(200ms);
        }
        FAIL("reconfig (joining " << joining << ", leaving " << leaving << ") failed: " << std::string(zerror(d.rc)));
        return d;
    }

    // "127.0.0.1:port" of each live member (the form client::servers() has).
    std::set<std::string> addresses(const std::vector<int>& members) const
    {
        std::set<std::string> r;
        for (int m : members)
            r.insert(ens.member_connect_string(m));
        return r;
    }
    int member_at(const std::string& address) const
    {
        for (int i = 0; i < ens.size(); ++i)
            if (ens.member_connect_string(i) == address)
                return i;
        return -1;
    }
};

cluster& shared_cluster()
{
    static cluster c;
    return c;
}

// The clients run on a thread of their own; the test's thread starts and stops servers (the
// harness wants them started from the thread that outlives them) and sends the reconfigs.
struct io_thread {
    asio::io_context ioc;
    asio::executor_work_guard<asio::io_context::executor_type> work{ioc.get_executor()};
    std::thread thread{[this] { ioc.run(); }};

    ~io_thread()
    {
        work.reset();
        thread.join();
    }

    // Runs a coroutine on the clients' thread and waits for its result (at most `limit`).
    template <class F>
    auto run(F&& f, std::chrono::seconds limit = 20s)
    {
        auto fut = asio::co_spawn(ioc, std::forward<F>(f), asio::use_future);
        if (fut.wait_for(limit) != std::future_status::ready) {
            // The coroutine still uses the test's objects: nothing can be unwound safely.
            std::cerr << "test_reconfig: a step did not finish within " << limit.count() << " s\n";
            std::abort();
        }
        return fut.get();
    }
};

std::set<std::string> as_set(const std::vector<std::string>& v) { return {v.begin(), v.end()}; }

// Polls `pred` every 2 ms until true, at most `limit`; the time it took, or nullopt.
template <class Pred>
std::optional<std::chrono::milliseconds> time_until(Pred pred, std::chrono::milliseconds limit)
{
    const auto t0 = clock_type::now();
    for (int i = 0; i < 100000; ++i) {
        if (pred())
            return std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t0);
        if (clock_type::now() - t0 > limit)
            return std::nullopt;
        std::this_thread::sleep_for(2ms);
    }
    return std::nullopt;
}

// A held lock and whether its lost signal fired.
struct held {
    std::optional<guard> g;
    std::atomic<bool> lost_signal{false};

    // Listens for the lost signal (on the clients' thread).
    void watch(asio::io_context& ioc)
    {
        asio::co_spawn(ioc, [this]() -> awaitable<void> {
            auto [ec] = co_await g->async_wait_lost(asio::as_tuple(asio::use_awaitable));
            if (ec == make_error_code(client_errc::lock_lost))
                lost_signal = true;
        }, asio::detached);
    }
};

// A client's log lines at info level, with the time each was emitted.
struct timed_log {
    std::mutex m;
    std::vector<std::pair<clock_type::time_point, std::string>> lines;

    // The first line at or after `from` that contains `text`.
    std::optional<clock_type::time_point> first(std::string_view text, clock_type::time_point from)
    {
        std::lock_guard lk(m);
        for (auto& [t, l] : lines)
            if (t >= from && l.find(text) != std::string::npos)
                return t;
        return std::nullopt;
    }
    bool contains(std::string_view text) { return first(text, {}).has_value(); }
    std::string dump()
    {
        std::lock_guard lk(m);
        std::string s;
        for (auto& [t, l] : lines)
            s += l + "\n";
        return s;
    }
};

client_config reconfig_client(std::string connect, bool follow, std::shared_ptr<timed_log> log = nullptr)
{
    auto cfg = test_config(std::move(connect), 4000ms);
    cfg.follow_ensemble = follow;
    if (log) {
        cfg.log_threshold = (std::getenv("RECONFIG_DEBUG") ? log_level::debug : log_level::info);
        cfg.log = [log](log_level, std::string_view text) {
            std::lock_guard lk(log->m);
            log->lines.emplace_back(clock_type::now(), std::string(text));
        };
    }
    return cfg;
}

// The "version=" of a configuration.
std::string version_of(const std::string& config)
{
    auto p = config.find("version=");
    if (p == std::string::npos)
        return {};
    auto e = config.find('\n', p);
    return config.substr(p + 8, e == std::string::npos ? std::string::npos : e - p - 8);
}

long long ms_between(clock_type::time_point a, clock_type::time_point b)
{
    return std::chrono::duration_cast<std::chrono::milliseconds>(b - a).count();
}

// When the client read the configuration the reconfig made, and when it connected with a new list,
// relative to the reconfig's reply (or to its sending, when the reply was lost: an election).
std::string follow_times(timed_log& log, const reconfig_done& d)
{
    const auto v = version_of(d.config);
    const bool replied = d.rc == ZOK;
    const auto ref = replied ? d.replied : d.sent;
    const char* what = replied ? "the reply" : "the reconfig was sent (its reply was lost)";
    auto read = log.first("ensemble version " + v, d.sent);
    auto used = log.first("ZooKeeper servers in use", d.sent);
    return fmt::format("{}the client read {} {} ms after {}{}",
                       replied ? fmt::format("reconfig took {} ms; ", ms_between(d.sent, d.replied)) : std::string(),
                       v.empty() ? std::string("the new configuration") : "version " + v, read ? std::to_string(ms_between(ref, *read)) : std::string("(not seen)"), what,
                       used ? fmt::format(", connected with the new list {} ms after it", ms_between(ref, *used))
                            : std::string(", stayed on its server"));
}

}  // namespace

TEST_CASE("three members replaced by two new ones, one by one: the holder keeps its lock, the waiter "
          "is granted after it, a client of the new members sees the same queue")
{
    auto& cl = shared_cluster();
    const std::vector<int> originals = cl.live;
    const std::string chroot = "/reconfig-a";
    io_thread io;
    auto log = std::make_shared<timed_log>();
    client admin(io.ioc.get_executor(), reconfig_client(cl.connect(), true));
    client holder(io.ioc.get_executor(), reconfig_client(cl.connect(originals, chroot), true, log));
    auto waiter_log = std::make_shared<timed_log>();
    client waiter(io.ioc.get_executor(), reconfig_client(cl.connect(originals, chroot), true, waiter_log));
    mutex mh(holder, "/lock"), mw(waiter, "/lock");
    held h;
    std::optional<guard> waiter_guard;
    std::atomic<bool> waiter_done{false};
    io.run([&]() -> awaitable<void> {
        co_await admin.async_connect();
        co_await admin.async_create(chroot, "", create_mode::persistent);
        co_await holder.async_connect();
        co_await waiter.async_connect();
        h.g = co_await mh.acquire();
    });
    h.watch(io.ioc);
    asio::co_spawn(io.ioc, [&]() -> awaitable<void> {
        waiter_guard = co_await mw.acquire(50s);
        waiter_done = true;
    }, asio::detached);
    const auto sid = holder.session().id;
    const auto waiter_sid = waiter.session().id;
    REQUIRE(time_until([&] { return io.run([&]() -> awaitable<std::size_t> {
        co_return (co_await mh.async_participants()).size(); }) == 2; }, 5000ms));
    CHECK(as_set(holder.servers()) == cl.addresses(originals));

    // Two members join: every client learns the five.
    const auto added = cl.add(2);
    const auto learnt = time_until([&] { return as_set(holder.servers()) == cl.addresses(cl.live); }, 5000ms);
    MESSAGE("reconfig adding members " << added[0] << " and " << added[1] << ": " << follow_times(*log, cl.last));
    CHECK(learnt);
    CHECK(time_until([&] { return as_set(waiter.servers()) == cl.addresses(cl.live); }, 5000ms));

    // The three of the start leave, one by one, each stopped once the clients have left it.
    for (int i : originals) {
        const int on = cl.member_at(holder.connected_server());
        const auto t0 = clock_type::now();
        cl.remove(i);
        const auto list = time_until([&] { return as_set(holder.servers()) == cl.addresses(cl.live); }, 5000ms);
        auto moved = time_until([&] {
            return cl.addresses(cl.live).count(holder.connected_server()) == 1 &&
                   cl.addresses(cl.live).count(waiter.connected_server()) == 1;
        }, 8000ms);
        MESSAGE("reconfig removing member " << i << " (the holder was on member " << on << "): "
                << follow_times(*log, cl.last) << "; both clients on members of the new list "
                << (moved ? fmt::format("{} ms after the reconfig was sent",
                                        std::chrono::duration_cast<std::chrono::milliseconds>(
                                            clock_type::now() - t0).count())
                          : std::string("not within 8 s")));
        CHECK(list);
        CHECK_MESSAGE(moved, "holder on '" << holder.connected_server() << "', waiter on '" << waiter.connected_server()
                                           << "'\nholder's log:\n" << log->dump() << "waiter's log:\n"
                                           << waiter_log->dump());
        cl.ens.stop(i);
        CHECK(!h.lost_signal);
        CHECK(!h.g->lost());
    }
    // The holder and the waiter still have their sessions, on the new members.
    const bool answered = io.run([&]() -> awaitable<bool> {
        auto [ec, r] = co_await holder.async_exists("/lock", asio::as_tuple(asio::use_awaitable));
        co_return !ec && r.stat.has_value();
    });
    CHECK(answered);
    CHECK(holder.session().id == sid);
    CHECK(waiter.session().id == waiter_sid);
    CHECK(holder.stats().ensemble_changes >= 4);
    CHECK(log->contains("ZooKeeper servers in use"));

    // A client that knows only the new members sees the same queue.
    client fresh(io.ioc.get_executor(), reconfig_client(cl.connect(cl.live, chroot), true));
    mutex mf(fresh, "/lock");
    auto [seen_by_holder, seen_by_fresh] = io.run([&]() -> awaitable<std::pair<std::vector<std::string>,
                                                                                  std::vector<std::string>>> {
        co_await fresh.async_connect();
        std::vector<std::string> a, b;
        for (auto& p : co_await mh.async_participants())
            a.push_back(p.name + (p.holds ? " (holds)" : ""));
        for (auto& p : co_await mf.async_participants())
            b.push_back(p.name + (p.holds ? " (holds)" : ""));
        co_return std::pair{a, b};
    });
    CHECK(seen_by_holder.size() == 2);
    CHECK(seen_by_fresh == seen_by_holder);

    // The holder lets go: the waiter is granted.
    CHECK(!waiter_done);
    io.run([&]() -> awaitable<void> { co_await h.g->release(); });
    CHECK(time_until([&] { return waiter_done.load(); }, 10000ms));
    REQUIRE(waiter_guard.has_value());
    CHECK(!waiter_guard->lost());
    io.run([&]() -> awaitable<void> {
        co_await waiter_guard->release();
        co_await fresh.async_close();
        co_await waiter.async_close();
        co_await holder.async_close();
        co_await admin.async_close();
    });
    CHECK(!h.lost_signal);

    // Back to three members for the next case.
    cl.add(1);
}

// The rebalancing: when members are added, each client whose server stays moves with probability
// 1 - 3/5 (ZooKeeper's rule, spreading the sessions); twelve holders make a case with no move
// unlikely (0.6^12, 0.2 %; a warning, not a failure). Then the two new members leave again: those
// on them move back. Every move keeps the session and the lock.
TEST_CASE("members added and removed again under twelve holders: the sessions spread and come back, "
          "every lock kept")
{
    auto& cl = shared_cluster();
    io_thread io;
    constexpr int n = 12;
    std::vector<std::shared_ptr<timed_log>> logs;
    std::vector<std::unique_ptr<client>> clients;
    std::vector<std::unique_ptr<mutex>> locks;
    std::vector<std::unique_ptr<held>> holds;
    const std::string base = unique_path("spread");
    for (int k = 0; k < n; ++k) {
        logs.push_back(std::make_shared<timed_log>());
        clients.push_back(std::make_unique<client>(io.ioc.get_executor(), reconfig_client(cl.connect(), true, logs.back())));
        locks.push_back(std::make_unique<mutex>(*clients.back(), fmt::format("{}-{}", base, k)));
        holds.push_back(std::make_unique<held>());
    }
    io.run([&]() -> awaitable<void> {
        for (int k = 0; k < n; ++k) {
            co_await clients[k]->async_connect();
            holds[k]->g = co_await locks[k]->acquire();
        }
    });
    std::vector<std::int64_t> sids;
    for (int k = 0; k < n; ++k) {
        holds[k]->watch(io.ioc);
        sids.push_back(clients[k]->session().id);
    }
    auto all_on = [&](const std::vector<int>& members) {
        const auto want = cl.addresses(members);
        for (auto& c : clients)
            if (as_set(c->servers()) != want || want.count(c->connected_server()) == 0)
                return false;
        return true;
    };
    auto count_lines = [&](std::string_view text) {
        int moved = 0;
        for (auto& l : logs)
            moved += l->contains(text) ? 1 : 0;
        return moved;
    };
    const auto before = cl.live;
    const auto added = cl.add(2);
    CHECK(time_until([&] { return all_on(cl.live); }, 8000ms));
    const int spread = count_lines("to spread the load");
    std::map<int, int> per_member;
    for (auto& c : clients)
        ++per_member[cl.member_at(c->connected_server())];
    std::string shown;
    for (auto [m, count] : per_member)
        shown += fmt::format(" member {}: {};", m, count);
    MESSAGE("2 members added: " << spread << " of " << n << " holders moved to spread the load;" << shown);
    // No move at all has probability 0.6^12 (0.2 %): said, not failed.
    WARN_MESSAGE(spread > 0, "no holder moved when 2 members were added (probability 0.2 %)");
    int on_added = 0;
    for (int m : added)
        on_added += per_member[m];
    for (int m : added) {
        cl.remove(m);
        cl.ens.stop(m);
    }
    CHECK(time_until([&] { return all_on(before); }, 8000ms));
    MESSAGE("the 2 members removed again: the " << on_added << " holders on them are back on the 3 others");
    const int answered = io.run([&]() -> awaitable<int> {
        int ok = 0;
        for (auto& c : clients) {
            auto [ec, r] = co_await c->async_exists("/", asio::as_tuple(asio::use_awaitable));
            ok += !ec && r.stat ? 1 : 0;
        }
        co_return ok;
    });
    CHECK(answered == n);
    for (int k = 0; k < n; ++k) {
        CHECK_MESSAGE(clients[k]->session().id == sids[k], "holder " << k);
        CHECK_MESSAGE(!holds[k]->lost_signal, "holder " << k << "\n" << logs[k]->dump());
        CHECK_MESSAGE(!holds[k]->g->lost(), "holder " << k);
    }
    io.run([&]() -> awaitable<void> {
        for (int k = 0; k < n; ++k) {
            co_await holds[k]->g->release();
            co_await clients[k]->async_close();
        }
    });
}

TEST_CASE("the member a holder is connected to is replaced by a new one on new ports: the session moves, "
          "the lock is kept")
{
    auto& cl = shared_cluster();
    io_thread io;
    auto log = std::make_shared<timed_log>();
    client holder(io.ioc.get_executor(), reconfig_client(cl.connect(), true, log));
    mutex m(holder, unique_path("replace"));
    held h;
    io.run([&]() -> awaitable<void> {
        co_await holder.async_connect();
        h.g = co_await m.acquire();
    });
    h.watch(io.ioc);
    const auto sid = holder.session().id;
    const int old = cl.member_at(holder.connected_server());
    REQUIRE(old >= 0);
    // The new member joins and the old one leaves in one reconfig, sent to a third member.
    const int fresh = cl.ens.add_member(cl.live);
    cl.ens.wait_serving(fresh, 30s);
    int via = -1;
    for (int x : cl.live)
        if (x != old)
            via = x;
    const auto t0 = clock_type::now();
    cl.last = cl.send(via, cl.ens.member_spec(fresh), std::to_string(cl.ens.member_id(old)),
                      [&](const std::string& conf) {
                          return conf.find(fmt::format("server.{}=", cl.ens.member_id(old))) == std::string::npos;
                      });
    std::erase(cl.live, old);
    cl.live.push_back(fresh);
    const auto moved = time_until([&] { return cl.addresses(cl.live).count(holder.connected_server()) == 1; },
                                  8000ms);
    MESSAGE("member " << old << " replaced by member " << fresh << ": " << follow_times(*log, cl.last)
                      << "; the holder on member " << cl.member_at(holder.connected_server()) << " "
                      << std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t0).count()
                      << " ms after the reconfig was sent");
    CHECK_MESSAGE(moved, "holder on '" << holder.connected_server() << "'\n" << log->dump());
    cl.ens.stop(old);
    const bool answered = io.run([&]() -> awaitable<bool> {
        auto [ec, r] = co_await holder.async_exists("/", asio::as_tuple(asio::use_awaitable));
        co_return !ec && r.stat.has_value();
    });
    CHECK(answered);
    CHECK(holder.session().id == sid);
    CHECK(!h.lost_signal);
    CHECK(!h.g->lost());
    CHECK(as_set(holder.servers()) == cl.addresses(cl.live));
    io.run([&]() -> awaitable<void> {
        co_await h.g->release();
        co_await holder.async_close();
    });
    CHECK(!h.lost_signal);
}

// The negative control: the scenario of the first case with follow_ensemble off. Once the last
// member the holder knows has left (and stopped), it cannot reconnect: the lock is lost.
TEST_CASE("turned off: the holder loses its lock when the members it knows are replaced")
{
    auto& cl = shared_cluster();
    const std::vector<int> originals = cl.live;
    io_thread io;
    client holder(io.ioc.get_executor(), reconfig_client(cl.connect(originals), false));
    mutex m(holder, unique_path("off"));
    held h;
    io.run([&]() -> awaitable<void> {
        co_await holder.async_connect();
        h.g = co_await m.acquire();
    });
    h.watch(io.ioc);
    const auto sid = holder.session().id;
    cl.add(2);
    for (int i : originals) {
        cl.remove(i);
        cl.ens.stop(i);
    }
    CHECK(as_set(holder.servers()) == cl.addresses(originals));
    CHECK(holder.stats().ensemble_changes == 0);
    // The session cannot reconnect: the lost policy's deadline (the session timeout, 4 s) passes.
    const auto lost = time_until([&] { return h.lost_signal.load(); }, 10000ms);
    MESSAGE("follow_ensemble off: lock lost " << (lost ? fmt::format("{} ms after the last member it knew stopped",
                                                                   lost->count())
                                                        : std::string("never (within 10 s)")));
    CHECK(lost);
    CHECK(h.g->lost());
    CHECK(holder.state() != session_state::connected);
    io.run([&]() -> awaitable<void> {
        co_await h.g->release();  // a no-op for a lost lock
        co_await holder.async_close();
    });
    (void)sid;
}
