// zkcoro-elect: zkcoro's side of the election, revocation and fencing interop tests (the
// counterpart of CuratorElect.java). One mode per run:
//
//   zkcoro-elect latch    --connect C --path P --id ID --events FILE [--duration-ms D]
//   zkcoro-elect selector --connect C --path P --id ID --events FILE [--duration-ms D]
//       Takes part in a leader_latch / run_as_leader election until killed (or D ms, default
//       120000). Appends "<monotonic_ns> <id> gained <node>" when it becomes leader and
//       "<monotonic_ns> <id> lost" when the term ends, one write(2) each.
//   zkcoro-elect hold     --connect C --path P [--revocable] [--wait-ms N]
//       Acquires the mutex (at most 30 s), prints "held <node>", then waits at most N ms
//       (default 20000) for a revocation request: prints "revoked" when one came, else
//       "not-revoked"; releases and exits 0.
//   zkcoro-elect revoke   --connect C --node NODE
//       zkcoro::async_request_revoke(NODE); exits 0 when written (or the node is gone).
//   zkcoro-elect write    --connect C --path P --resource R --value V --mode fenced|checked|plain [--freeze]
//       Creates R (persistent, data "init") if missing, acquires the mutex at P (at most 30 s),
//       prints "held <node> <session>", with --freeze stops its own process (SIGSTOP) and goes
//       on after SIGCONT, then writes V into R: fenced: guard::async_multi (check on the lock
//       node first); checked: client::async_multi with that same check, by hand (the server
//       decides, not the client's knowledge of its lock); plain: client::async_set_data.
//       Connection trouble is retried (at most 20 attempts, 30 s). Prints "write accepted" or
//       "write rejected: <reason>"; exits 0.
//   zkcoro-elect get      --connect C --node R       prints R's data
//   zkcoro-elect now                                 prints CLOCK_MONOTONIC in ns
//
// Common options: --session-timeout-ms (default 2000). Exit 2 on error or bad usage.
#include <zkcoro/client.hpp>
#include <zkcoro/guard.hpp>
#include <zkcoro/leader_latch.hpp>
#include <zkcoro/leader_selector.hpp>
#include <zkcoro/mutex.hpp>
#include <zkcoro/revocation.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

struct usage_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct options {
    std::string mode;
    std::map<std::string, std::string> v;
    bool revocable = false;
    bool freeze = false;

    std::string get(const std::string& k) const
    {
        auto it = v.find(k);
        if (it == v.end() || it->second.empty())
            throw usage_error(fmt::format("{} needs {}", mode, k));
        return it->second;
    }
    long long num(const std::string& k, long long dflt) const
    {
        auto it = v.find(k);
        if (it == v.end())
            return dflt;
        long long n = 0;
        auto [p, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), n);
        if (ec != std::errc{} || p != it->second.data() + it->second.size() || n < 0)
            throw usage_error(fmt::format("{} needs a non-negative integer, got '{}'", k, it->second));
        return n;
    }
};

options parse(int argc, char** argv)
{
    if (argc < 2)
        throw usage_error("a mode is required");
    options o;
    o.mode = argv[1];
    for (int i = 2; i < argc; ++i) {
        std::string_view a = argv[i];
        if (a == "--revocable")
            o.revocable = true;
        else if (a == "--freeze")
            o.freeze = true;
        else if (a.starts_with("--") && i + 1 < argc)
            o.v[std::string(a)] = argv[++i];
        else
            throw usage_error(fmt::format("unexpected argument: {}", a));
    }
    return o;
}

