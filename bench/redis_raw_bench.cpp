// The raw floors of the Redis lock: hiredis' synchronous API used directly, doing a lock's two
// requests per cycle. Two floors (--floors):
//
//   plain (impl=redis_raw, issue 14)
//     acquire   SET key token NX PX ttl                      (reply +OK)
//     release   EVAL <compare-and-delete> 1 key token        (reply :1)
//   with the release script
//     if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end
//
//   fenced (impl=redis_fenced, issue 33: the same work as zkcoro::redis_mutex)
//     acquire   EVALSHA <acquire> 2 key key:fencing value ttl        (reply [1, fencing token])
//     release   EVALSHA <release> 1 key value key:released           (reply :1)
//   with the library's own scripts (bench/redis_fenced_scripts.hpp, checked against
//   src/redis/lock_scripts.cpp by bench/redis_script_check.cpp): the acquire script checks the
//   fencing counter and the holder, and sets the counter to max(counter + 1, TIME in us) and the
//   key; the release script is compare-and-delete then PUBLISH on key:released. Loaded once with
//   SCRIPT LOAD, then EVALSHA, as the library sends them (it sends EVAL the first time a
//   connection runs a script). Values look like the library's ("<36-char name>:<task>:<n>"),
//   fencing tokens must increase.
//
// Workloads (letters as in bench/run.sh):
//   uncontended      a. one cycle at a time on one key: latency per cycle (p50, p99), cycles/s.
//   cycle_pipelined  the pipelined floor: --inflight keys, each always with one request in flight
//                    (its SET, then once that is answered its EVAL, then the next SET...), for
//                    --pipeline-ms: the cycles/s the server allows.
//   many_locks       d. --tasks cycles in flight as above, each on a uniformly random key of --keys
//                    (never one that is in flight already), for --duration-ms. Plain floor only.
// With both floors, each workload runs the plain one and then the fenced one.
// Every reply is checked (a SET that is not OK or a release that deletes nothing fails the run).
// Every loop is bounded by its count or duration and by --time-limit, enforced at last by a
// watchdog thread. Prints RESULT lines in the format of the other benchmarks.
#include "bench_common.hpp"
#include "redis_fenced_scripts.hpp"

#include <hiredis/hiredis.h>

#include <sys/time.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace {

using zkbench::bench_error;
using zkbench::clock_type;
using namespace std::chrono_literals;

constexpr const char* program = "zkcoro-redis-raw-bench";
constexpr std::string_view release_script =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

struct options {
    std::string url;
    long cycles = 20000;
    long warmup = 1000;
    long inflight = 64;
    long pipeline_ms = 3000;
    long keys = 1000;
    long tasks = 50;
    long duration_ms = 3000;
    long ttl_ms = 10000;
    long time_limit = 300;
    bool evalsha = false;
    bool plain = true, fenced = true;  // --floors
    std::vector<std::string> workloads;
};

struct endpoint {
    std::string host;
    int port = 6379;
    std::string password;
    long db = 0;
};

// redis://[password@]host:port[/db] with a loopback host only (127.0.0.0/8 or localhost).
endpoint parse_url(const std::string& url)
{
    constexpr std::string_view scheme = "redis://";
    if (url.rfind(scheme, 0) != 0)
        throw bench_error(fmt::format("--url: expected redis://[password@]HOST:PORT[/db], got \"{}\"", url));
    std::string rest = url.substr(scheme.size());
    endpoint e;
    if (auto at = rest.rfind('@'); at != std::string::npos) {
        e.password = rest.substr(0, at);
        rest = rest.substr(at + 1);
    }
    if (auto slash = rest.find('/'); slash != std::string::npos) {
        if (zkbench::parse_decimal(rest.substr(slash + 1), e.db) != std::errc() || e.db < 0)
            throw bench_error(fmt::format("--url: bad database number in \"{}\"", url));
        rest = rest.substr(0, slash);
    }
    auto colon = rest.rfind(':');
    if (colon == std::string::npos || colon == 0)
        throw bench_error(fmt::format("--url: expected HOST:PORT in \"{}\"", url));
    e.host = rest.substr(0, colon);
    long port = 0;
    if (zkbench::parse_decimal(rest.substr(colon + 1), port) != std::errc() || port < 1 || port > 65535)
        throw bench_error(fmt::format("--url: bad port in \"{}\"", url));
    e.port = static_cast<int>(port);
    if (e.host == "localhost")
        e.host = "127.0.0.1";
    if (e.host.rfind("127.", 0) != 0)
        throw bench_error(fmt::format("--url: \"{}\" is not on loopback (this benchmark runs against a local "
                                      "server only)",
                                      url));
    return e;
}

