// The lock object's driver (engine/lock_object.hpp) on a fake backend and a manual clock, for the
// driver's unit tests (tests/unit/test_lock_driver.cpp) and its fuzz target (fuzz_lock_driver.cpp):
// a scriptable backend (grant now or later, fail, drop the task without a word, lose a node,
// report someone queueing), a clock that moves only when told, and a script of random steps
// checked as it goes (one holder at a time, fencing tokens that never go back, each acquisition
// completed once) and at its end (every acquisition completed, every node given back or lost and
// given back at most once, nothing held, no timer armed for nobody).
#ifndef ZKCORO_TESTS_FUZZ_LOCK_DRIVER_RIG_HPP
#define ZKCORO_TESTS_FUZZ_LOCK_DRIVER_RIG_HPP

#include "async/pool.hpp"
#include "engine/acquisition.hpp"
#include "engine/lock_object.hpp"

#include <zkcoro/detail/access.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/io_context.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace lock_driver_rig {

using namespace zkcoro;
using namespace zkcoro::detail;
namespace asio = boost::asio;
using time_point = std::chrono::steady_clock::time_point;
constexpr auto never = time_point::max();

// The clock: now() moves only when the test says; a due timer fires at advance().
class manual_clock final : public engine_clock {
public:
    struct state {
        time_point now = time_point{} + std::chrono::hours(1);
        struct timer {
            bool armed = false;
            time_point at{};
            std::function<void()> fire;
        };
        timer timers[2];
        int arms = 0;
    };
    explicit manual_clock(std::shared_ptr<state> st) : st_(std::move(st)) {}
    time_point now() const override { return st_->now; }
    void arm(engine_timer which, time_point at, std::function<void()> fire) override
    {
        auto& t = st_->timers[static_cast<int>(which)];
        t = {true, at, std::move(fire)};
        ++st_->arms;
    }
    void cancel(engine_timer which) override { st_->timers[static_cast<int>(which)] = {}; }

private:
    std::shared_ptr<state> st_;
};

// The backend: it keeps the tasks it was started with, and the test decides what each does.
class fake_backend final : public lock_backend {
public:
    struct started_task {
        active_task task;
        bool promoted = false;
    };
    std::vector<started_task> tasks;  // in the order started; a finished one is empty
    std::vector<std::shared_ptr<node_state>> given_back;
    std::vector<std::shared_ptr<node_state>> queue_watched;
    std::int64_t next_fence = 100;
    bool held = true;  // still_held
    const char* failure = nullptr;  // the first property found broken

    void start(active_task task) override
    {
        const bool promoted = task.promoted();
        tasks.push_back({std::move(task), promoted});
    }
    void give_back(const std::shared_ptr<lock_object>&, const std::shared_ptr<node_state>& ns,
                   std::shared_ptr<op_state<>> op) override
    {
        if (!ns->ended())
            failure = "a node was given back that the engine had not ended";
        given_back.push_back(ns);
        op->complete({});
    }
    void participants(const std::shared_ptr<lock_object>&, std::shared_ptr<op_state<std::vector<participant>>> op) override
    {
        op->complete({}, std::vector<participant>{});
    }
    void log_failure(std::string_view, std::string_view, const error_code&) override {}
    std::string failure_context(std::string_view, std::string_view, const error_code&) override { return {}; }
    void log(log_level, std::string_view) override {}
    bool still_held(const node_state&) const noexcept override { return held; }
    void watch_queue(const std::shared_ptr<lock_object>&, const std::shared_ptr<node_state>& ns) override
    {
        queue_watched.push_back(ns);
    }
    void start_immediate(active_task task, std::string) override
    {
        task.complete(make_error_code(client_errc::not_supported), std::nullopt);
    }

    // The pending task (the one not finished yet), if any.
    started_task* pending()
    {
        for (auto& t : tasks)
            if (t.task.object())
                return &t;
        return nullptr;
    }
    // Grants the pending task a new node; returns the node.
    std::shared_ptr<node_state> grant(time_point now, bool others_queued = false)
    {
        auto* t = pending();
        if (!t)
            return nullptr;
        auto ns = std::make_shared<node_state>();
        ns->node = fmt::format("/lock/n-{}", next_fence);
        ns->fence_base = next_fence++;
        ns->granted_at = now;
        auto task = std::move(t->task);
        auto lease = task.granted(ns, others_queued);
        task.complete({}, std::optional<guard>(access::make_guard(lease, task.owner())));
        return ns;
    }
    // The pending task fails with `ec` (an empty code: a timeout).
    void fail(error_code ec)
    {
        auto* t = pending();
        if (!t)
            return;
        auto task = std::move(t->task);
        task.failed();
        task.complete(ec, std::nullopt);
    }
    // The pending task is dropped without a report (a backend that forgets): completed, though.
    void drop(error_code ec)
    {
        auto* t = pending();
        if (!t)
            return;
        auto task = std::move(t->task);
        auto op = task.op();
        auto s = task.object();
        { active_task gone = std::move(task); }  // the role is handed on by its destructor
        complete_counted(*s, *op, s->now(), ec, std::optional<guard>{});
    }
    std::size_t started() const { return tasks.size(); }
};

