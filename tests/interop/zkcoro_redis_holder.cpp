// zkcoro-redis-holder: zkcoro's Redis lock (zkcoro::redis_mutex) as a holder for the Redis interop
// test (tests/interop/interop_redis.sh), the counterpart of redis_py_holder.py, with its command
// line:
//
//   zkcoro-redis-holder --url URL --key KEY --holds N --hold-ms M --id ID --log FILE
//                       [--ttl-ms 10000] [--time-limit 120] [--gap-ms 0 (pause after each release)]
//
// Loops N times: acquire the lock on KEY (bounded by the time left), read the entry time, hold M
// ms, read the exit time, release. Each hold appends one line "<id> X <enter_ns> <exit_ns>" to FILE
// (std::chrono::steady_clock ns, that is CLOCK_MONOTONIC, the clock of Python's
// time.monotonic_ns()) with a single write(2) on a descriptor opened with O_APPEND. enter_ns is
// read after acquire() returned, exit_ns before release() is called: the logged interval lies
// inside the real hold. Prints "acquired=<count>" as the last line of stdout.
//
// Exit 0 when all N holds happened; 1 when the time limit ended the loop first, or the lock was
// lost during a hold (its TTL passed without renewal); 2 on bad usage, a connection that cannot be
// made, or another error. A watchdog thread ends the process (status 3) 15 s after the time limit.
#include <zkcoro/guard.hpp>
#include <zkcoro/redis.hpp>
#include <zkcoro/redis_mutex.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

constexpr std::string_view usage_text =
    "usage: zkcoro-redis-holder --url URL --key KEY --holds N --hold-ms M --id ID --log FILE\n"
    "         [--ttl-ms 10000] [--time-limit 120] [--gap-ms 0]\n";

struct usage_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct options {
    std::string url, key, id, log;
    long long holds = -1;
    long long hold_ms = -1;
    long long ttl_ms = 10000;
    long long time_limit = 120;  // seconds
    long long gap_ms = 0;        // pause after each release
};

long long number(std::string_view name, std::string_view val, long long lo, long long hi)
{
    long long v = 0;
    auto [p, ec] = std::from_chars(val.data(), val.data() + val.size(), v);
    if (ec != std::errc() || p != val.data() + val.size() || v < lo || v > hi)
        throw usage_error(fmt::format("{} must be a decimal integer in [{}, {}], not \"{}\"", name, lo, hi, val));
    return v;
}

