// Sequential latency and client CPU of one "cycle": create an ephemeral-sequential node under a
// parent, list the parent's children, delete the node. The implementations in one run:
//
//   raw        the single-threaded ZooKeeper C client used directly: its asynchronous API and a
//              minimal poll() loop over zookeeper_interest/zookeeper_process;
//   raw_watch  the same cycle plus an exists watch on its own node, sent with the listing once the
//              create is answered (issue 33: what zkcoro's held-node watch, the "lost" signal,
//              costs): 4 requests in 3 round trips, and the cycle ends once both the delete's
//              reply and the watch's deletion event are in. The floor of zkcoro::mutex;
//   zkcoro     zkcoro::client in a coroutine on an asio::io_context run by this one thread;
//   mutex      zkcoro::mutex acquire + release on its own path (workload a of the lock benchmark:
//              the same 3 requests in 2 round trips), so that a's ratios to raw and raw_watch come
//              from interleaved phases rather than from runs seconds apart. PAIRS prints the
//              median over the rounds of mutex/raw_watch CPU per cycle (issue 33).
//
// First one request at a time in each: rounds alternate them (and which goes first) so that
// machine noise hits both alike; a warm-up comes first. Then, pipelined: --inflight cycles at once
// (each one still create, then get_children, then delete) for --pipeline-ms each, raw first: the
// throughput the server allows. Every wait is bounded in count and by an overall time limit,
// enforced at last by a watchdog thread.
//
// Both clients set zoo_set_servers_resolution_delay(-1) (zkcoro does it in every client): with
// the library's default the host list is resolved again on each zookeeper_interest call.
//
// Both clients live on the calling thread. The raw one calls the C library without zkcoro's
// process-wide lock: that is safe here because no other thread calls into the library while the
// raw client runs (zkcoro only closes handles on a thread of its own, and we wait for that).
#include "bench_common.hpp"

#include <zkcoro/client.hpp>
#include <zkcoro/mutex.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fmt/format.h>

#include <zookeeper/zookeeper.h>

#include <poll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using zkbench::bench_error;
using zkbench::check_deadline;
using zkbench::clock_type;
using zkbench::connect_timeout;
using zkbench::g_deadline;

constexpr const char* program = "zkcoro-cycle-bench";

// ---------------------------------------------------------------------------------------------
// Options

struct options {
    std::string connect;
    long cycles = 2000;   // measured cycles per implementation, in total
    long rounds = 5;      // at least this many raw/zkcoro alternations
    long warmup = 200;    // unmeasured cycles per implementation first
    long inflight = 64;      // pipelined: cycles at once
    long pipeline_ms = 3000;  // pipelined: run time per implementation (0: skip)
    long time_limit = 120;  // seconds, for the whole run
    bool run_raw = true, run_raw_watch = true, run_zkcoro = true;  // --only: one of them (for profiling)
};