options parse_options(int argc, char** argv)
{
    options o;
    const char* env = std::getenv("ZKCORO_TEST_REDIS");
    o.url = (env && *env) ? env : "redis://127.0.0.1:6379";
    std::string workloads = "uncontended,cycle_pipelined,many_locks";
    std::string floors = "plain,fenced";
    CLI::App app("Raw hiredis floors of the Redis lock: SET NX PX + EVAL compare-and-delete (plain), and the\n"
                 "library's fenced acquire and release scripts by EVALSHA (fenced)");
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    app.get_formatter()->column_width(zkbench::help_option_width);
    app.add_option("--url", o.url, "Loopback server (default: $ZKCORO_TEST_REDIS, else redis://127.0.0.1:6379)")
        ->type_name("redis://[PW@]HOST:PORT[/DB]");
    app.add_option("--workloads", workloads, "Comma-separated: uncontended, cycle_pipelined, many_locks (default: all)");
    zkbench::add_integer(app, "--cycles", o.cycles, 1, 10'000'000, "N", "Uncontended: cycles measured");
    zkbench::add_integer(app, "--warmup", o.warmup, 0, 10'000'000, "N", "Uncontended: cycles before measuring");
    zkbench::add_integer(app, "--inflight", o.inflight, 1, 10'000, "N", "Pipelined: keys with a cycle in flight");
    zkbench::add_integer(app, "--pipeline-ms", o.pipeline_ms, 10, 600'000, "MS", "Pipelined: run time");
    zkbench::add_integer(app, "--keys", o.keys, 1, 1'000'000, "K", "many_locks: keys");
    zkbench::add_integer(app, "--tasks", o.tasks, 1, 10'000, "T", "many_locks: cycles in flight");
    zkbench::add_integer(app, "--duration-ms", o.duration_ms, 10, 600'000, "MS", "many_locks: run time");
    zkbench::add_integer(app, "--ttl-ms", o.ttl_ms, 1, 86'400'000, "MS", "PX of every SET");
    zkbench::add_integer(app, "--time-limit", o.time_limit, 1, 86'400, "SECONDS",
                         "Whole run; a watchdog ends the process 15 s after it");
    app.add_flag("--evalsha", o.evalsha, "Plain floor: release with EVALSHA of the loaded script instead of EVAL");
    app.add_option("--floors", floors,
                   "Comma-separated: plain (SET NX PX), fenced (the library's scripts; not with many_locks)\n"
                   "(default: both)");
    zkbench::parse_command_line(app, argc, argv);
    (void)parse_url(o.url);  // a bad URL is a usage error (status 2)
    o.plain = o.fenced = false;
    for (std::string_view rest = floors; !rest.empty();) {
        auto comma = rest.find(',');
        auto f = rest.substr(0, comma);
        rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
        if (f == "plain")
            o.plain = true;
        else if (f == "fenced")
            o.fenced = true;
        else
            throw bench_error(fmt::format("--floors: unknown floor \"{}\" (plain, fenced)", f));
    }
    if (!o.plain && !o.fenced)
        throw bench_error("--floors: name at least one floor (plain, fenced)");
    std::string_view rest = workloads;
    while (!rest.empty()) {
        auto comma = rest.find(',');
        std::string w(rest.substr(0, comma));
        rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
        if (w != "uncontended" && w != "cycle_pipelined" && w != "many_locks")
            throw bench_error(fmt::format("--workloads: unknown workload \"{}\"", w));
        o.workloads.push_back(w);
    }
    if (o.keys < o.tasks * 2)
        throw bench_error("--keys must be at least twice --tasks (a key in flight is never drawn again)");
    return o;
}

// ---------------------------------------------------------------------------------------------

struct context_deleter {
    void operator()(redisContext* c) const noexcept { redisFree(c); }
};
struct reply_deleter {
    void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using context_ptr = std::unique_ptr<redisContext, context_deleter>;
using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;

std::string describe(const redisReply* r)
{
    switch (r->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
        return fmt::format("\"{}\"", std::string_view(r->str, r->len));
    case REDIS_REPLY_INTEGER:
        return fmt::format("integer {}", r->integer);
    case REDIS_REPLY_NIL:
        return "nil";
    default:
        return fmt::format("reply type {}", r->type);
    }
}

class connection {
public:
    explicit connection(const endpoint& e)
    {
        timeval tv{5, 0};
        c_.reset(redisConnectWithTimeout(e.host.c_str(), e.port, tv));
        if (!c_)
            throw bench_error("redisConnectWithTimeout: out of memory");
        if (c_->err)
            throw bench_error(fmt::format("connect to {}:{}: {}", e.host, e.port, c_->errstr));
        // Every blocking read is bounded.
        if (redisSetTimeout(c_.get(), tv) != REDIS_OK)
            throw bench_error("redisSetTimeout failed");
        if (!e.password.empty())
            expect_status(command({"AUTH", e.password}), "OK", "AUTH");
        if (e.db != 0)
            expect_status(command({"SELECT", std::to_string(e.db)}), "OK", "SELECT");
    }

    reply_ptr command(const std::vector<std::string_view>& args)
    {
        fill(args);
        reply_ptr r(static_cast<redisReply*>(
            redisCommandArgv(c_.get(), static_cast<int>(argv_.size()), argv_.data(), lens_.data())));
        if (!r)
            throw bench_error(fmt::format("{}: {}", args[0], c_->errstr));
        return r;
    }
    void append(const std::vector<std::string_view>& args)
    {
        fill(args);
        if (redisAppendCommandArgv(c_.get(), static_cast<int>(argv_.size()), argv_.data(), lens_.data()) != REDIS_OK)
            throw bench_error(fmt::format("append {}: {}", args[0], c_->errstr));
    }
    // The next reply in order (flushes what was appended when none is buffered).
    reply_ptr next_reply()
    {
        void* raw = nullptr;
        if (redisGetReply(c_.get(), &raw) != REDIS_OK || raw == nullptr)
            throw bench_error(fmt::format("reading a reply: {}", c_->errstr));
        return reply_ptr(static_cast<redisReply*>(raw));
    }

    static void expect_status(const reply_ptr& r, std::string_view want, std::string_view what)
    {
        if (r->type != REDIS_REPLY_STATUS || std::string_view(r->str, r->len) != want)
            throw bench_error(fmt::format("{}: expected {}, got {}", what, want, describe(r.get())));
    }
    static void expect_integer(const reply_ptr& r, long long want, std::string_view what)
    {
        if (r->type != REDIS_REPLY_INTEGER || r->integer != want)
            throw bench_error(fmt::format("{}: expected integer {}, got {}", what, want, describe(r.get())));
    }

private:
    void fill(const std::vector<std::string_view>& args)
    {
        argv_.clear();
        lens_.clear();
        for (auto a : args) {
            argv_.push_back(a.data());
            lens_.push_back(a.size());
        }
    }
    context_ptr c_;
    std::vector<const char*> argv_;
    std::vector<std::size_t> lens_;
};

struct series : zkbench::latencies {
    std::int64_t cycles = 0;
    double seconds = 0;
    double cpu_us = 0;
    double per_s() const { return seconds > 0 ? static_cast<double>(cycles) / seconds : 0; }
    double cpu_per_cycle_us() const { return cycles > 0 ? cpu_us / static_cast<double>(cycles) : 0; }
};

// A lock's key and the names the fenced floor derives from it once (as the library does per
// lock object): the fencing counter and the release channel.
struct lock_keys {
    std::string key, fence_key, channel;
    explicit lock_keys(std::string k) : key(std::move(k)), fence_key(key + ":fencing"), channel(key + ":released") {}
};

std::string load_script(connection& conn, std::string_view text)
{
    auto r = conn.command({"SCRIPT", "LOAD", text});
    if (r->type != REDIS_REPLY_STRING)
        throw bench_error(fmt::format("SCRIPT LOAD: got {}", describe(r.get())));
    return std::string(r->str, r->len);
}

// The lock's two requests: acquire and release of a key with `token`, by one floor; and the
// checks of their replies.
class lock_protocol {
public:
    lock_protocol(connection& conn, const options& o, bool fenced) : ttl_(std::to_string(o.ttl_ms)), fenced_(fenced)
    {
        if (fenced_) {
            acquire_sha_ = load_script(conn, zkbench::fenced::acquire_script);
            release_sha_ = load_script(conn, zkbench::fenced::release_script);
        } else if (o.evalsha) {
            release_sha_ = load_script(conn, release_script);
        }
    }
    bool fenced() const { return fenced_; }
    std::string_view impl() const { return fenced_ ? "redis_fenced" : "redis_raw"; }
    // A new value: the library's shape for the fenced floor, issue 14's for the plain one.
    std::string token(std::int64_t n) const
    {
        if (fenced_)
            return fmt::format("{:08x}-0000-4000-8000-000000000000:1:{}", ::getpid(), n);
        return fmt::format("raw-{}-{}", ::getpid(), n);
    }
    std::vector<std::string_view> acquire(const lock_keys& k, std::string_view token) const
    {
        if (fenced_)
            return {"EVALSHA", acquire_sha_, "2", k.key, k.fence_key, token, ttl_};
        return {"SET", k.key, token, "NX", "PX", ttl_};
    }
    std::vector<std::string_view> release(const lock_keys& k, std::string_view token) const
    {
        if (fenced_)
            return {"EVALSHA", release_sha_, "1", k.key, token, k.channel};
        if (release_sha_.empty())
            return {"EVAL", release_script, "1", k.key, token};
        return {"EVALSHA", release_sha_, "1", k.key, token};
    }
    // Fails unless the reply grants the key; for the fenced floor, returns the fencing token and
    // checks that it is above `last` (that key's previous token, 0 for none).
    std::int64_t check_acquired(const reply_ptr& r, std::int64_t last, std::string_view what) const
    {
        if (!fenced_) {
            connection::expect_status(r, "OK", what);
            return 0;
        }
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_INTEGER ||
            r->element[0]->integer != 1 || r->element[1]->type != REDIS_REPLY_INTEGER)
            throw bench_error(fmt::format("{}: expected [1, fencing token], got {}", what,
                                          r->type == REDIS_REPLY_ARRAY && r->elements >= 1
                                              ? fmt::format("an array of {} starting with {}", r->elements,
                                                            describe(r->element[0]))
                                              : describe(r.get())));
        const std::int64_t token = r->element[1]->integer;
        if (token <= last)
            throw bench_error(fmt::format("{}: fencing token {} not above the previous one, {}", what, token, last));
        return token;
    }
    void check_released(const reply_ptr& r, std::string_view what) const { connection::expect_integer(r, 1, what); }

private:
    std::string ttl_;
    bool fenced_;
    std::string acquire_sha_, release_sha_;
};

std::string key_prefix(const lock_protocol& lock)
{
    return fmt::format("zkbench:{}:{}:", lock.fenced() ? "fenced" : "raw", ::getpid());
}

// a. One cycle at a time on one key.
series uncontended(connection& conn, const lock_protocol& lock, const options& o)
{
    const lock_keys keys(key_prefix(lock) + "a");
    series s;
    s.ns.reserve(static_cast<std::size_t>(o.cycles));
    std::int64_t last_token = 0;
    auto cycle = [&](long i) {
        const std::string token = lock.token(i);
        last_token = lock.check_acquired(conn.command(lock.acquire(keys, token)), last_token, "acquire");
        lock.check_released(conn.command(lock.release(keys, token)), "release script");
    };
    for (long i = 0; i < o.warmup; ++i) {
        zkbench::check_deadline("warming up");
        cycle(i);
    }
    const double cpu0 = zkbench::cpu_us();
    const auto t0 = clock_type::now();
    for (long i = 0; i < o.cycles; ++i) {
        if ((i & 255) == 0)
            zkbench::check_deadline("running uncontended");
        const auto c0 = clock_type::now();
        cycle(o.warmup + i);
        s.add(clock_type::now() - c0);
    }
    s.seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
    s.cpu_us = zkbench::cpu_us() - cpu0;
    s.cycles = o.cycles;
    return s;
}

// `slots` cycles in flight on one connection for `duration`: each slot has exactly one request
// outstanding, its SET or (once the SET is answered) its EVAL. Replies come in order, so a FIFO of
// slot numbers says whose reply is next. next_key(slot) picks the key of a slot's next cycle.
template <class NextKey>
series pipelined(connection& conn, const lock_protocol& lock, long slots, std::chrono::milliseconds duration,
                 NextKey&& next_key, std::string_view what)
{
    struct slot_state {
        std::optional<lock_keys> keys;
        std::string token;
        std::int64_t last_token = 0;  // the fencing token of this slot's key's last grant
        bool releasing = false;
        clock_type::time_point started;
    };
    std::vector<slot_state> state(static_cast<std::size_t>(slots));
    std::vector<std::size_t> fifo(static_cast<std::size_t>(slots));  // ring of slot numbers
    std::size_t head = 0, count = 0;
    std::int64_t serial = 0;
    auto push = [&](std::size_t i) {
        fifo[(head + count) % fifo.size()] = i;
        ++count;
    };
    auto start_cycle = [&](std::size_t i, clock_type::time_point now) {
        auto& st = state[i];
        std::string key = next_key(i);
        if (!st.keys || st.keys->key != key) {
            st.keys.emplace(std::move(key));
            st.last_token = 0;
        }
        st.token = lock.token(serial++);
        st.releasing = false;
        st.started = now;
        conn.append(lock.acquire(*st.keys, st.token));
        push(i);
    };

    series s;
    const double cpu0 = zkbench::cpu_us();
    const auto t0 = clock_type::now();
    const auto end = t0 + duration;
    for (std::size_t i = 0; i < state.size(); ++i)
        start_cycle(i, t0);
    bool stopping = false;
    std::int64_t replies = 0;
    while (count > 0) {
        const std::size_t i = fifo[head];
        head = (head + 1) % fifo.size();
        --count;
        auto r = conn.next_reply();
        auto& st = state[i];
        const auto now = clock_type::now();
        if ((++replies & 1023) == 0)
            zkbench::check_deadline(what);
        if (!st.releasing) {
            st.last_token = lock.check_acquired(r, st.last_token, "acquire (pipelined)");
            st.releasing = true;
            conn.append(lock.release(*st.keys, st.token));
            push(i);
            continue;
        }
        lock.check_released(r, "release script (pipelined)");
        if (!stopping) {
            ++s.cycles;
            s.add(now - st.started);
        }
        stopping = stopping || now >= end;
        if (!stopping)
            start_cycle(i, now);
    }
    s.seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
    s.cpu_us = zkbench::cpu_us() - cpu0;
    return s;
}

void print_result(std::string_view impl, std::string_view workload, const series& s, std::string_view extra)
{
    fmt::print("RESULT impl={} workload={} ops_per_s={:.1f} p50_us={:.1f} p99_us={:.1f} mean_us={:.1f} "
               "cpu_us_per_op={:.1f}{}\n",
               impl, workload, s.per_s(), s.percentile_us(50), s.percentile_us(99), s.mean_us(), s.cpu_per_cycle_us(),
               extra);
    std::fflush(stdout);
}

// The keys a run leaves behind: the fenced floor's fencing counters (the library keeps its own,
// forever, on purpose: the counter must outlive the lock). Deleted by SCAN + DEL, bounded.
void remove_fencing_keys(connection& conn, const std::string& prefix)
{
    std::string cursor = "0";
    const std::string match = prefix + "*:fencing";
    for (int round = 0; round < 100'000; ++round) {
        auto r = conn.command({"SCAN", cursor, "MATCH", match, "COUNT", "1000"});
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_STRING ||
            r->element[1]->type != REDIS_REPLY_ARRAY)
            throw bench_error(fmt::format("SCAN: got {}", describe(r.get())));
        cursor.assign(r->element[0]->str, r->element[0]->len);
        if (r->element[1]->elements > 0) {
            std::vector<std::string_view> del{"DEL"};
            for (std::size_t i = 0; i < r->element[1]->elements; ++i)
                del.emplace_back(r->element[1]->element[i]->str, r->element[1]->element[i]->len);
            (void)conn.command(del);
        }
        if (cursor == "0")
            return;
    }
    throw bench_error("SCAN for the fencing keys did not finish in 100000 rounds");
}

int run(const options& o)
{
    const endpoint e = parse_url(o.url);
    connection conn(e);
    std::vector<lock_protocol> floors;
    if (o.plain)
        floors.emplace_back(conn, o, false);
    if (o.fenced)
        floors.emplace_back(conn, o, true);
    fmt::print("{}: server {}:{}, {}{}, PX {} ms\n", program, e.host, e.port,
               o.plain ? fmt::format("plain floor's release by {}", o.evalsha ? "EVALSHA" : "EVAL") : "",
               o.fenced ? std::string(o.plain ? "; fenced floor by EVALSHA" : "fenced floor by EVALSHA") : "",
               o.ttl_ms);
    struct fencing_cleanup {  // also when a workload fails
        connection& conn;
        bool fenced;
        ~fencing_cleanup()
        {
            if (!fenced)
                return;
            zkbench::g_deadline = std::max(zkbench::g_deadline, clock_type::now() + 5s);
            try {
                remove_fencing_keys(conn, fmt::format("zkbench:fenced:{}:", ::getpid()));
            } catch (const std::exception& ex) {
                std::fprintf(stderr, "%s: warning: removing the fencing keys: %s\n", program, ex.what());
            }
        }
    } cleanup{conn, o.fenced};
    for (const auto& w : o.workloads) {
        for (const auto& lock : floors) {
            const std::string prefix = key_prefix(lock);
            const auto name = lock.impl();
            if (w == "uncontended") {
                auto s = uncontended(conn, lock, o);
                fmt::print("{} uncontended: {} cycles, {:.1f} cycles/s, p50 {:.1f} us, p99 {:.1f} us, CPU {:.1f} "
                           "us/cycle\n",
                           name, s.cycles, s.per_s(), s.percentile_us(50), s.percentile_us(99), s.cpu_per_cycle_us());
                print_result(name, "uncontended", s,
                             fmt::format(" requests_per_op=2 script={}",
                                         lock.fenced() || o.evalsha ? "evalsha" : "eval"));
            } else if (w == "cycle_pipelined") {
                auto s = pipelined(
                    conn, lock, o.inflight, std::chrono::milliseconds(o.pipeline_ms),
                    [&](std::size_t i) { return fmt::format("{}p{}", prefix, i); }, "running cycle_pipelined");
                fmt::print("{} pipelined, {} cycles in flight: {} cycles in {:.2f} s, {:.1f} cycles/s\n", name,
                           o.inflight, s.cycles, s.seconds, s.per_s());
                print_result(name, "cycle_pipelined", s, fmt::format(" inflight={}", o.inflight));
            } else if (lock.fenced()) {
                continue;  // many_locks: the plain floor only
            } else {
                // d: a uniformly random key per cycle, never one in flight already.
                std::mt19937_64 rng(static_cast<std::uint64_t>(::getpid()));
                std::uniform_int_distribution<long> pick(0, o.keys - 1);
                std::vector<char> busy(static_cast<std::size_t>(o.keys), 0);
                std::vector<long> slot_key(static_cast<std::size_t>(o.tasks), -1);
                auto next_key = [&](std::size_t slot) {
                    if (slot_key[slot] >= 0)
                        busy[static_cast<std::size_t>(slot_key[slot])] = 0;
                    long k = pick(rng);
                    // Bounded: at most tasks keys are busy and keys >= 2 x tasks, so each draw hits a
                    // free key with probability >= 1/2.
                    for (int tries = 0; busy[static_cast<std::size_t>(k)] && tries < 10'000; ++tries)
                        k = pick(rng);
                    if (busy[static_cast<std::size_t>(k)])
                        throw bench_error("many_locks: no free key found");
                    busy[static_cast<std::size_t>(k)] = 1;
                    slot_key[slot] = k;
                    return fmt::format("{}d{}", prefix, k);
                };
                auto s = pipelined(conn, lock, o.tasks, std::chrono::milliseconds(o.duration_ms), next_key,
                                   "running many_locks");
                fmt::print("many_locks, {} keys, {} in flight: {} cycles in {:.2f} s, {:.1f} cycles/s\n", o.keys,
                           o.tasks, s.cycles, s.seconds, s.per_s());
                print_result(name, "many_locks", s, fmt::format(" keys={} tasks={}", o.keys, o.tasks));
            }
        }
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv)
{
    options o;
    try {
        o = parse_options(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", program, e.what());
        return 2;
    }
    zkbench::g_deadline = clock_type::now() + std::chrono::seconds(o.time_limit);
    zkbench::watchdog dog(program, zkbench::g_deadline + 15s);
    try {
        return run(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", program, e.what());
        return 1;
    }
}
