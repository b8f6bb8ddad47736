// The completion of an asynchronous operation, shared by every layer: a type-erased handler, the
// executor it runs on, the work that keeps that executor's context alive while pending, and the
// binding of the caller's cancellation slot. The driver's requests, the engine's acquisitions and
// the recipes all complete through it, exactly once.
#ifndef ZKCORO_SRC_ASYNC_OP_STATE_HPP
#define ZKCORO_SRC_ASYNC_OP_STATE_HPP

#include "async/pool.hpp"

#include <zkcoro/detail/config.hpp>
#include <zkcoro/error.hpp>

#include <boost/asio/any_completion_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/system_executor.hpp>

#include <atomic>
#include <memory>
#include <optional>
#include <tuple>
#include <variant>
#include <utility>

namespace zkcoro::detail {

// A pending operation, of any layer and backend. Shared between whoever will complete it (for a
// ZooKeeper request: the C library's callback, through the driver's pending_request), and the
// cancellation handler.
struct op_base : std::enable_shared_from_this<op_base> {
    virtual ~op_base() = default;
    // Completes with an error unless already completed. Thread-safe.
    virtual void fail(error_code ec) = 0;

    std::atomic<bool> done{false};
    // The caller gave up (cancellation): the reply is consumed, side effects are undone.
    std::atomic<bool> abandoned{false};
    // Set before the operation starts, by an internal operation whose handler may run inline in
    // the reply's callback (complete_here): it runs on the client's executor and is written for it.
    bool inline_ok = false;
};

// Whether a completion `here` may run a handler of another executor inline (dispatch) on this
// thread: only while a Redis link runs the callback of the one reply it awaited (redis/link.cpp).
// There the caller goes on in the reply's turn and its next command is written in it. With more
// replies awaited it would not pay: every caller would go on inside the read of the batch, its
// command written only after the batch, and the client and the server would take turns instead
// of working at once (workload d: 45 % fewer cycles). Nested scopes restore what they found.
class inline_completions {
public:
    explicit inline_completions(bool allow) noexcept : before_(std::exchange(allowed_, allow)) {}
    inline_completions(const inline_completions&) = delete;
    inline_completions& operator=(const inline_completions&) = delete;
    ~inline_completions() { allowed_ = before_; }
    static bool allowed() noexcept { return allowed_; }

private:
    // Initial-exec (async/pool.hpp): read for every completion of a reply.
    static inline thread_local bool allowed_ ZKCORO_TLS_INITIAL_EXEC = false;
    bool before_;
};

// A pending operation completing with void(error_code, Args...).
template <class... Args>
class op_state : public op_base {
public:
    using handler_type = any_handler<void(error_code, Args...)>;
    using io_strand = asio::strand<asio::io_context::executor_type>;

    op_state(handler_type h, const asio::any_io_executor& io_ex)
        : handler_(std::move(h)), io_ex_(io_ex), io_ctx_(io_ex_.target<asio::io_context::executor_type>()),
          io_strand_(io_ctx_ ? nullptr : io_ex_.target<io_strand>())
    {
        // The common case: the handler runs on the client's own executor (a coroutine on the
        // same io_context). Then one post to it suffices, and the work is tracked through the
        // client's executor, which needs no allocation (the type-erased completion executor
        // wrapping an any_io_executor is a shared, reference-counted object). A handler on an
        // io_context's own executor (a coroutine's, where the client runs on a strand) keeps that
        // executor typed, its work tracked in place: no allocation, no type-erased call. Any other
        // case keeps its executor and work apart, so that a pending operation of the common case
        // does not carry two unused type-erased executors (about 60 bytes per waiting task).
        // Asked with the io_context's own executor as the candidate where there is one: wrapping
        // that in the completion executor needs no allocation, where wrapping an any_io_executor
        // does (a shared target), for every operation whose handler has no executor of its own.
        // The Redis client's strand is held in place the same way. The targets of io_ex_ are
        // looked up once (each failed lookup compares type names with strcmp).
        auto ex = candidate();
        bool same = false;
        const asio::io_context::executor_type* handler_ctx = nullptr;
        const io_strand* st = nullptr;
        const asio::io_context::executor_type* c = nullptr;
        // The same tests as ever (the handler's any_io_executor equal to ours, its io_context's or
        // strand's executor equal to our target), the likeliest one first.
        if (io_strand_ && (st = ex.template target<io_strand>()))
            // The Redis client's strand: its own replies and internal steps complete there.
            same = *st == *io_strand_;
        else if (io_ctx_ && (c = ex.template target<asio::io_context::executor_type>()))
            same = *c == *io_ctx_;
        else if (auto* t = ex.template target<asio::any_io_executor>(); t && *t == io_ex_)
            same = true;
        else if (!io_ctx_)
            c = ex.template target<asio::io_context::executor_type>();
        if (!same)
            handler_ctx = c;
        if (same) {
            if (io_strand_)
                work_.template emplace<tracked_strand>(asio::prefer(*io_strand_, asio::execution::outstanding_work.tracked));
            else if (io_ctx_)
                work_.template emplace<tracked_context_executor>(
                    asio::prefer(*io_ctx_, asio::execution::outstanding_work.tracked));
            else
                work_.template emplace<asio::any_io_executor>(
                    asio::prefer(io_ex_, asio::execution::outstanding_work.tracked));
        } else if (handler_ctx) {
            handler_ctx_ = true;
            work_.template emplace<tracked_context_executor>(
                asio::prefer(*handler_ctx, asio::execution::outstanding_work.tracked));
        } else {
            auto work = asio::prefer(ex, asio::execution::outstanding_work.tracked);
            elsewhere_ = std::make_unique<other_executor>(other_executor{std::move(ex), std::move(work)});
        }
    }

