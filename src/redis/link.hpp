// One Redis connection (internal): a hiredis asynchronous context on a strand, whose socket Asio
// reads (into the link's buffer, handed to hiredis' reader) and hiredis writes, the handshake
// (AUTH, SELECT, PING), commands queued until connected, and reconnection with backoff after a
// drop. The command connection and the subscribe-mode connection of a redis_client are one link
// each.
#ifndef ZKCORO_SRC_REDIS_LINK_HPP
#define ZKCORO_SRC_REDIS_LINK_HPP

#include "async/op_state.hpp"

#include <zkcoro/redis.hpp>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/container/small_vector.hpp>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

struct redisAsyncContext;

namespace zkcoro::detail {

// The client's strand, type-erased. Over an io_context's own executor (the common case) it is a
// strand<io_context::executor_type>, which an any_io_executor holds in place: posting to it and
// the work it tracks need no allocation (a strand<any_io_executor> costs about 7 per post).
using redis_strand = asio::any_io_executor;
redis_strand make_redis_strand(const asio::any_io_executor& ex);
// asio::dispatch(s, pooled(f)); typed where the strand is over an io_context's own executor (no
// type-erased call, no work_dispatcher: async/pool.hpp, dispatch_pooled).
template <class F>
void dispatch_on(const redis_strand& s, F&& f)
{
    if (const auto* st = s.target<asio::strand<asio::io_context::executor_type>>())
        return dispatch_pooled(*st, std::forward<F>(f));
    asio::dispatch(s, pooled(std::forward<F>(f)));
}
using reply_op = op_state<redis_reply>;
// A command's words, read (not kept) by the call they are passed to.
using command_args = std::span<const std::string_view>;
using arg_views = boost::container::small_vector<std::string_view, 8>;
inline arg_views views_of(const std::vector<std::string>& a) { return arg_views(a.begin(), a.end()); }

class redis_link : public std::enable_shared_from_this<redis_link> {
public:
    struct hooks {
        std::function<void()> ready;                 // connected (after the handshake)
        std::function<void(redis_state)> state;      // any state change
        std::function<void(const redis_reply&)> push;  // subscribe mode: every message
        // Sentinel mode: called before each connection attempt to find the server to connect to;
        // it calls back (on the strand) with the endpoint or an error and its text.
        using resolved = std::function<void(error_code, std::string, redis_url::endpoint)>;
        std::function<void(resolved)> resolve;
        // Whether a first connection that failed with this code is tried again (with backoff)
        // rather than given up; `tries` counts the failed ones so far.
        std::function<bool(error_code, int tries)> retry_first;
    };

    redis_link(redis_strand strand, redis_url url, redis_options opts, bool subscriber, hooks h);
    redis_link(const redis_link&) = delete;
    redis_link& operator=(const redis_link&) = delete;
    ~redis_link();

    // All on the strand.
    void start();  // the first connection (no-op unless idle)
    // Sends now when connected (the arguments are read, not kept), else once connected (a copy
    // waits in the queue); fails with the reason when closed.
    // With `script` (a static string), `args` is EVALSHA <sha of script> ...: the first time a
    // connection runs that script it is sent as EVAL <script> ... instead, which also loads it
    // into the server's cache, in order with everything else on the connection. A NOSCRIPT reply
    // (the cache was emptied under the connection: SCRIPT FLUSH) drops the connection: that
    // command and every one pipelined behind it fail with connection_lost (a retried EVAL would
    // run after them, out of order: a take-back before the grant it undoes); the next connection
    // loads the scripts again.
    void send(command_args args, std::shared_ptr<reply_op> op, const std::string* script = nullptr);
    // Subscribe mode: SUBSCRIBE/UNSUBSCRIBE with replies through hooks.push.
    void send_push(std::vector<std::string> args);
    void close();
    // Drops the connection (its pending commands fail with connection_lost) and reconnects at once,
    // asking `resolve` again: a failover, or a READONLY reply. `why` goes to the log.
    void drop(std::string why);  // defined in sentinel.cpp
    // Fails every queued command with `ec` and closes (the first connection failed).
    redis_state state() const noexcept { return state_; }
    const redis_url& url() const noexcept { return url_; }  // host and port: the server of the last attempt
    const std::string& last_error() const noexcept { return last_error_; }
    error_code last_code() const noexcept { return last_code_; }
    std::uint64_t connects = 0;
    std::uint64_t sent = 0;

    struct attachment;

private:
    void attempt_context_error(const redisAsyncContext* ac);
    void attempt();
    void connect_to(const redis_url::endpoint& e);
    void on_connected(int status);
    void handshake_reply(int step, const void* reply);
    void ready();  // the handshake is done
    void free_context();  // redisAsyncFree: the context goes, its pending replies fail
    void on_context_gone();
    void set_state(redis_state s);
    void give_up(error_code ec, std::string why);  // the first connection failed
    void flush();
    void fail_attempt(error_code ec, std::string why);
    void dispatch_send(command_args args, std::shared_ptr<reply_op> op, const std::string* script);
    void noscript(redisAsyncContext* ac);  // a NOSCRIPT reply on `ac`: drop it (see send)

    static void connect_cb(const redisAsyncContext* ac, int status);
    static void reply_cb(redisAsyncContext* ac, void* reply, void* privdata);
    static void handshake_cb(redisAsyncContext* ac, void* reply, void* privdata);
    static void push_cb(redisAsyncContext* ac, void* reply, void* privdata);

    redis_strand strand_;
    redis_url url_;
    redis_options opts_;
    bool subscriber_;
    hooks hooks_;
    redis_state state_ = redis_state::idle;
    bool ever_connected_ = false;
    bool ready_ = false;      // handshake done on the current context
    bool closing_ = false;
    redisAsyncContext* ac_ = nullptr;
    std::shared_ptr<attachment> att_;
    // False once the link is being destroyed with a context still open (its client's executor
    // shut down before close() ran): the replies the free then reports complete nothing.
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
    struct queued {
        std::vector<std::string> args;
        std::shared_ptr<reply_op> op;
        const std::string* script;
    };
    std::deque<queued> queue_;
    // The scripts sent on the current context (as EVAL, which loads them): EVALSHA from then on.
    std::vector<const std::string*> scripts_sent_;
    // The context that answered NOSCRIPT: its replies from then on are not delivered (their
    // commands fail with connection_lost) until it is gone.
    const redisAsyncContext* poisoned_ = nullptr;
    std::vector<std::weak_ptr<reply_op>> inflight_;  // sent, reply not seen (some done already)
    std::size_t inflight_prune_at_ = 64;
    std::vector<std::vector<std::string>> push_queue_;
    asio::steady_timer timer_;  // connect timeout, then reconnection backoff
    std::chrono::milliseconds backoff_{0};
    bool resolving_ = false;
    int first_failures_ = 0;
    std::chrono::steady_clock::time_point first_started_{};  // start(): opts_.first_connect_wait counts from here
    std::string last_error_;
    error_code last_code_;
    std::string attempt_error_;
    error_code attempt_code_;
    std::string out_;  // the command being written (resp.cpp, send_command), kept for the next
};

}  // namespace zkcoro::detail

#endif