std::int64_t monotonic_ns()
{
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void say(const std::string& line)
{
    fmt::print("{}\n", line);
    std::fflush(stdout);
}

// One line, one write(2) on an O_APPEND descriptor: several processes share the events file.
void append_event(int fd, const std::string& id, const std::string& what)
{
    const auto line = fmt::format("{} {} {}\n", monotonic_ns(), id, what);
    if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
        throw std::runtime_error(fmt::format("cannot write an event: {}", std::strerror(errno)));
}

zkcoro::client_config config(const options& o)
{
    zkcoro::client_config cfg;
    cfg.connect_string = o.get("--connect");
    cfg.session_timeout = std::chrono::milliseconds(o.num("--session-timeout-ms", 2000));
    cfg.connect_timeout = 10s;
    cfg.log_threshold = zkcoro::log_level::warn;
    cfg.log = [](zkcoro::log_level l, std::string_view m) {
        fmt::print(stderr, "zkcoro-elect: [{}] {}\n", zkcoro::to_string(l), m);
    };
    return cfg;
}

asio::awaitable<void> sleep_for(std::chrono::milliseconds d)
{
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    co_await t.async_wait(use_tuple);
}

asio::awaitable<void> run_latch(zkcoro::client& c, const options& o, int fd, std::chrono::steady_clock::time_point end)
{
    const auto id = o.get("--id");
    zkcoro::leader_latch_options lo;
    lo.id = id;
    zkcoro::leader_latch latch(c, o.get("--path"), lo);
    // One round per term; bounded by the run's end.
    while (std::chrono::steady_clock::now() < end) {
        auto l = co_await latch.await_leadership(end - std::chrono::steady_clock::now());
        if (!l)
            break;
        append_event(fd, id, fmt::format("gained {}", l->node_path()));
        asio::steady_timer t(co_await asio::this_coro::executor, end);
        co_await t.async_wait(asio::bind_cancellation_slot(l->lost_slot(), use_tuple));
        append_event(fd, id, "lost");
    }
    co_await latch.async_close(use_tuple);
}

asio::awaitable<void> run_selector(zkcoro::client& c, const options& o, int fd, std::chrono::steady_clock::time_point end)
{
    const auto id = o.get("--id");
    auto lead = [&](zkcoro::guard& g) -> asio::awaitable<void> {
        append_event(fd, id, fmt::format("gained {}", g.node_path()));
        asio::steady_timer t(co_await asio::this_coro::executor, end);
        auto [ec] = co_await t.async_wait(use_tuple);  // cancelled when leadership is lost
        append_event(fd, id, "lost");
        if (ec)
            throw boost::system::system_error(ec);
    };
    zkcoro::leader_selector_options so;
    so.id = id;
    so.requeue = true;
    asio::steady_timer stop(co_await asio::this_coro::executor, end);
    co_await asio::experimental::make_parallel_group(
        asio::co_spawn(c.get_executor(), zkcoro::run_as_leader(c, o.get("--path"), lead, so),
                       asio::deferred),
        stop.async_wait(asio::deferred))
        .async_wait(asio::experimental::wait_for_one(), use_tuple);
}

asio::awaitable<void> run_hold(zkcoro::client& c, const options& o)
{
    zkcoro::mutex_options mo;
    mo.revocable = o.revocable;
    zkcoro::mutex m(c, o.get("--path"), mo);
    auto g = co_await m.acquire(30s);
    if (!g)
        throw std::runtime_error("not acquired within 30 s");
    say(fmt::format("held {}", g->node_path()));
    asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::milliseconds(o.num("--wait-ms", 20000)));
    bool revoked = false;
    if (g->revocable()) {
        auto [order, rec, tec] = co_await asio::experimental::make_parallel_group(g->async_wait_revocation(asio::deferred),
                                                                                  t.async_wait(asio::deferred))
                                     .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
        revoked = order[0] == 0 && !rec;
    } else {
        co_await t.async_wait(use_tuple);
    }
    say(revoked ? "revoked" : g->lost() ? "lost" : "not-revoked");
    co_await g->release();
}