options parse(int argc, char** argv)
{
    options o;
    for (int i = 1; i < argc; ++i) {
        std::string_view a = argv[i];
        if (a == "-h" || a == "--help") {
            std::fputs(usage_text.data(), stdout);
            std::exit(0);
        }
        if (i + 1 >= argc)
            throw usage_error(fmt::format("{} needs a value (or is unknown)", a));
        std::string_view v = argv[++i];
        if (a == "--url")
            o.url = v;
        else if (a == "--key")
            o.key = v;
        else if (a == "--id")
            o.id = v;
        else if (a == "--log")
            o.log = v;
        else if (a == "--holds")
            o.holds = number(a, v, 1, 1'000'000);
        else if (a == "--hold-ms")
            o.hold_ms = number(a, v, 0, 60'000);
        else if (a == "--ttl-ms")
            o.ttl_ms = number(a, v, 100, 86'400'000);
        else if (a == "--time-limit")
            o.time_limit = number(a, v, 1, 86'400);
        else if (a == "--gap-ms")
            o.gap_ms = number(a, v, 0, 60'000);
        else
            throw usage_error(fmt::format("unknown option {}", a));
    }
    if (o.url.empty() || o.key.empty() || o.id.empty() || o.log.empty() || o.holds < 0 || o.hold_ms < 0)
        throw usage_error("--url, --key, --holds, --hold-ms, --id and --log are required");
    if (o.id.find_first_of(" \t\n") != std::string::npos)
        throw usage_error("--id must not contain whitespace");
    if (o.ttl_ms <= o.hold_ms)
        throw usage_error("need --ttl-ms > --hold-ms");
    return o;
}

std::int64_t steady_ns()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now().time_since_epoch()).count();
}

// One line, one write(2): with O_APPEND the line lands whole at the end of the file.
void append_line(int fd, const std::string& line)
{
    for (;;) {
        const ssize_t n = ::write(fd, line.data(), line.size());
        if (n == static_cast<ssize_t>(line.size()))
            return;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            throw std::runtime_error(fmt::format("write to the log failed: {}", std::strerror(errno)));
        throw std::runtime_error(fmt::format("short write to the log ({} of {} bytes)", n, line.size()));
    }
}

// Ends the process (status 3) if it outlives `hard_deadline`: the last resort against a wait that
// nothing else bounds.
class watchdog {
public:
    explicit watchdog(clock_type::time_point hard_deadline)
        : thread_([this, hard_deadline] {
              std::unique_lock lk(m_);
              if (!cv_.wait_until(lk, hard_deadline, [this] { return stop_; })) {
                  std::fputs("zkcoro-redis-holder: hard time limit exceeded, aborting\n", stderr);
                  std::_Exit(3);
              }
          })
    {
    }
    ~watchdog()
    {
        {
            std::lock_guard lk(m_);
            stop_ = true;
        }
        cv_.notify_all();
        thread_.join();
    }
    watchdog(const watchdog&) = delete;
    watchdog& operator=(const watchdog&) = delete;

private:
    std::mutex m_;
    std::condition_variable cv_;
    bool stop_ = false;
    std::thread thread_;
};

struct outcome {
    long long acquired = 0;
    int status = 0;
};

asio::awaitable<void> hold_loop(const options& o, int fd, clock_type::time_point end, outcome& out)
{
    auto ex = co_await asio::this_coro::executor;
    zkcoro::redis_options ro;
    ro.log = [id = o.id](zkcoro::log_level l, std::string_view msg) {
        if (l > zkcoro::log_level::warn)
            return;
        std::fprintf(stderr, "%s: zkcoro %.*s\n", id.c_str(), static_cast<int>(msg.size()), msg.data());
    };
    zkcoro::redis_client rc(ex, o.url, ro);
    auto [ec] = co_await rc.async_connect(asio::as_tuple(asio::use_awaitable));
    if (ec)
        throw std::runtime_error(fmt::format("connect to {}: {} ({})", o.url, ec.message(), rc.last_error()));
    zkcoro::redis_mutex_options mo;
    mo.ttl = std::chrono::milliseconds(o.ttl_ms);
    zkcoro::redis_mutex m(rc, o.key, mo);
    while (out.acquired < o.holds) {
        const auto left = end - clock_type::now();
        std::optional<zkcoro::guard> g;
        if (left > clock_type::duration::zero())
            g = co_await m.acquire(left);
        if (!g) {
            std::fprintf(stderr, "%s: time limit reached after %lld of %lld holds\n", o.id.c_str(), out.acquired,
                         o.holds);
            out.status = 1;
            break;
        }
        const auto enter = steady_ns();
        if (o.hold_ms > 0) {
            asio::steady_timer t(ex, std::chrono::milliseconds(o.hold_ms));
            co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
        }
        const auto exit = steady_ns();
        const bool lost = g->lost();
        append_line(fd, fmt::format("{} X {} {}\n", o.id, enter, exit));
        ++out.acquired;
        co_await g->release();
        if (o.gap_ms > 0) {
            asio::steady_timer t(ex, std::chrono::milliseconds(o.gap_ms));
            co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
        }
        if (lost) {
            std::fprintf(stderr, "%s: the lock was lost during hold %lld (its TTL passed)\n", o.id.c_str(),
                         out.acquired);
            out.status = 1;
            break;
        }
    }
}

}  // namespace

int main(int argc, char** argv)
{
    options o;
    try {
        o = parse(argc, argv);
    } catch (const usage_error& e) {
        std::fprintf(stderr, "zkcoro-redis-holder: %s\n%s", e.what(), usage_text.data());
        return 2;
    }
    const auto end = clock_type::now() + std::chrono::seconds(o.time_limit);
    watchdog dog(end + 15s);
    const int fd = ::open(o.log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        std::fprintf(stderr, "zkcoro-redis-holder: cannot open %s: %s\n", o.log.c_str(), std::strerror(errno));
        return 2;
    }
    outcome out;
    std::exception_ptr failure;
    try {
        asio::io_context ioc(1);
        asio::co_spawn(ioc, hold_loop(o, fd, end, out), [&failure](std::exception_ptr e) { failure = e; });
        ioc.run();
    } catch (...) {
        failure = std::current_exception();
    }
    ::close(fd);
    std::printf("acquired=%lld\n", out.acquired);
    std::fflush(stdout);
    if (failure) {
        try {
            std::rethrow_exception(failure);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "zkcoro-redis-holder %s: %s\n", o.id.c_str(), e.what());
        }
        return 2;
    }
    return out.status;
}
