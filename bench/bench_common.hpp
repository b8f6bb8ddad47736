// What zkcoro-cycle-bench and zkcoro-lock-bench share: the common parts of their command lines
// (CLI11) with the loopback check, the time limit and its watchdog, latency statistics, the
// zkcoro client's settings and the run on one thread. Each benchmark is a single translation
// unit that includes this once.
#pragma once

#include <zkcoro/client.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

namespace zkbench {

using clock_type = std::chrono::steady_clock;

struct bench_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// ---------------------------------------------------------------------------------------------
// Options

// The default server: $ZK_CONNECT if set and not empty, else 127.0.0.1:2181.
inline std::string default_connect()
{
    const char* env = std::getenv("ZK_CONNECT");
    return (env && *env) ? env : "127.0.0.1:2181";
}

// Whether "[127.0.0.1]:PORT" (an IPv4 address in brackets) counts as loopback.
enum class bracketed_ipv4 { accept, reject };

// Reads all of `s` as a decimal integer: std::errc::invalid_argument if it is not one (spaces, a
// '+' and other bases included), std::errc::result_out_of_range if it does not fit in a long.
inline std::errc parse_decimal(std::string_view s, long& out)
{
    const char* end = s.data() + s.size();
    auto [stop, ec] = std::from_chars(s.data(), end, out);
    if (ec == std::errc() && stop != end)
        return std::errc::invalid_argument;
    return ec;
}

// Integer options are decimal: CLI11 itself would read "010" as octal and "0x10" as hexadecimal.
// A transform, so it runs before CLI11's conversion and the range check: it rewrites a decimal
// value in canonical form ("007" becomes "7") and rejects anything else.
inline CLI::Validator decimal_integer()
{
    return CLI::Validator(
        [](std::string& v) -> std::string {
            long x = 0;
            const auto ec = parse_decimal(v, x);
            if (ec == std::errc::result_out_of_range)
                return fmt::format("\"{}\" is out of range", v);
            if (ec != std::errc())
                return fmt::format("expected a decimal integer, got \"{}\"", v);
            v = std::to_string(x);
            return {};
        },
        "", "decimal");
}

// The --connect value: one loopback HOST:PORT (127.0.0.0/8, ::1, localhost). A transform, so
// that the options hold the numeric form the check has found.
inline CLI::Validator loopback_only(bracketed_ipv4 bracketed_v4)
{
    return CLI::Validator(
        [bracketed_v4](std::string& s) -> std::string {
            auto colon = s.rfind(':');
            if (colon == std::string::npos || colon == 0 || colon + 1 == s.size())
                return fmt::format("expected one HOST:PORT, got \"{}\"", s);
            std::string host = s.substr(0, colon);
            std::string port = s.substr(colon + 1);
            long port_number = 0;
            if (parse_decimal(port, port_number) != std::errc() || port_number < 1 || port_number > 65535)
                return fmt::format("expected a port in [1, 65535], got \"{}\"", port);
            if (host == "localhost")
                host = "127.0.0.1";
            bool bracketed = host.size() > 2 && host.front() == '[' && host.back() == ']';
            if (bracketed)
                host = host.substr(1, host.size() - 2);
            in_addr v4{};
            in6_addr v6{};
            if ((!bracketed || bracketed_v4 == bracketed_ipv4::accept) && inet_pton(AF_INET, host.c_str(), &v4) == 1 &&
                (ntohl(v4.s_addr) >> 24) == 127) {
                s = host + ":" + port;
                return {};
            }
            if (inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6)) {
                s = "[" + host + "]:" + port;
                return {};
            }
            return fmt::format("\"{}\" is not a loopback HOST:PORT (this benchmark runs against a local server "
                               "only)", s);
        },
        "", "loopback");
}

// The comma-separated parts of `s` ("" gives one empty part).
inline std::vector<std::string> split_commas(const std::string& s)
{
    std::vector<std::string> out;
    for (std::size_t from = 0; from <= s.size();) {
        auto comma = s.find(',', from);
        if (comma == std::string::npos)
            comma = s.size();
        out.push_back(s.substr(from, comma - from));
        from = comma + 1;
    }
    return out;
}

// A comma-separated list of loopback HOST:PORT (a ZooKeeper connect string without chroot), each
// as loopback_only takes it.
inline CLI::Validator loopback_list(bracketed_ipv4 bracketed_v4)
{
    return CLI::Validator(
        [bracketed_v4](std::string& s) -> std::string {
            const auto one = loopback_only(bracketed_v4);
            std::string out;
            for (auto part : split_commas(s)) {
                if (auto error = one(part); !error.empty())
                    return error;
                out += (out.empty() ? "" : ",") + part;
            }
            s = out;
            return {};
        },
        "", "loopback list");
}

// Whether --connect takes one server or a list (an ensemble's members).
enum class connect_servers { one, list };

// The help's layout: options and their values in the first 26 columns (room for the widest),
// descriptions up to column 100.
inline constexpr std::size_t help_option_width = 26;
inline constexpr std::size_t help_width = 100;

