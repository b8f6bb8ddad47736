// Issue 38: a waiter whose own node someone else deletes while it waits (an operator's cleanup, a
// reaper) must not be granted when its predecessor goes. Three participants on one queue, each on
// a session of its own: A holds, B waits behind A, C waits behind B. An observer deletes B's node
// once B and C watch their predecessors (seen in the server's watch list, not after a sleep); then
// A releases. C must hold alone; B must never get a guard whose node does not exist, and never
// hold while C holds: it starts over behind C and holds after C (or times out).
#ifndef ZKCORO_TESTS_INTEGRATION_DELETED_WAITER_HPP
#define ZKCORO_TESTS_INTEGRATION_DELETED_WAITER_HPP

#include "common.hpp"

#include <zkcoro/path.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace zktest {

// What the scenario needs of a recipe: how to acquire and release one participant's turn (any
// of them may be a guard or a leadership: the callbacks hide which).
struct participant_ops {
    // Acquires the lock at `path` on client `c` within `timeout`; returns the node path held
    // (empty: not acquired).
    std::function<asio::awaitable<std::string>(zkcoro::client& c, const std::string& path, std::chrono::seconds timeout)>
        acquire;
    // Releases what the last acquire on client `c` took.
    std::function<asio::awaitable<void>(zkcoro::client& c)> release;
    // Drops every lock object made for a round (called before its clients end).
    std::function<void()> reset = [] {};
};

// The children of `path` whose ephemeral owner is session `sid`.
inline asio::awaitable<std::vector<std::string>> nodes_of_session(zkcoro::client& observer, const std::string& path,
                                                                  std::int64_t sid)
{
    std::vector<std::string> r;
    auto [ec, ch] = co_await observer.async_get_children(path, asio::as_tuple(asio::use_awaitable));
    if (ec)
        co_return r;
    for (auto& name : ch.children) {
        auto [eec, e] = co_await observer.async_exists(zkcoro::join_path(path, name), asio::as_tuple(asio::use_awaitable));
        if (!eec && e.stat && e.stat->ephemeral_owner == sid)
            r.push_back(name);
    }
    co_return r;
}

// Whether session `sid` watches `node` (the server's "wchp": each path, then its sessions).
inline bool watched_by(const std::string& node, std::int64_t sid)
{
    auto text = shared_server().four_letter("wchp");
    auto pos = text.find(node + "\n");
    if (pos == std::string::npos)
        return false;
    auto end = text.find("\n/", pos + node.size());
    auto sessions = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    return sessions.find(fmt::format("0x{:x}", static_cast<std::uint64_t>(sid))) != std::string::npos;
}

// Runs the scenario on queue `queue` (where the participants' nodes are), with A, B and C from
// `a`, `b` and `c` (the same recipe, or, for a shared_mutex, different sides).
inline void deleted_waiter_scenario(std::string_view name, std::function<std::string(const std::string&)> queue_of,
                                    participant_ops a, participant_ops b, participant_ops c, int rounds = 2)