// One acquisition's outcome as its caller sees it.
struct outcome {
    bool done = false;
    int completions = 0;
    error_code ec;
    std::optional<guard> g;
};

struct rig {
    asio::io_context ctx;
    std::shared_ptr<manual_clock::state> clock = std::make_shared<manual_clock::state>();
    std::shared_ptr<fake_backend> backend = std::make_shared<fake_backend>();
    std::shared_ptr<lock_object> lock;
    std::vector<std::unique_ptr<asio::cancellation_signal>> signals;

    explicit rig(mutex_options opts = {}, bool reentrant = true)
    {
        recipe_params r;
        r.reentrant = reentrant;
        lock = std::make_shared<lock_object>(backend, ctx.get_executor(), "/lock", opts, r,
                                             std::make_unique<manual_clock>(clock));
    }
    time_point now() const { return clock->now; }

    // Starts an acquisition; its outcome fills in as the io_context runs.
    std::shared_ptr<outcome> acquire(owner_id owner, time_point deadline = never, asio::cancellation_signal** sig = nullptr)
    {
        auto out = std::make_shared<outcome>();
        auto handler = [out](error_code ec, std::optional<guard> g) {
            out->done = true;
            ++out->completions;
            out->ec = ec;
            out->g = std::move(g);
        };
        signals.push_back(std::make_unique<asio::cancellation_signal>());
        if (sig)
            *sig = signals.back().get();
        lock->acquire(owner, deadline,
                      make_pooled<op_state<std::optional<guard>>>(
                          asio::bind_cancellation_slot(signals.back()->slot(), std::move(handler)), ctx.get_executor()));
        run();
        return out;
    }
    void run()
    {
        ctx.restart();
        ctx.poll();
    }
    // Releases the guard of `o`.
    void release(outcome& o)
    {
        if (!o.g)
            return;
        o.g->async_release([b = backend](error_code ec) {
            if (ec)
                b->failure = "a release failed";
        });
        o.g.reset();
        run();
    }
    // Moves the clock, firing the timers that come due (bounded: each fires at most once a step).
    void advance(std::chrono::nanoseconds d)
    {
        clock->now += d;
        for (int round = 0; round < 8; ++round) {
            bool fired = false;
            for (auto& t : clock->timers)
                if (t.armed && t.at <= clock->now) {
                    auto f = std::move(t.fire);
                    t = {};
                    f();
                    fired = true;
                }
            if (!fired)
                break;
        }
        run();
    }
    // The backend grants its pending task a node.
    std::shared_ptr<node_state> grant(bool others_queued = false)
    {
        auto ns = backend->grant(now(), others_queued);
        run();
        return ns;
    }
    void fail(error_code ec = {})
    {
        backend->fail(ec);
        run();
    }
    void drop(error_code ec = {})
    {
        backend->drop(ec);
        run();
    }
    bool timer_armed(engine_timer w) const { return clock->timers[static_cast<int>(w)].armed; }
};

// A script of steps, each chosen by two bytes (a random generator's or a fuzzer's): an
// acquisition by one of five tasks, with or without a deadline; a grant of the pending task (only
// while no node of ours is held, as a server's queue would); its failure or its drop; a release;
// a cancellation; a loss; someone queueing; time passing. The first byte chooses the options
// (lingering, a batch time, local handoff). step() and finish() return the first property found
// broken (null: none).
class driver_script {
public:
    explicit driver_script(std::uint8_t config) : r_(options(config)) {}

    static mutex_options options(std::uint8_t c)
    {
        mutex_options o;
        if (c & 1)
            o.linger = std::chrono::milliseconds(10 * (1 + (c >> 4)));
        if (c & 2)
            o.handoff_batch_time = std::chrono::milliseconds(1 + (c >> 2));
        o.local_handoff = (c & 12) != 0;
        return o;
    }