// Adds option `name`: a decimal integer in [lo, hi], read into `field`. The help states the range
// and the default: `field`'s value on entry, or `default_text` when one is given (a default that
// is worked out from other options). `unit` names the value (N, MS, SECONDS).
inline CLI::Option* add_integer(CLI::App& app, const std::string& name, long& field, long lo, long hi,
                                const std::string& unit, std::string_view help, std::string_view default_text = {})
{
    // The range and the default end the help's last line, or take a line of their own where
    // that line would pass the help's width.
    auto limits = fmt::format("({} to {}; default {})", lo, hi,
                              default_text.empty() ? std::to_string(field) : std::string(default_text));
    auto newline = help.rfind('\n');
    auto last_line = newline == std::string_view::npos ? help : help.substr(newline + 1);
    bool fits = help_option_width + last_line.size() + 1 + limits.size() <= help_width;
    // The help text states the range: the check's own description would repeat it.
    return app.add_option(name, field, fmt::format("{}{}{}", help, fits ? " " : "\n", limits))
        ->type_name(unit)
        ->transform(decimal_integer())
        ->check(CLI::Range(lo, hi).description(""));
}

// What both benchmarks' command lines share; call it before adding any other option. A repeated
// option takes its last value (CLI11 would reject the repetition), so that an option appended to
// a script's list overrides the one before. --connect goes to `connect`.
inline void add_shared_options(CLI::App& app, std::string& connect, bracketed_ipv4 bracketed_v4,
                               connect_servers servers = connect_servers::one)
{
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    app.get_formatter()->column_width(help_option_width);
    connect = default_connect();
    const bool list = servers == connect_servers::list;
    const auto loopback = list ? loopback_list(bracketed_v4) : loopback_only(bracketed_v4);
    auto* option = app.add_option("--connect", connect,
                                  list ? "Loopback ZooKeeper servers, comma-separated (default: $ZK_CONNECT, else "
                                         "127.0.0.1:2181)"
                                       : "Loopback ZooKeeper server (default: $ZK_CONNECT, else 127.0.0.1:2181)")
                       ->type_name(list ? "HOST:PORT[,...]" : "HOST:PORT")
                       ->transform(loopback);
    // CLI11 checks only the values given: the default, which may come from $ZK_CONNECT, is
    // checked once the parse is done. Not while parsing it, so that --help still works.
    app.callback([option, loopback, &connect] {
        if (option->count() > 0)
            return;
        if (auto error = loopback(connect); !error.empty())
            throw CLI::ValidationError("$ZK_CONNECT", error);
    });
}

// Parses argv with `app`: --help (-h) prints the help and ends the process (status 0); whatever
// CLI11 rejects becomes a bench_error with its message.
inline void parse_command_line(CLI::App& app, int argc, char** argv)
{
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0)
            std::exit(app.exit(e));
        throw bench_error(fmt::format("{} (see --help)", e.what()));
    }
}

// ---------------------------------------------------------------------------------------------
// Time limit

inline clock_type::time_point g_deadline;  // the soft limit: every wait and loop checks it

inline void check_deadline(std::string_view what)
{
    if (clock_type::now() > g_deadline)
        throw bench_error(fmt::format("time limit exceeded while {}", what));
}

// What is left of the time limit, as a lock-wait timeout (at least 1 ms).
inline clock_type::duration time_left()
{
    return std::max<clock_type::duration>(g_deadline - clock_type::now(), std::chrono::milliseconds(1));
}

// Tasks of a workload: counts the finished ones; the last one wakes the waiter.
struct task_group {
    explicit task_group(boost::asio::any_io_executor ex) : done_timer(ex) {}
    long tasks = 0, finished = 0;
    std::string first_error;
    boost::asio::steady_timer done_timer;

    void error(const std::string& e)
    {
        if (first_error.empty())
            first_error = e;
    }
    void task_done()
    {
        if (++finished == tasks)
            done_timer.cancel();
    }
    // Waits for every task: each one ends by the time limit (its lock waits time out then), so a
    // grace period after it suffices. Bounded in count too: one wake-up per task at most.
    boost::asio::awaitable<void> wait(std::string_view what)
    {
        const auto give_up = g_deadline + std::chrono::seconds(5);
        for (long wakeups = 0; finished < tasks && wakeups <= tasks + 1; ++wakeups) {
            if (clock_type::now() >= give_up)
                break;
            done_timer.expires_at(give_up);
            co_await done_timer.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
        }
        if (finished < tasks)
            throw bench_error(fmt::format("{}: only {} of {} tasks finished within the time limit", what, finished,
                                          tasks));
    }
};

