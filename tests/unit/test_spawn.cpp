// spawn_with, the way the library runs its own coroutines under a caller's cancellation: a
// cancellation that the caller emits from outside the coroutine's executor, as the coroutine
// completes, must not touch memory that the completion freed (Asio 1.26's co_spawn, given the
// caller's slot itself, posts the emission with a raw pointer into that slot's handler).
// Deterministic: the emission is posted behind the coroutine's start, and the caller's signal is
// destroyed in the completion, before the emission runs. The sanitizer build catches a use after
// free; the plain build checks the outcome.
#include "async/coroutine.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include <doctest/doctest.h>

#include <memory>
#include <optional>
#include <tuple>

namespace asio = boost::asio;
using zkcoro::error_code;

namespace {

asio::awaitable<std::tuple<error_code, int>> answer_at_once()
{
    co_return std::tuple<error_code, int>{error_code{}, 42};
}

}  // namespace

TEST_CASE("a cancellation emitted from outside the strand after the coroutine completed is harmless")
{
    // The order of zklock's race: the coroutine has completed and its completion is on its way to
    // the caller (posted, as op_state does), the caller cancels from outside the strand (the
    // emission is posted to the strand), then the caller's completion runs and drops its signal,
    // and only then the posted emission runs. Several at once: Asio recycles a few freed handler
    // blocks per thread instead of freeing them, which would hide a use after free of one.
    constexpr int n = 8;
    asio::io_context ioc;
    auto strand = asio::make_strand(ioc);
    for (int round = 0; round < 20; ++round) {
        CAPTURE(round);
        std::unique_ptr<asio::cancellation_signal> callers[n];
        std::optional<int> results[n];
        int completed = 0;
        for (int i = 0; i < n; ++i) {
            callers[i] = std::make_unique<asio::cancellation_signal>();
            zkcoro::detail::spawn_with(asio::any_io_executor(strand), answer_at_once(), callers[i]->slot(),
                                       [&, i](error_code ec, int v) {
                                           CHECK_FALSE(ec);
                                           ++completed;
                                           // The caller's own completion, posted to its executor.
                                           asio::post(ioc, [&, i, v] {
                                               results[i] = v;
                                               callers[i].reset();  // the caller is done with its signal
                                           });
                                       });
        }
        ioc.restart();
        for (int step = 0; step < 10000 && completed < n; ++step)
            ioc.run_one_for(std::chrono::seconds(5));
        REQUIRE(completed == n);
        // Outside the strand: each emission is posted there, behind the callers' completions.
        for (auto& c : callers)
            if (c)
                c->emit(asio::cancellation_type::terminal);
        CHECK(ioc.run_for(std::chrono::seconds(5)) > 0);
        for (int i = 0; i < n; ++i) {
            CAPTURE(i);
            REQUIRE(results[i].has_value());
            CHECK(*results[i] == 42);
            CHECK_FALSE(callers[i]);
        }
    }
}