// (`queue_of`: the queue's path for a lock path.)
{
    for (int round = 0; round < rounds; ++round) {
        CAPTURE(round);
        run_with_clients({.name = name, .clients = 4, .limit = 45s}, [&](fixture& f) -> asio::awaitable<void> {
            auto [ca, cb, cc, obs] = f.clients<4>();
            const auto queue = queue_of(f.path);
            auto ex = f.executor();
            auto a_node = co_await a.acquire(ca, f.path, 10s);
            REQUIRE_FALSE(a_node.empty());

            // B's and C's turns, as intervals, and whether each node existed, owned by its
            // holder's session, when its acquire returned.
            struct turn {
                bool done = false;
                bool checked = false;  // node_existed is known (the observer's exists answered)
                std::string node;
                bool node_existed = false;
                std::string why;  // when it did not
                std::chrono::steady_clock::time_point from, to;
            };
            turn tb, tc;
            bool c_may_release = false;
            auto take = [&](zkcoro::client& me, participant_ops& ops, turn& t, bool is_c) -> asio::awaitable<void> {
                t.node = co_await ops.acquire(me, f.path, 20s);
                t.from = std::chrono::steady_clock::now();
                if (!t.node.empty()) {
                    // (A connection loss of the observer's, on a loaded machine, is asked again.)
                    auto [ec, e] = co_await obs.async_exists(t.node, asio::as_tuple(asio::use_awaitable));
                    for (int i = 0; i < 3 && zkcoro::is_retriable(ec); ++i) {
                        co_await wait_for_state(obs, zkcoro::session_state::connected);
                        std::tie(ec, e) = co_await obs.async_exists(t.node, asio::as_tuple(asio::use_awaitable));
                    }
                    t.node_existed = !ec && e.stat && e.stat->ephemeral_owner == me.session().id;
                    if (!t.node_existed)
                        t.why = ec ? ec.message()
                                   : !e.stat ? std::string("no such node")
                                             : fmt::format("owned by session {:x}, not {:x}", e.stat->ephemeral_owner,
                                                           me.session().id);
                    t.checked = true;
                    if (is_c)
                        co_await eventually([&]() -> asio::awaitable<bool> { co_return c_may_release; }, 15000ms);
                    t.to = std::chrono::steady_clock::now();
                    co_await ops.release(me);
                }
                t.done = true;
            };
            asio::co_spawn(ex, take(cb, b, tb, false), asio::detached);
            std::string b_node;
            REQUIRE(co_await eventually([&]() -> asio::awaitable<bool> {
                auto mine = co_await nodes_of_session(obs, queue, cb.session().id);
                if (mine.size() != 1 || !watched_by(a_node, cb.session().id))
                    co_return false;
                b_node = zkcoro::join_path(queue, mine[0]);
                co_return true;
            }, 10000ms));
            asio::co_spawn(ex, take(cc, c, tc, true), asio::detached);
            REQUIRE(co_await eventually([&]() -> asio::awaitable<bool> {
                co_return (co_await nodes_of_session(obs, queue, cc.session().id)).size() == 1 &&
                    watched_by(b_node, cc.session().id);
            }, 10000ms));

            // Someone else deletes B's node while B and C wait; then A goes.
            co_await obs.async_remove(b_node, -1);
            co_await a.release(ca);

            REQUIRE_MESSAGE(co_await eventually([&]() -> asio::awaitable<bool> { co_return tc.checked || tc.done; },
                                                10000ms),
                            "C was not granted after A released");
            CHECK_MESSAGE(tc.node_existed, "C was granted a node that did not exist: " << tc.node << ": " << tc.why);
            // B has either (wrongly) been granted, or queued anew behind C.
            REQUIRE(co_await eventually([&]() -> asio::awaitable<bool> {
                if (tb.done || !tb.node.empty())
                    co_return true;
                auto mine = co_await nodes_of_session(obs, queue, cb.session().id);
                co_return mine.size() == 1 && zkcoro::join_path(queue, mine[0]) != b_node;
            }, 10000ms));
            CHECK_MESSAGE(tb.node.empty(), "B was granted while C held the lock, with node " << tb.node
                                                                                            << " (deleted: " << b_node << ")");
            c_may_release = true;
            REQUIRE_MESSAGE(co_await eventually([&]() -> asio::awaitable<bool> { co_return tb.done && tc.done; }, 20000ms),
                            "B or C did not finish");
            CHECK(tc.done);
            // B holds after C, on a node of its own that exists, or reports "not acquired".
            if (!tb.node.empty()) {
                CHECK_MESSAGE(tb.node != b_node, "B was granted its deleted node " << b_node);
                CHECK_MESSAGE(tb.node_existed, "B was granted a node that did not exist: " << tb.node << ": " << tb.why);
                CHECK_MESSAGE(tb.from >= tc.to, "B's turn began inside C's");
            }
            CHECK((co_await nodes_of_session(obs, queue, cb.session().id)).empty());
            a.reset();
            b.reset();
            c.reset();
        });
    }
}

}  // namespace zktest

#endif