// Ends the process (status 3) if the run, cleanup included, outlasts a hard limit: the last
// resort against a wait that no check reaches.
class watchdog {
public:
    // `program` must outlive the watchdog (a string literal).
    watchdog(const char* program, clock_type::time_point hard_deadline)
        : thread_([this, program, hard_deadline] {
              std::unique_lock lk(m_);
              if (!cv_.wait_until(lk, hard_deadline, [this] { return stop_; })) {
                  std::fprintf(stderr, "%s: hard time limit exceeded, aborting\n", program);
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
    std::thread thread_;  // last: started once the members it uses exist
};

// ---------------------------------------------------------------------------------------------
// Statistics

// User + system CPU time of the whole process, in microseconds.
inline double cpu_us()
{
    rusage ru{};
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        throw bench_error(fmt::format("getrusage: {}", std::strerror(errno)));
    auto us = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) * 1e6 + static_cast<double>(tv.tv_usec); };
    return us(ru.ru_utime) + us(ru.ru_stime);
}

// Resident set size of this process in bytes (from /proc/self/statm).
inline std::int64_t rss_bytes()
{
    std::ifstream statm("/proc/self/statm");
    long long pages_total = 0, pages_resident = 0;
    if (!(statm >> pages_total >> pages_resident))
        throw bench_error("cannot read /proc/self/statm");
    return static_cast<std::int64_t>(pages_resident) * static_cast<std::int64_t>(::sysconf(_SC_PAGESIZE));
}

struct latencies {
    std::vector<std::int64_t> ns;  // one latency per operation

    void add(clock_type::duration d) { ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count()); }
    double mean_us() const
    {
        if (ns.empty())
            return 0;
        double sum = 0;
        for (auto v : ns)
            sum += static_cast<double>(v);
        return sum / static_cast<double>(ns.size()) / 1e3;
    }
    // Nearest-rank percentile.
    double percentile_us(double p) const
    {
        if (ns.empty())
            return 0;
        auto sorted = ns;
        std::sort(sorted.begin(), sorted.end());
        auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
        rank = std::clamp<std::size_t>(rank, 1, sorted.size());
        return static_cast<double>(sorted[rank - 1]) / 1e3;
    }
    // When ZKCORO_BENCH_SAMPLES names a directory, writes every latency (us, one a line) to
    // <dir>/<impl>-<workload>.txt, for bench/plot.sh's distribution panel.
    void write_samples(std::string_view impl, std::string_view workload) const
    {
        const char* dir = std::getenv("ZKCORO_BENCH_SAMPLES");
        if (dir == nullptr || *dir == '\0')
            return;
        auto file = fmt::format("{}/{}-{}.txt", dir, impl, workload);
        std::ofstream out(file);
        for (auto v : ns)
            out << static_cast<double>(v) / 1e3 << '\n';
        if (!out)
            std::fprintf(stderr, "warning: could not write the samples to %s\n", file.c_str());
    }
};

// ---------------------------------------------------------------------------------------------
// The zkcoro client and the run

inline constexpr auto connect_timeout = std::chrono::seconds(10);

// A zkcoro client's settings for `connect`: warnings and errors logged to stderr.
inline zkcoro::client_config client_config(const std::string& connect)
{
    zkcoro::client_config cfg;
    cfg.connect_string = connect;
    cfg.session_timeout = std::chrono::seconds(30);  // the server clamps it to [2, 20] x tickTime
    cfg.connect_timeout = connect_timeout;
    cfg.log = [](zkcoro::log_level l, std::string_view m) {
        auto level = zkcoro::to_string(l);
        std::fprintf(stderr, "zkcoro %.*s: %.*s\n", static_cast<int>(level.size()), level.data(),
                     static_cast<int>(m.size()), m.data());
    };
    cfg.log_threshold = zkcoro::log_level::warn;
    return cfg;
}

// Runs the coroutine that make_task() returns on an io_context of this thread until it ends;
// returns its exception, if any.
template <class MakeTask>
std::exception_ptr run_on_this_thread(MakeTask&& make_task)
{
    std::exception_ptr failure;
    try {
        boost::asio::io_context ioc(1);
        boost::asio::co_spawn(ioc, make_task(), [&failure](std::exception_ptr e) { failure = e; });
        ioc.run();
    } catch (...) {
        failure = std::current_exception();
    }
    return failure;
}

// Prints "<program>: <what went wrong>" to stderr.
inline void print_failure(const char* program, std::exception_ptr failure)
{
    try {
        std::rethrow_exception(failure);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", program, e.what());
    } catch (...) {
        std::fprintf(stderr, "%s: unknown error\n", program);
    }
}

// A benchmark's main(): parses the options (exit status 2 on an error), sets the time limit from
// o.time_limit and a watchdog `hard_grace` after it, runs run(o, results) on this thread (status
// 1 if it fails), then returns finish(o, results). Errors go to stderr as "<program>: <why>".
template <class Options, class Results>
int bench_main(int argc, char** argv, const char* program, Options (*parse)(int, char**),
               clock_type::duration hard_grace, boost::asio::awaitable<void> (*run)(const Options&, Results&),
               int (*finish)(const Options&, const Results&))
{
    Options o;
    try {
        o = parse(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", program, e.what());
        return 2;
    }

    g_deadline = clock_type::now() + std::chrono::seconds(o.time_limit);
    watchdog dog(program, g_deadline + hard_grace);

    Results res;
    std::exception_ptr failure = run_on_this_thread([&] { return run(o, res); });
    if (failure) {
        print_failure(program, failure);
        return 1;
    }
    return finish(o, res);
}

}  // namespace zkbench