options parse_options(int argc, char** argv)
{
    options o;
    CLI::App app{"Latency and client CPU of a create + get_children + delete cycle: the raw ZooKeeper C client\n"
                 "against zkcoro::client and zkcoro::mutex, one request at a time, then pipelined.",
                 program};
    zkbench::add_shared_options(app, o.connect, zkbench::bracketed_ipv4::accept);
    zkbench::add_integer(app, "--cycles", o.cycles, 1, 10'000'000, "N", "Measured cycles per implementation in total");
    zkbench::add_integer(app, "--rounds", o.rounds, 1, 1'000'000, "R",
                         "Minimum number of raw/zkcoro alternations; more are made when a round would\n"
                         "outlast a quarter of the session timeout");
    zkbench::add_integer(app, "--warmup", o.warmup, 0, 10'000'000, "N", "Unmeasured cycles per implementation first");
    zkbench::add_integer(app, "--inflight", o.inflight, 1, 10'000, "N", "Pipelined: cycles at once");
    zkbench::add_integer(app, "--pipeline-ms", o.pipeline_ms, 0, 600'000, "MS",
                         "Pipelined: run time per implementation, at most 1/8 of the session timeout;\n"
                         "0 skips the pipelined part");
    zkbench::add_integer(app, "--time-limit", o.time_limit, 1, 86'400, "SECONDS",
                         "Overall limit; exceeding it is an error");
    std::string only;
    app.add_option("--only", only,
                   "Run one implementation only (for profiling; default: all; zkcoro: the client and the mutex)")
        ->type_name("raw|raw_watch|zkcoro")
        ->check(CLI::IsMember({"raw", "raw_watch", "zkcoro"}).description(""));
    zkbench::parse_command_line(app, argc, argv);
    if (!only.empty()) {
        o.run_raw = only == "raw";
        o.run_raw_watch = only == "raw_watch";
        o.run_zkcoro = only == "zkcoro";
    }
    o.rounds = std::min(o.rounds, o.cycles);
    return o;
}

// ---------------------------------------------------------------------------------------------
// Measurements

using zkbench::cpu_us;

// Per-cycle latencies in ns, and the CPU they took.
struct series : zkbench::latencies {
    double cpu_us = 0;  // CPU of the measured phases
    long phases = 0;
    std::vector<double> phase_cpu_per_cycle;  // of each measured phase, in order (one per round)

    double wall_s = 0;  // pipelined: the phase's wall time

    // Sequential: one cycle after another; pipelined: cycles over the phase's wall time.
    double per_s() const
    {
        if (ns.empty())
            return 0;
        return wall_s > 0 ? static_cast<double>(ns.size()) / wall_s : 1e6 / mean_us();
    }
    double cpu_per_cycle_us() const { return ns.empty() ? 0 : cpu_us / static_cast<double>(ns.size()); }
};

// ---------------------------------------------------------------------------------------------
// The raw C client

constexpr long max_pump_steps = 1'000'000;  // per wait; a reply normally takes 1 or 2

// The C library as zkcoro uses it: host names resolved at connect and after a connection loss,
// not on every zookeeper_interest call.
class raw_client {
public:
    raw_client(const std::string& hosts, int session_timeout_ms)
    {
        zh_ = zookeeper_init(hosts.c_str(), &raw_client::watcher, session_timeout_ms, nullptr, this, 0);
        if (!zh_)
            throw bench_error(fmt::format("zookeeper_init(\"{}\"): {}", hosts, std::strerror(errno)));
        zoo_set_servers_resolution_delay(zh_, -1);
    }
    ~raw_client()
    {
        if (zh_)
            zookeeper_close(zh_);
    }
    raw_client(const raw_client&) = delete;
    raw_client& operator=(const raw_client&) = delete;

    // Establishes the session, within 10 s.
    void connect(std::string_view who)
    {
        auto limit = std::min(g_deadline, clock_type::now() + connect_timeout);
        pump_until([this] { return state_ == ZOO_CONNECTED_STATE; }, fmt::format("connecting the {} session", who),
                   limit);
    }

    int session_timeout_ms() const { return zoo_recv_timeout(zh_); }

    // Runs the library until done() holds: one poll() per wake-up, then zookeeper_process, which
    // reads one packet per call, repeated while the socket has bytes and done() does not hold.
    template <class Done>
    void pump_until(Done&& done, std::string_view what)
    {
        pump_until(std::forward<Done>(done), what, g_deadline);
    }
    template <class Done>
    void pump_until(Done&& done, std::string_view what, clock_type::time_point deadline)
    {
        for (long step = 0; !done(); ++step) {
            if (step >= max_pump_steps)
                throw bench_error(fmt::format("no completion after {} steps while {}", step, what));
            auto now = clock_type::now();
            if (now > deadline)
                throw bench_error(fmt::format("{} exceeded while {}",
                                              deadline < g_deadline ? "timeout" : "time limit", what));
            if (state_ == ZOO_EXPIRED_SESSION_STATE || state_ == ZOO_AUTH_FAILED_STATE)
                throw bench_error(fmt::format("raw session lost (state {}) while {}", state_, what));
            int fd = -1, interest = 0;
            timeval tv{};
            int rc = zookeeper_interest(zh_, &fd, &interest, &tv);
            if (rc == ZINVALIDSTATE || rc == ZBADARGUMENTS)
                throw bench_error(fmt::format("zookeeper_interest: {} while {}", zerror(rc), what));
            // Connection loss and timeouts are left to the library, which reconnects.
            pollfd p{fd, 0, 0};
            if (interest & ZOOKEEPER_READ)
                p.events |= POLLIN;
            if (interest & ZOOKEEPER_WRITE)
                p.events |= POLLOUT;
            auto left_ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
            long long wait_ms = static_cast<long long>(tv.tv_sec) * 1000 + (tv.tv_usec + 999) / 1000;
            int timeout = static_cast<int>(std::clamp<long long>(std::min<long long>(wait_ms, left_ms), 0, 60'000));
            int n = ::poll(&p, fd != -1 ? 1 : 0, timeout);
            if (n < 0 && errno != EINTR)
                throw bench_error(fmt::format("poll: {}", std::strerror(errno)));
            int events = 0;
            if (n > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)))
                events |= ZOOKEEPER_READ;
            if (n > 0 && (p.revents & POLLOUT))
                events |= ZOOKEEPER_WRITE;
            zookeeper_process(zh_, events);
            if (events & ZOOKEEPER_READ)
                for (int i = 0; i < 256 && !done() && bytes_ready(fd); ++i)
                    zookeeper_process(zh_, ZOOKEEPER_READ);
        }
    }

    // Synchronous helpers (setup and cleanup). Return the C library's result code.
    int create(const std::string& path, int flags)
    {
        struct ctx_t { bool done = false; int rc = 0; } ctx;
        int rc = zoo_acreate2(zh_, path.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, flags,
                              [](int r, const char*, const Stat*, const void* d) {
                                  auto* c = static_cast<ctx_t*>(const_cast<void*>(d));
                                  c->rc = r;
                                  c->done = true;
                              }, &ctx);
        if (rc != ZOK)
            return rc;
        pump_until([&] { return ctx.done; }, "creating " + path);
        return ctx.rc;
    }
    int remove(const std::string& path)
    {
        struct ctx_t { bool done = false; int rc = 0; } ctx;
        int rc = zoo_adelete(zh_, path.c_str(), -1,
                             [](int r, const void* d) {
                                 auto* c = static_cast<ctx_t*>(const_cast<void*>(d));
                                 c->rc = r;
                                 c->done = true;
                             }, &ctx);
        if (rc != ZOK)
            return rc;
        pump_until([&] { return ctx.done; }, "deleting " + path);
        return ctx.rc;
    }
    int children(const std::string& path, std::vector<std::string>& out)
    {
        struct ctx_t { bool done = false; int rc = 0; std::vector<std::string>* out; } ctx{false, 0, &out};
        int rc = zoo_aget_children2(zh_, path.c_str(), 0,
                                    [](int r, const String_vector* v, const Stat*, const void* d) {
                                        auto* c = static_cast<ctx_t*>(const_cast<void*>(d));
                                        c->rc = r;
                                        c->done = true;
                                        if (r == ZOK && v)
                                            for (std::int32_t i = 0; i < v->count; ++i)
                                                c->out->emplace_back(v->data[i]);
                                    }, &ctx);
        if (rc != ZOK)
            return rc;
        pump_until([&] { return ctx.done; }, "listing " + path);
        return ctx.rc;
    }

    // One measured cycle: each request waits for the previous one's completion. With `watch`
    // (raw_watch), an exists watch on the new node goes out with the listing, right after the
    // create's reply; the listing waits for the exists reply too (the server answers in order, so
    // it costs no round trip), and the cycle ends once the delete's reply and the watch's
    // deletion event are both in.
    void cycle(const std::string& prefix, const std::string& parent, bool watch)
    {
        cycle_ctx c;
        check(zoo_acreate2(zh_, prefix.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL,
                           &raw_client::on_created, &c), "zoo_acreate2");
        pump_until([&] { return c.done; }, "waiting for a create");
        check(c.rc, "create");

        if (watch) {
            // Members, not locals: a watch outlives a failed cycle until the session closes.
            node_watch_ = {};
            exists_ = {};
            check(zoo_awexists(zh_, c.path.c_str(), &raw_client::on_node_event, &node_watch_, &raw_client::on_exists,
                               &exists_),
                  "zoo_awexists");
        }
        c.done = false;
        check(zoo_aget_children2(zh_, parent.c_str(), 0, &raw_client::on_children, &c), "zoo_aget_children2");
        pump_until([&] { return c.done && (!watch || exists_.done); }, "waiting for get_children");
        check(c.rc, "get_children");
        if (c.count != 1)
            throw bench_error(fmt::format("raw: {} has {} children, expected 1", parent, c.count));
        if (watch)
            check(exists_.rc, "exists (watch on our node)");

        c.done = false;
        check(zoo_adelete(zh_, c.path.c_str(), -1, &raw_client::on_done, &c), "zoo_adelete");
        pump_until([&] { return c.done && (!watch || node_watch_.fired); }, "waiting for a delete");
        check(c.rc, "delete");
        if (watch && node_watch_.type != ZOO_DELETED_EVENT)
            throw bench_error(fmt::format("raw_watch: the watch on {} fired with event type {}, expected a deletion",
                                          c.path, node_watch_.type));
    }

    // `inflight` cycles at once until `end`; returns the cycles completed. Each completion issues
    // the cycle's next request, and a finished cycle starts the next one while time remains.
    long pipelined(const std::string& prefix, const std::string& parent, long inflight, clock_type::time_point end,
                   series* out)
    {
        pipe p{this, prefix, parent, end, out, {}};
        p.slots.resize(static_cast<std::size_t>(inflight));
        for (auto& slot : p.slots) {
            slot.p = &p;
            start_cycle(slot);
        }
        pump_until([&] { return p.active == 0; }, "running pipelined cycles", end + 10s);
        if (p.rc != ZOK)
            throw bench_error(fmt::format("raw pipelined {}: {}", p.failed_op, zerror(p.rc)));
        return p.cycles;
    }

private:
    struct pipe;
    struct pipe_slot {
        pipe* p = nullptr;
        std::string path;
        clock_type::time_point t0;
    };
    struct pipe {
        raw_client* self;
        std::string prefix, parent;
        clock_type::time_point end;
        series* out;
        std::vector<pipe_slot> slots;
        long active = 0;
        long cycles = 0;
        int rc = ZOK;
        const char* failed_op = "";
    };
    static pipe_slot& slot_of(const void* d) { return *static_cast<pipe_slot*>(const_cast<void*>(d)); }
    // Records a failure; the slot stops.
    static void pipe_fail(pipe_slot& s, int rc, const char* op)
    {
        if (s.p->rc == ZOK) {
            s.p->rc = rc;
            s.p->failed_op = op;
        }
        --s.p->active;
    }
    void start_cycle(pipe_slot& s)
    {
        s.t0 = clock_type::now();
        int rc = zoo_acreate2(zh_, s.p->prefix.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL,
                              &raw_client::pipe_created, &s);
        if (rc != ZOK)
            return pipe_fail(s, rc, "zoo_acreate2");
        ++s.p->active;
    }
    static void pipe_created(int rc, const char* value, const Stat*, const void* d)
    {
        auto& s = slot_of(d);
        if (rc != ZOK || !value)
            return pipe_fail(s, rc, "create");
        s.path = value;
        rc = zoo_aget_children2(s.p->self->zh_, s.p->parent.c_str(), 0, &raw_client::pipe_listed, d);
        if (rc != ZOK)
            pipe_fail(s, rc, "zoo_aget_children2");
    }
    static void pipe_listed(int rc, const String_vector* v, const Stat*, const void* d)
    {
        auto& s = slot_of(d);
        if (rc != ZOK || !v || v->count < 1)
            return pipe_fail(s, rc != ZOK ? rc : ZRUNTIMEINCONSISTENCY, "get_children");
        rc = zoo_adelete(s.p->self->zh_, s.path.c_str(), -1, &raw_client::pipe_deleted, d);
        if (rc != ZOK)
            pipe_fail(s, rc, "zoo_adelete");
    }
    static void pipe_deleted(int rc, const void* d)
    {
        auto& s = slot_of(d);
        if (rc != ZOK)
            return pipe_fail(s, rc, "delete");
        auto now = clock_type::now();
        ++s.p->cycles;
        if (s.p->out)
            s.p->out->add(now - s.t0);
        --s.p->active;
        if (now < s.p->end && s.p->rc == ZOK)
            s.p->self->start_cycle(s);
    }

    struct cycle_ctx {
        bool done = false;
        int rc = 0;
        std::int32_t count = 0;
        std::string path;
    };

    static cycle_ctx& ctx_of(const void* d) { return *static_cast<cycle_ctx*>(const_cast<void*>(d)); }
    static void on_created(int rc, const char* value, const Stat*, const void* d)
    {
        auto& c = ctx_of(d);
        c.rc = rc;
        if (rc == ZOK && value)
            c.path = value;
        c.done = true;
    }
    static void on_children(int rc, const String_vector* v, const Stat*, const void* d)
    {
        auto& c = ctx_of(d);
        c.rc = rc;
        c.count = (rc == ZOK && v) ? v->count : -1;
        c.done = true;
    }
    static void on_done(int rc, const void* d)
    {
        auto& c = ctx_of(d);
        c.rc = rc;
        c.done = true;
    }
    struct exists_ctx {
        bool done = false;
        int rc = 0;
    };
    struct node_watch_ctx {
        bool fired = false;
        int type = 0;
    };
    static void on_exists(int rc, const Stat*, const void* d)
    {
        auto& e = *static_cast<exists_ctx*>(const_cast<void*>(d));
        e.rc = rc;
        e.done = true;
    }
    static void on_node_event(zhandle_t*, int type, int, const char*, void* ctx)
    {
        auto& w = *static_cast<node_watch_ctx*>(ctx);
        if (type == ZOO_SESSION_EVENT)
            return;  // the session's state: the global watcher has it
        w.fired = true;
        w.type = type;
    }
    static void check(int rc, std::string_view what)
    {
        if (rc != ZOK)
            throw bench_error(fmt::format("raw {}: {}", what, zerror(rc)));
    }
    static bool bytes_ready(int fd)
    {
        int n = 0;
        return fd >= 0 && ::ioctl(fd, FIONREAD, &n) == 0 && n > 0;
    }
    static void watcher(zhandle_t*, int type, int state, const char*, void* ctx)
    {
        if (type == ZOO_SESSION_EVENT && ctx)
            static_cast<raw_client*>(ctx)->state_ = state;
    }

    zhandle_t* zh_ = nullptr;
    int state_ = 0;
    exists_ctx exists_;
    node_watch_ctx node_watch_;
};

// ---------------------------------------------------------------------------------------------
// The phases

struct run_plan {
    std::string parent;  // /zkcoro-bench/cycle-<pid>
    std::string prefix;  // parent + "/_c_<uuid>-lock-": the shape of zkcoro::mutex's node names
    std::string lock_path;  // parent + "-lock": the mutex phases' lock
    clock_type::duration phase_budget{};  // a phase stops after this long (the idle session must live)
    bool run_raw = true, run_raw_watch = true, run_zkcoro = true;
};

// The bookkeeping of one phase: times each cycle into `out` (if any), ends after `count` cycles
// or once the phase has outlasted its budget, and adds the phase's CPU time.
class phase {
public:
    phase(const run_plan& plan, long count, series* out) : budget_(plan.phase_budget), count_(count), out_(out) {}

    bool more() const { return n_ < count_ && !over_budget_; }
    bool over_budget() const { return over_budget_; }
    void begin() { t0_ = clock_type::now(); }
    // Returns the cycle's end time.
    clock_type::time_point end()
    {
        auto t1 = clock_type::now();
        ++n_;
        if (out_)
            out_->add(t1 - t0_);
        over_budget_ = t1 - start_ > budget_;
        return t1;
    }
    // The cycles made.
    long finish()
    {
        if (out_) {
            double cpu = cpu_us() - cpu0_;
            out_->cpu_us += cpu;
            ++out_->phases;
            if (n_ > 0)
                out_->phase_cpu_per_cycle.push_back(cpu / static_cast<double>(n_));
        }
        return n_;
    }

private:
    clock_type::duration budget_;
    long count_;
    series* out_;
    double cpu0_ = cpu_us();
    clock_type::time_point start_ = clock_type::now();
    clock_type::time_point t0_{};
    long n_ = 0;
    bool over_budget_ = false;
};

// Runs up to `count` raw cycles (fewer if the phase outlasts its budget); returns how many.
// `watch`: the raw_watch cycle.
long raw_phase(raw_client& raw, const run_plan& plan, long count, series* out, bool watch)
{
    phase ph(plan, count, out);
    while (ph.more()) {
        ph.begin();
        raw.cycle(plan.prefix, plan.parent, watch);
        ph.end();
    }
    return ph.finish();
}

asio::awaitable<long> zkcoro_phase(zkcoro::client& c, const run_plan& plan, long count, series* out)
{
    phase ph(plan, count, out);
    while (ph.more()) {
        ph.begin();
        auto created = co_await c.async_create(plan.prefix, "", zkcoro::create_mode::ephemeral_sequential);
        auto listed = co_await c.async_get_children(plan.parent);
        if (listed.children.size() != 1)
            throw bench_error(fmt::format("zkcoro: {} has {} children, expected 1", plan.parent,
                                          listed.children.size()));
        co_await c.async_remove(created.path);
        if (ph.end() > g_deadline && !ph.over_budget())
            throw bench_error("time limit exceeded while running zkcoro cycles");
    }
    co_return ph.finish();
}

// One of the pipelined zkcoro workers: cycles until `end`.
asio::awaitable<void> zkcoro_pipe_worker(zkcoro::client& c, const run_plan& plan, clock_type::time_point end,
                                         series* out, long* cycles)
{
    for (long i = 0; i < 100'000'000 && clock_type::now() < end; ++i) {
        auto t0 = clock_type::now();
        auto created = co_await c.async_create(plan.prefix, "", zkcoro::create_mode::ephemeral_sequential);
        auto listed = co_await c.async_get_children(plan.parent);
        if (listed.children.empty())
            throw bench_error(fmt::format("zkcoro: {} has no children after a create", plan.parent));
        co_await c.async_remove(created.path);
        out->add(clock_type::now() - t0);
        ++*cycles;
    }
}

// `inflight` workers at once until `end`; returns the cycles completed.
asio::awaitable<long> zkcoro_pipelined(zkcoro::client& c, const run_plan& plan, long inflight,
                                       clock_type::time_point end, series* out)
{
    auto ex = co_await asio::this_coro::executor;
    long cycles = 0;
    using op_type = decltype(asio::co_spawn(ex, zkcoro_pipe_worker(c, plan, end, out, &cycles), asio::deferred));
    std::vector<op_type> ops;
    for (long i = 0; i < inflight; ++i)
        ops.push_back(asio::co_spawn(ex, zkcoro_pipe_worker(c, plan, end, out, &cycles), asio::deferred));
    auto [order, errors] = co_await asio::experimental::make_parallel_group(std::move(ops))
                               .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
    for (auto& e : errors)
        if (e)
            std::rethrow_exception(e);
    co_return cycles;
}

// Up to `count` zkcoro::mutex acquire + release cycles (workload a of the lock benchmark), like
// zkcoro_phase, so that they interleave with the raw cycles.
asio::awaitable<long> mutex_phase(zkcoro::mutex& m, const run_plan& plan, long count, series* out)
{
    phase ph(plan, count, out);
    while (ph.more()) {
        ph.begin();
        auto g = co_await m.acquire(std::max<clock_type::duration>(g_deadline - clock_type::now(), 1ms));
        if (!g)
            throw bench_error("mutex: acquire timed out (time limit)");
        co_await g->release();
        ph.end();
    }
    co_return ph.finish();
}

struct results {
    series mx;  // zkcoro::mutex acquire + release, interleaved with the cycles
    series raw_pipe, zk_pipe;
    double pipe_seconds = 0;
    series raw, raw_watch, zk;
    long warmup_cycles = 0;
    long rounds = 0;
    long per_round = 0;
    int raw_timeout_ms = 0, zk_timeout_ms = 0;
    run_plan plan;
};

// Where alternate() puts each implementation's cycles.
struct phase_outputs {
    series* raw;
    series* raw_watch;
    series* zk;
    series* mx;
};

// Alternates raw, raw_watch, zkcoro-client and zkcoro-mutex phases until each has done `total`
// cycles; each round has at most `per_round` cycles of each, and the order rotates from round to
// round.
asio::awaitable<long> alternate(raw_client* raw, zkcoro::client& zc, zkcoro::mutex* mx, const run_plan& plan,
                                long total, long per_round, phase_outputs out, std::string_view what)
{
    constexpr int kinds = 4;
    long done[kinds] = {plan.run_raw ? 0 : total, plan.run_raw_watch ? 0 : total, plan.run_zkcoro ? 0 : total,
                        mx ? 0 : total};
    long round = 0;
    // Every phase makes at least one cycle, so this ends after at most kinds * total rounds.
    while (done[0] < total || done[1] < total || done[2] < total || done[3] < total) {
        if (round > kinds * total)
            throw bench_error(fmt::format("{}: no progress after {} rounds", what, round));
        check_deadline(what);
        for (int k = 0; k < kinds; ++k) {
            int which = static_cast<int>((round + k) % kinds);
            long n = std::min(per_round, total - done[which]);
            if (n <= 0)
                continue;
            if (which == 0)
                done[0] += raw_phase(*raw, plan, n, out.raw, false);
            else if (which == 1)
                done[1] += raw_phase(*raw, plan, n, out.raw_watch, true);
            else if (which == 2)
                done[2] += co_await zkcoro_phase(zc, plan, n, out.zk);
            else
                done[3] += co_await mutex_phase(*mx, plan, n, out.mx);
        }
        ++round;
    }
    co_return round;
}

// The median of a's CPU per cycle over b's, phase by phase: the i-th measured phase of each, which
// are of the same round while both keep pace (a phase cut short by its budget can shift them by
// a round); 0 without pairs.
double median_pair_ratio(const series& a, const series& b, std::size_t* pairs)
{
    std::vector<double> r;
    for (std::size_t i = 0; i < a.phase_cpu_per_cycle.size() && i < b.phase_cpu_per_cycle.size(); ++i)
        if (b.phase_cpu_per_cycle[i] > 0)
            r.push_back(a.phase_cpu_per_cycle[i] / b.phase_cpu_per_cycle[i]);
    *pairs = r.size();
    if (r.empty())
        return 0;
    std::sort(r.begin(), r.end());
    return r.size() % 2 ? r[r.size() / 2] : (r[r.size() / 2 - 1] + r[r.size() / 2]) / 2;
}

// Setup and cleanup go through a session of their own, so that neither measured client has
// work outside its phases (and --only can leave one out).
void make_parent(const options& o, const std::string& parent)
{
    raw_client admin(o.connect, 30000);
    admin.connect("setup");
    // The common root may vanish under us if another run deletes it: retry a few times.
    for (int attempt = 0;; ++attempt) {
        int rc = admin.create("/zkcoro-bench", 0);
        if (rc != ZOK && rc != ZNODEEXISTS)
            throw bench_error(fmt::format("creating /zkcoro-bench: {}", zerror(rc)));
        rc = admin.create(parent, 0);
        if (rc == ZOK || rc == ZNODEEXISTS)
            return;
        if (rc != ZNONODE || attempt >= 5)
            throw bench_error(fmt::format("creating {}: {}", parent, zerror(rc)));
    }
}

void remove_parent(const options& o, const std::string& parent, const std::string& lock_path)
{
    raw_client admin(o.connect, 30000);
    admin.connect("cleanup");
    std::vector<std::string> kids;  // none unless a cycle failed half-way
    if (admin.children(parent, kids) == ZOK)
        for (auto& k : kids)
            admin.remove(parent + "/" + k);
    for (const auto* p : {&parent, &lock_path}) {
        int rc = admin.remove(*p);
        if (rc != ZOK && rc != ZNONODE)
            std::fprintf(stderr, "warning: could not delete %s: %s\n", p->c_str(), zerror(rc));
    }
    int rc = ZOK;
    // The common root goes too, unless another run still uses it.
    rc = admin.remove("/zkcoro-bench");
    if (rc != ZOK && rc != ZNONODE && rc != ZNOTEMPTY)
        std::fprintf(stderr, "warning: could not delete /zkcoro-bench: %s\n", zerror(rc));
}

asio::awaitable<void> run_bench(const options& o, results& res)
{
    auto ex = co_await asio::this_coro::executor;

    run_plan& plan = res.plan;
    plan.parent = fmt::format("/zkcoro-bench/cycle-{}", ::getpid());
    // Nodes named as zkcoro::mutex names its own (Curator's protected name: "_c_", a UUID, "-",
    // then "lock-"; the number is the server's), so that the floors send, store, list and parse
    // the same bytes: with "n-" instead, raw_watch's cycle counted about 4 400 instructions fewer
    // (callgrind, bench/profile.sh), work the C client and the server do on the longer names, not
    // zkcoro. One node at a time per client: a fixed UUID is enough here.
    plan.prefix = plan.parent + "/_c_0b7e1c2a-5d3f-4e8a-9c61-2f4d8a7b3e15-lock-";
    plan.run_raw = o.run_raw;
    plan.run_raw_watch = o.run_raw_watch;
    plan.run_zkcoro = o.run_zkcoro;

    plan.lock_path = plan.parent + "-lock";
    zkcoro::client zc(ex, zkbench::client_config(o.connect));
    std::optional<raw_client> raw;
    std::optional<zkcoro::mutex> mx;  // on zc, destroyed before it

    std::exception_ptr failure;
    bool made_parent = false;
    try {
        make_parent(o, plan.parent);
        made_parent = true;

        int timeout_ms = 1'000'000;
        if (o.run_raw || o.run_raw_watch) {
            raw.emplace(o.connect, 30000);
            raw->connect("raw");
            res.raw_timeout_ms = raw->session_timeout_ms();
            timeout_ms = std::min(timeout_ms, res.raw_timeout_ms);
        }
        if (o.run_zkcoro) {
            co_await zc.async_connect();
            res.zk_timeout_ms = static_cast<int>(zc.session_timeout().count());
            timeout_ms = std::min(timeout_ms, res.zk_timeout_ms);
        }

        // The idle session's client must not miss its ping (due a third of the timeout after its
        // last request) and the rounds rotate four implementations (the raw client does two), so
        // an idle spell lasts up to six phases: keep each phase within a twentieth of the timeout.
        plan.phase_budget = std::min<clock_type::duration>(500ms, std::chrono::milliseconds(timeout_ms) / 20);

        // Warm-up, which also sizes the rounds.
        series raw_warm, raw_watch_warm, zk_warm, mx_warm;
        long warm_per_round = std::max<long>(1, std::min<long>(o.warmup, 100));
        raw_client* rawp = raw ? &*raw : nullptr;
        if (o.run_zkcoro)
            mx.emplace(zc, plan.lock_path);
        zkcoro::mutex* mxp = mx ? &*mx : nullptr;
        if (o.warmup > 0)
            co_await alternate(rawp, zc, mxp, plan, o.warmup, warm_per_round,
                               {&raw_warm, &raw_watch_warm, &zk_warm, &mx_warm}, "warming up");
        res.warmup_cycles = o.warmup;

        long per_round = (o.cycles + o.rounds - 1) / o.rounds;
        double slowest_ns =
            std::max({raw_warm.mean_us(), raw_watch_warm.mean_us(), zk_warm.mean_us(), mx_warm.mean_us(), 1.0}) * 1e3;
        double budget_ns =
            static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(plan.phase_budget).count());
        long fits = static_cast<long>(budget_ns / 2 / slowest_ns);  // half the budget: margin
        per_round = std::max<long>(1, std::min(per_round, fits));
        res.per_round = per_round;
        for (auto* s : {&res.raw, &res.raw_watch, &res.zk, &res.mx})
            s->ns.reserve(static_cast<std::size_t>(o.cycles));
        res.rounds = co_await alternate(rawp, zc, mxp, plan, o.cycles, per_round,
                                        {&res.raw, &res.raw_watch, &res.zk, &res.mx}, "measuring");

        // Pipelined: raw, then zkcoro, each for pipeline_ms. The idle client sleeps meanwhile, so
        // a phase stays within an eighth of the session timeout (its ping is due after a third).
        auto pipe_for = std::min<clock_type::duration>(std::chrono::milliseconds(o.pipeline_ms),
                                                       std::chrono::milliseconds(timeout_ms) / 8);
        res.pipe_seconds = std::chrono::duration<double>(pipe_for).count();
        if (o.pipeline_ms > 0) {
            if (o.run_raw) {
                check_deadline("running raw pipelined cycles");
                double cpu0 = cpu_us();
                auto t0 = clock_type::now();
                raw->pipelined(plan.prefix, plan.parent, o.inflight, t0 + pipe_for, &res.raw_pipe);
                res.raw_pipe.wall_s = std::chrono::duration<double>(clock_type::now() - t0).count();
                res.raw_pipe.cpu_us = cpu_us() - cpu0;
            }
            if (o.run_zkcoro) {
                check_deadline("running zkcoro pipelined cycles");
                double cpu0 = cpu_us();
                auto t0 = clock_type::now();
                co_await zkcoro_pipelined(zc, plan, o.inflight, t0 + pipe_for, &res.zk_pipe);
                res.zk_pipe.wall_s = std::chrono::duration<double>(clock_type::now() - t0).count();
                res.zk_pipe.cpu_us = cpu_us() - cpu0;
            }
        }
    } catch (...) {
        failure = std::current_exception();
    }

    // Cleanup, with a little time of its own if the limit was what failed. Both sessions end
    // first, so that their ephemeral nodes are gone.
    g_deadline = std::max(g_deadline, clock_type::now() + 5s);
    try {
        co_await zc.async_close();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "warning: closing the zkcoro client: %s\n", e.what());
    }
    mx.reset();
    raw.reset();
    if (made_parent) {
        try {
            remove_parent(o, plan.parent, plan.lock_path);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "warning: cleanup: %s\n", e.what());
        }
    }
    if (failure)
        std::rethrow_exception(failure);
}