    // Posts the handler to its executor, never running it inline. Thread-safe; first call wins.
    template <class... Vs>
    bool complete(error_code ec, Vs&&... vs)
    {
        return finish(false, ec, std::forward<Vs>(vs)...);
    }

    // Completes from a completion of our own that runs on the client's executor (a reply's, a
    // timer's): the handler runs inline when it runs on that executor too, saving a post and a
    // turn of the event loop. Never from an initiating function, nor with a lock held, nor with
    // work left to do after it. Thread-safe; first call wins.
    template <class... Vs>
    bool complete_here(error_code ec, Vs&&... vs)
    {
        return finish(true, ec, std::forward<Vs>(vs)...);
    }

    void fail(error_code ec) override { complete(ec, Args{}...); }

    // Connects the caller's cancellation slot: terminal and partial cancellation complete the
    // caller with operation_aborted at once; the request itself goes on (see op_base::abandoned).
    void bind_cancellation()
    {
        auto slot = asio::get_associated_cancellation_slot(handler_);
        if (!slot.is_connected())
            return;
        std::weak_ptr<op_base> weak = shared_from_this();
        bound_ = true;
        slot.assign([weak](asio::cancellation_type t) {
            if ((t & (asio::cancellation_type::terminal | asio::cancellation_type::partial)) ==
                asio::cancellation_type::none)
                return;
            if (auto self = weak.lock()) {
                self->abandoned = true;
                self->fail(make_error_code(asio::error::operation_aborted));
            }
        });
    }

    // Connects the caller's cancellation slot to `f` (called with the cancellation type); the
    // slot is cleared when the operation completes.
    template <class F>
    void bind_cancellation_with(F&& f)
    {
        auto slot = asio::get_associated_cancellation_slot(handler_);
        if (!slot.is_connected())
            return;
        bound_ = true;
        slot.assign(std::forward<F>(f));
    }

