// The state behind a redis_client (internal): the command link, the subscribe-mode link opened at
// the first subscription, the subscriptions, and the scripts run by their SHA1.
#ifndef ZKCORO_SRC_REDIS_REDIS_IMPL_HPP
#define ZKCORO_SRC_REDIS_REDIS_IMPL_HPP

#include "redis/link.hpp"

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace zkcoro::detail {

class cluster_router;
struct cluster_answer_site;

// What a subscriber hears on its channel: the subscription is (again) in place, so anything
// published from now on arrives (after a reconnection messages may have been missed: look
// again), or a message (its text comes with it; empty with `subscribed`).
enum class channel_event { subscribed, message };

class redis_impl : public std::enable_shared_from_this<redis_impl> {
public:
    redis_impl(asio::any_io_executor ex, std::string_view url, redis_options opts);

    // All below on the strand.
    // Sends `args` (read during the call: sent at once when connected, copied into the queue otherwise); with `script`,
    // see redis_link::send.
    void exec(command_args args, std::shared_ptr<reply_op> op, const std::string* script = nullptr);
    // Runs a Lua script by its SHA1 (EVALSHA), as EVAL the first time on a connection (which
    // loads it). NOSCRIPT (the server's cache emptied under the connection) fails the command,
    // and every command pipelined behind it, with connection_lost, and reconnects.
    // `script` must outlive the command (it is referred to until it is sent): a static string.
    void eval(const std::string& script, const std::string& sha1, command_args keys_and_args, int nkeys,
              std::shared_ptr<reply_op> op);
    // redis+cluster:// only: eval, and where its answer came from (see cluster_router::exec_tracked;
    // `where` may be null). The script runs as its sharded_script (SPUBLISH).
    void cluster_eval_tracked(const std::string& script, const std::string& sha, command_args keys_and_args,
                              int nkeys, std::shared_ptr<reply_op> op, std::shared_ptr<cluster_answer_site> where);
    std::uint64_t subscribe(const std::string& channel, std::function<void(channel_event, std::string_view)> fn);
    void unsubscribe(const std::string& channel, std::uint64_t id);
    void connect(std::shared_ptr<op_state<>> op);
    void wait_state(redis_state known, std::shared_ptr<op_state<redis_state>> op);
    void close();
    // Called (on the strand) when close() runs: the lock's waiters give up at once.
    std::uint64_t add_close_hook(std::function<void()> fn);
    void remove_close_hook(std::uint64_t id);
    bool closing() const noexcept { return closing_; }
    void log(log_level level, std::string_view message) const;

    asio::any_io_executor ex;
    redis_strand strand;
    redis_url url;
    error_code url_ec;
    std::string url_why;
    redis_options opts;
    std::atomic<redis_state> state{redis_state::idle};
    std::atomic<std::uint64_t> connects{0}, sent{0};
    std::atomic<std::uint64_t> failovers{0};  // +switch-master announcements followed
    // redis+cluster:// (tests): the router, null before the first command or connect.
    cluster_router* cluster() const noexcept { return cluster_.get(); }
    std::mutex error_m;
    std::string error_text;  // why the client closed (bad URL, first connection failed); guarded by error_m
    std::string server_text;  // HOST:PORT of the last connection (server()); guarded by error_m

private:
    void on_state(redis_state s);
    // Why the client is closed: the first connection's failure, or closed.
    error_code closed_reason() const;
    void on_push(const redis_reply& r);
    std::shared_ptr<redis_link> sub_link();
    void watch();  // redis+sentinel://: follow +switch-master
    void start_cluster();  // redis+cluster://: the router instead of the command link
    void cluster_exec(command_args args, std::shared_ptr<reply_op> op, const std::string* script);
    // redis+cluster:// (cluster_pubsub.cpp): the channel's sharded subscription (first: its first
    // listener); whether it is in place now.
    bool cluster_subscribe(const std::string& channel, bool first);
    void cluster_unsubscribe(const std::string& channel);

    std::shared_ptr<redis_link> watcher_;
    std::shared_ptr<redis_link> cmd_;
    std::shared_ptr<redis_link> sub_;
    // redis+cluster:// only (then cmd_ stays null): the slot map and a link per master.
    std::shared_ptr<cluster_router> cluster_;
    std::vector<std::shared_ptr<op_state<>>> connect_waiters_;
    std::vector<std::pair<redis_state, std::shared_ptr<op_state<redis_state>>>> state_waiters_;
    std::map<std::string, std::map<std::uint64_t, std::function<void(channel_event, std::string_view)>>> subs_;
    std::uint64_t next_sub_ = 1;
    std::map<std::uint64_t, std::function<void()>> close_hooks_;
    std::uint64_t next_hook_ = 1;
    bool closing_ = false;
};

// SHA1 of a script, in hex (as EVALSHA wants it).
std::string script_sha1(const std::string& script);

}  // namespace zkcoro::detail

#endif