// Prints the results; returns the exit status (0).
int report(const options& o, const results& r)
{
    const auto& p = r.plan;
    fmt::print("zkcoro cycle benchmark: create(ephemeral_sequential) + get_children + delete, one request at a time\n");
    fmt::print("server {}  parent {}  session timeouts: raw {} ms, zkcoro {} ms\n", o.connect, p.parent,
               r.raw_timeout_ms, r.zk_timeout_ms);
    fmt::print("warm-up {} cycles per impl; measured {} cycles per impl in {} rounds of <= {} per impl "
               "(phase budget {} ms)\n\n",
               r.warmup_cycles, o.cycles, r.rounds, r.per_round,
               std::chrono::duration_cast<std::chrono::milliseconds>(p.phase_budget).count());

    fmt::print("{:<10} {:>8} {:>10} {:>10} {:>10} {:>10} {:>14}\n", "impl", "cycles", "p50 us", "p99 us",
               "mean us", "cycles/s", "CPU us/cycle");
    auto row = [](std::string_view name, const series& s) {
        fmt::print("{:<10} {:>8} {:>10.1f} {:>10.1f} {:>10.1f} {:>10.1f} {:>14.1f}\n", name, s.ns.size(),
                   s.percentile_us(50), s.percentile_us(99), s.mean_us(), s.per_s(), s.cpu_per_cycle_us());
    };
    if (p.run_raw)
        row("raw", r.raw);
    if (p.run_raw_watch)
        row("raw_watch", r.raw_watch);
    if (p.run_zkcoro)
        row("zkcoro", r.zk);
    if (p.run_zkcoro)
        row("mutex", r.mx);
    if (o.pipeline_ms > 0) {
        fmt::print("pipelined, {} cycles in flight, {:.1f} s each:\n", o.inflight, r.pipe_seconds);
        if (p.run_raw)
            row("raw", r.raw_pipe);
        if (p.run_zkcoro)
            row("zkcoro", r.zk_pipe);
    }
    auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
    if (p.run_raw_watch && p.run_zkcoro) {
        std::size_t pairs = 0;
        double median = median_pair_ratio(r.mx, r.raw_watch, &pairs);
        fmt::print("\nmutex acquire+release / raw_watch cycle (the floor): p50 {:.3f}  CPU {:.3f}  "
                   "CPU, median of {} interleaved pairs {:.3f}\n",
                   ratio(r.mx.percentile_us(50), r.raw_watch.percentile_us(50)),
                   ratio(r.mx.cpu_per_cycle_us(), r.raw_watch.cpu_per_cycle_us()), pairs, median);
        // Machine-readable (bench/run.sh): not a RESULT line, whose fields are fixed.
        fmt::print("PAIRS impl=zkcoro floor=raw_watch workload=uncontended_interleaved cpu_ratio_median={:.3f} "
                   "pairs={}\n",
                   median, pairs);
    }
    if (p.run_raw && p.run_zkcoro)
        fmt::print("\nmutex acquire+release / raw cycle: p50 {:.3f}  CPU {:.3f}\n",
                   ratio(r.mx.percentile_us(50), r.raw.percentile_us(50)),
                   ratio(r.mx.cpu_per_cycle_us(), r.raw.cpu_per_cycle_us()));
    if (p.run_raw && p.run_zkcoro)
        fmt::print("zkcoro/raw: p50 {:.3f}  mean {:.3f}  p99 {:.3f}  CPU per cycle {:.3f}\n",
               ratio(r.zk.percentile_us(50), r.raw.percentile_us(50)), ratio(r.zk.mean_us(), r.raw.mean_us()),
               ratio(r.zk.percentile_us(99), r.raw.percentile_us(99)),
               ratio(r.zk.cpu_per_cycle_us(), r.raw.cpu_per_cycle_us()));
    fmt::print("(ops_per_s below counts cycles; each cycle is 3 requests)\n");
    auto result = [](std::string_view name, std::string_view workload, const series& s) {
        fmt::print("RESULT impl={} workload={} ops_per_s={:.1f} p50_us={:.1f} p99_us={:.1f} mean_us={:.1f} "
                   "cpu_us_per_op={:.1f}\n",
                   name, workload, s.per_s(), s.percentile_us(50), s.percentile_us(99), s.mean_us(),
                   s.cpu_per_cycle_us());
        s.write_samples(name, workload);
    };
    if (p.run_raw)
        result("raw", "cycle", r.raw);
    if (p.run_raw_watch)
        result("raw_watch", "cycle", r.raw_watch);
    if (p.run_zkcoro) {
        result("zkcoro_client", "cycle", r.zk);
        result("zkcoro", "uncontended_interleaved", r.mx);
    }
    if (o.pipeline_ms > 0 && p.run_raw)
        result("raw", "cycle_pipelined", r.raw_pipe);
    if (o.pipeline_ms > 0 && p.run_zkcoro)
        result("zkcoro_client", "cycle_pipelined", r.zk_pipe);
    std::fflush(stdout);
    return 0;
}

}  // namespace

int main(int argc, char** argv)
{
    zoo_set_debug_level(ZOO_LOG_LEVEL_WARN);
    return zkbench::bench_main(argc, argv, program, parse_options, 15s, run_bench, report);
}