    const asio::any_io_executor& io_executor() const noexcept { return io_ex_; }
    // The caller's cancellation slot, for operations that hand it on (e.g. to co_spawn).
    asio::cancellation_slot cancellation_slot() const noexcept
    {
        return asio::get_associated_cancellation_slot(handler_);
    }

private:
    template <class... Vs>
    bool finish(bool here, error_code ec, Vs&&... vs)
    {
        if (done.exchange(true))
            return false;
        auto h = std::move(handler_);
        // The function that runs the handler, carrying `work` (the tracked executor) until then.
        auto make_run = [&](auto work) {
            return [h = std::move(h), ec, args = std::make_tuple(Args(std::forward<Vs>(vs))...), work = std::move(work),
                    bound = bound_.load()]() mutable {
                // The cancellation handler we installed must not outlive the operation. A slot we
                // handed on (to co_spawn) is its user's to clear, not ours.
                auto slot = asio::get_associated_cancellation_slot(h);
                if (bound && slot.is_connected())
                    slot.clear();
                std::apply([&](auto&&... a) { std::move(h)(ec, std::move(a)...); }, std::move(args));
            };
        };
        if (!elsewhere_) {
            // To the handler's own executor: one hop where its type says how (a coroutine's
            // any_io_executor, an io_context's); else posted through the client's I/O executor
            // first, as a type-erased completion executor cannot be asked not to block. From a
            // completion of ours (`here`) where inline_completions allows it, it is dispatched, as
            // Asio completes an operation after its first wait: a coroutine on the io_context that
            // runs the Redis client's strand goes on inline, in the reply's callback, and its next
            // command is written in that turn (no post, no extra turn of the reactor). Posted
            // otherwise. On the client's executor itself, `here` is enough.
            if (handler_ctx_)
                here = here && inline_completions::allowed();
            // Typed where io_ex_ (or the handler's io_context) is known: the posted function
            // takes a recycled block (async/pool.hpp) rather than one of Asio's two cached ones,
            // and a dispatch on the strand from within it runs the function in place (through the
            // type-erased executor it was wrapped in an executor_function first, and the strand
            // copied twice).
            if (auto* st = std::get_if<tracked_strand>(&work_)) {
                auto run = make_run(std::move(*st));
                work_.template emplace<std::monostate>();
                if (here)
                    dispatch_pooled(*io_strand_, std::move(run));
                else
                    post_pooled(*io_strand_, std::move(run));
            } else if (auto* c = std::get_if<tracked_context_executor>(&work_)) {
                const auto ctx = asio::prefer(*c, asio::execution::outstanding_work.untracked);
                auto run = make_run(std::move(*c));
                work_.template emplace<std::monostate>();
                if (here)
                    dispatch_pooled(ctx, std::move(run));
                else
                    post_pooled(ctx, std::move(run));
            } else {
                auto run = make_run(std::exchange(std::get<asio::any_io_executor>(work_), asio::any_io_executor{}));
                if (here)
                    asio::dispatch(io_ex_, std::move(run));
                else
                    asio::post(io_ex_, std::move(run));
            }
            return true;
        }
        here = here && inline_completions::allowed();
        auto run = make_run(std::exchange(elsewhere_->work, asio::any_completion_executor{}));
        if (auto* any = elsewhere_->ex.template target<asio::any_io_executor>()) {
            if (here)
                asio::dispatch(*any, pooled(std::move(run)));
            else
                asio::post(*any, pooled(std::move(run)));
        } else if (auto* ctx = elsewhere_->ex.template target<asio::io_context::executor_type>()) {
            if (here)
                dispatch_pooled(*ctx, std::move(run));
            else
                post_pooled(*ctx, std::move(run));
        } else
            asio::post(io_ex_, asio::bind_executor(elsewhere_->ex, std::move(run)));
        // Our copy of the handler's executor goes now, while the posted handler still holds its
        // own: completed from another thread (the handle closer's), a copy kept until this state's
        // end could be the last one, destroyed after its context (client_impl.cpp, handle_closer).
        elsewhere_.reset();
        return true;
    }

    // The handler's associated executor, with the I/O executor's own target as the candidate.
    asio::any_completion_executor candidate() const
    {
        if (io_ctx_)
            return asio::get_associated_executor(handler_, *io_ctx_);
        if (io_strand_)
            return asio::get_associated_executor(handler_, *io_strand_);
        return asio::get_associated_executor(handler_, io_ex_);
    }

    // The handler's own executor, when it is not the client's, and the work that keeps its
    // execution context from running out while we are pending.
    struct other_executor {
        asio::any_completion_executor ex;
        asio::any_completion_executor work;
    };

    using tracked_context_executor =
        decltype(asio::prefer(std::declval<const asio::io_context::executor_type&>(),
                              asio::execution::outstanding_work.tracked));
    using tracked_strand =
        decltype(asio::prefer(std::declval<const io_strand&>(), asio::execution::outstanding_work.tracked));

    handler_type handler_;
    std::atomic<bool> bound_{false};
    asio::any_io_executor io_ex_;
    // io_ex_'s target when it is an io_context's executor, or else the Redis client's strand;
    // null otherwise. They point into io_ex_, which never changes.
    const asio::io_context::executor_type* io_ctx_;
    const io_strand* io_strand_;
    // The work on the executor the handler runs on, held typed where it is known: the client's
    // (the strand, the io_context's executor, else the type-erased one), or the handler's own
    // io_context's (handler_ctx_); else elsewhere_. Empty once completed.
    std::variant<std::monostate, tracked_context_executor, tracked_strand, asio::any_io_executor> work_;
    bool handler_ctx_ = false;
    std::unique_ptr<other_executor> elsewhere_;
};

// Completes `handler` with `ec` (and default values), posted to a system executor: for an
// operation asked of an empty handle (a moved-from guard, an empty watch), which has no
// executor of its own.
template <class... Args>
void fail_empty_handle(any_handler<void(error_code, Args...)> handler, error_code ec)
{
    make_pooled<op_state<Args...>>(std::move(handler), asio::any_io_executor(asio::system_executor()))->fail(ec);
}

}  // namespace zkcoro::detail

#endif