    const char* step(std::uint8_t op, std::uint8_t arg)
    {
        switch (op % 10) {
        case 0:
        case 1: {
            asio::cancellation_signal* sig = nullptr;
            const auto deadline = arg % 3 ? never : r_.now() + std::chrono::milliseconds(arg);
            acqs_.push_back(r_.acquire(static_cast<owner_id>(1 + arg % 5), deadline, &sig));
            sigs_.push_back(sig);
            break;
        }
        case 2:
            if (r_.backend->pending() && !node_held())
                nodes_.push_back(r_.grant(arg % 2 != 0));
            break;
        case 3:
            if (r_.backend->pending()) {
                if (arg % 2)
                    r_.fail(arg % 4 == 1 ? error_code{} : make_error_code(client_errc::invalid_argument));
                else
                    r_.drop();
            }
            break;
        case 4:
        case 5: {
            std::vector<outcome*> held;
            for (auto& a : acqs_)
                if (a->g)
                    held.push_back(a.get());
            if (!held.empty())
                r_.release(*held[arg % held.size()]);
            break;
        }
        case 6:
            if (!sigs_.empty()) {
                const auto i = arg % sigs_.size();
                if (!acqs_[i]->done)
                    sigs_[i]->emit(asio::cancellation_type::terminal);
                r_.run();
            }
            break;
        case 7:
            if (!nodes_.empty()) {
                r_.lock->lost(nodes_[arg % nodes_.size()]);
                r_.run();
            }
            break;
        case 8:
            if (!nodes_.empty()) {
                r_.lock->queue_changed(nodes_[arg % nodes_.size()]);
                r_.run();
            }
            break;
        default:
            r_.advance(std::chrono::milliseconds(arg % 120));
            break;
        }
        return check();
    }

    // Every guard released, every task granted in turn, lingering over; then the end's checks.
    const char* finish()
    {
        for (int round = 0; round < 1000; ++round) {
            bool any = false;
            for (auto& a : acqs_)
                if (a->g) {
                    r_.release(*a);
                    any = true;
                }
            if (r_.backend->pending()) {
                if (node_held())
                    r_.advance(std::chrono::seconds(1));  // a lingering node ends
                if (node_held())
                    return "a node stays held with every guard released and its lingering over";
                nodes_.push_back(r_.grant());
                any = true;
            }
            if (auto f = check())
                return f;
            if (!any)
                break;
        }
        r_.advance(std::chrono::seconds(10));
        for (auto& a : acqs_)
            if (a->completions != 1 || a->g)
                return "an acquisition was not completed exactly once, or kept its guard";
        for (auto& n : nodes_)
            if (!n->ended())
                return "a node was neither given back nor lost";
        auto& back = r_.backend->given_back;
        for (std::size_t i = 0; i < back.size(); ++i) {
            if (back[i]->lost())
                return "a lost node was given back";
            for (std::size_t j = 0; j < i; ++j)
                if (back[i] == back[j])
                    return "a node was given back twice";
        }
        for (owner_id t = 1; t <= 5; ++t)
            if (r_.lock->held_count(t) != 0)
                return "a task still holds after its last release";
        if (r_.timer_armed(engine_timer::deadline) || r_.timer_armed(engine_timer::linger))
            return "a timer stays armed for nobody";
        const auto m = r_.lock->metrics_snapshot();
        if (m.acquires + m.timeouts + m.errors + m.cancellations != acqs_.size())
            return "the metrics do not count every acquisition once";
        return r_.backend->failure;
    }

    std::size_t acquisitions() const noexcept { return acqs_.size(); }
    std::size_t grants() const noexcept { return nodes_.size(); }

private:
    bool node_held() const
    {
        return std::any_of(nodes_.begin(), nodes_.end(), [](auto& n) { return !n->ended(); });
    }

    const char* check()
    {
        if (r_.backend->failure)
            return r_.backend->failure;
        owner_id holder = 0;
        for (auto& a : acqs_) {
            if (a->completions > 1)
                return "an acquisition completed twice";
            if (!a->g)
                continue;
            if (seen_.insert(a.get()).second) {  // a new guard: its token does not go back
                if (a->g->fencing_token() < max_token_)
                    return "a fencing token went back";
                max_token_ = a->g->fencing_token();
            }
            if (a->g->lost())
                continue;
            if (holder == 0)
                holder = a->g->owner();
            if (holder != a->g->owner())
                return "two tasks hold at once";
        }
        return nullptr;
    }

    rig r_;
    std::vector<std::shared_ptr<outcome>> acqs_;
    std::vector<asio::cancellation_signal*> sigs_;
    std::vector<std::shared_ptr<node_state>> nodes_;
    std::set<outcome*> seen_;
    std::int64_t max_token_ = -1;
};

}  // namespace lock_driver_rig

#endif