// Writes V into R as a stale holder would: fenced or plain, retrying connection trouble.
asio::awaitable<void> run_write(zkcoro::client& c, const options& o)
{
    const auto resource = o.get("--resource");
    const auto value = o.get("--value");
    const auto mode = o.get("--mode");
    if (mode != "fenced" && mode != "plain" && mode != "checked")
        throw usage_error("--mode must be fenced, checked or plain");
    auto [cec, cr] = co_await c.async_create(resource, "init", zkcoro::create_mode::persistent, use_tuple);
    if (cec && cec != zkcoro::zk_errc::node_exists)
        throw boost::system::system_error(cec);
    zkcoro::mutex m(c, o.get("--path"));
    auto g = co_await m.acquire(30s);
    if (!g)
        throw std::runtime_error("not acquired within 30 s");
    say(fmt::format("held {} 0x{:x}", g->node_path(), static_cast<std::uint64_t>(g->session_id())));
    if (o.freeze)
        ::raise(SIGSTOP);  // frozen here, holding the lock as far as this process knows
    const auto end = std::chrono::steady_clock::now() + 30s;
    const std::string lock_node = g->node_path();
    // At most 20 attempts in 30 s, 200 ms apart.
    for (int attempt = 1; attempt <= 20 && std::chrono::steady_clock::now() < end; ++attempt) {
        zkcoro::error_code ec;
        std::vector<zkcoro::multi_result> results;
        if (mode == "fenced") {
            std::vector<zkcoro::multi_op> ops{zkcoro::set_data_op{resource, value, -1}};
            std::tie(ec, results) = co_await g->async_multi(std::move(ops), use_tuple);
        } else if (mode == "checked") {
            // The transaction guard::async_multi sends, sent by hand: the server's check alone
            // decides, whatever this process knows about its lock.
            std::vector<zkcoro::multi_op> ops{zkcoro::check_op{lock_node, -1}, zkcoro::set_data_op{resource, value, -1}};
            std::tie(ec, results) = co_await c.async_multi(std::move(ops), use_tuple);
        } else {
            std::tie(ec, std::ignore) = co_await c.async_set_data(resource, value, -1, use_tuple);
        }
        if (!ec) {
            say("write accepted");
            break;
        }
        fmt::print(stderr, "zkcoro-elect: write attempt {}: {}\n", attempt, ec.message());
        if (ec == zkcoro::client_errc::lock_lost) {
            say("write rejected: lock lost");
            break;
        }
        if (ec == zkcoro::zk_errc::no_node && !results.empty() && results.front().ec == zkcoro::zk_errc::no_node) {
            say("write rejected: check failed: no node");
            break;
        }
        if (!zkcoro::is_retriable(ec) && !zkcoro::is_session_lost(ec)) {
            say(fmt::format("write rejected: {}", ec.message()));
            break;
        }
        co_await sleep_for(200ms);  // connection trouble: the client reconnects (a new session after expiry)
    }
    co_await g->async_release(use_tuple);
}

int run(const options& o)
{
    if (o.mode == "now") {
        say(std::to_string(monotonic_ns()));
        return 0;
    }
    const auto budget = std::chrono::milliseconds(o.num("--duration-ms", 120000));
    const auto end = std::chrono::steady_clock::now() + budget;
    int fd = -1;
    if (o.mode == "latch" || o.mode == "selector") {
        fd = ::open(o.get("--events").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0)
            throw std::runtime_error(fmt::format("cannot open {}: {}", o.get("--events"), std::strerror(errno)));
    } else if (o.mode != "hold" && o.mode != "revoke" && o.mode != "write" && o.mode != "get") {
        throw usage_error(fmt::format("unknown mode {}", o.mode));
    }
    asio::io_context ioc;
    zkcoro::client c(ioc.get_executor(), config(o));
    std::exception_ptr error;
    bool finished = false;
    asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
        co_await c.async_connect();
        if (o.mode == "latch")
            co_await run_latch(c, o, fd, end);
        else if (o.mode == "selector")
            co_await run_selector(c, o, fd, end);
        else if (o.mode == "hold")
            co_await run_hold(c, o);
        else if (o.mode == "write")
            co_await run_write(c, o);
        else if (o.mode == "revoke")
            co_await zkcoro::async_request_revoke(c, o.get("--node"));
        else if (o.mode == "get")
            say((co_await c.async_get_data(o.get("--node"))).data);
        co_await c.async_close(use_tuple);
        finished = true;
    }, [&](std::exception_ptr e) {
        if (e) {
            error = e;
            c.close();
        }
    });
    ioc.run_for(budget + 60s);  // bounded: the mode's own limits, plus slack
    if (fd >= 0)
        ::close(fd);
    if (error)
        std::rethrow_exception(error);
    if (!finished) {
        fmt::print(stderr, "zkcoro-elect: {} did not finish in time\n", o.mode);
        return 2;
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv)
{
    try {
        return run(parse(argc, argv));
    } catch (const usage_error& e) {
        fmt::print(stderr, "zkcoro-elect: {}\n(see the comment at the top of tests/interop/zkcoro_elect.cpp)\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        fmt::print(stderr, "zkcoro-elect: error: {}\n", e.what());
        return 2;
    }
}
