// Redis Cluster (internal): the slot map of a redis+cluster:// client, one link per master, and
// the routing of each command to the master of its key's slot, following MOVED and ASK.
//
// Only a redis+cluster:// client has a router: redis_impl::exec reaches it from the branch it
// takes when it has no command link, which a redis:// or redis+sentinel:// client takes once
// (its first command), so their commands cost nothing more.
#ifndef ZKCORO_SRC_REDIS_CLUSTER_HPP
#define ZKCORO_SRC_REDIS_CLUSTER_HPP

#include "redis/link.hpp"
#include "redis/slot.hpp"

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zkcoro::detail {

// Link hooks for a link to one of the seed nodes of a redis+cluster:// URL: each attempt takes
// the next seed; a first connection tries every seed once before giving up.
void set_cluster_seed_hooks(redis_link::hooks& h, const redis_url& url);

// Where a command was answered: the node (an index) and how many times its link had connected
// then. Filled in before the command's op completes.
struct cluster_answer_site {
    std::size_t node = 0;
    std::uint64_t connects = 0;
};

class cluster_router : public std::enable_shared_from_this<cluster_router> {
public:
    // `on_state` gets the client's state: connecting until the first slot map is in, connected
    // while the link that reads the map is up, reconnecting after it dropped, closed.
    cluster_router(redis_strand strand, redis_url url, redis_options opts, std::function<void(redis_state)> on_state);
    cluster_router(const cluster_router&) = delete;
    cluster_router& operator=(const cluster_router&) = delete;

    // All on the strand.
    void start();
    // Sends to the master of the command's slot (see routing_key), once the map is known; an
    // answer MOVED updates the map, refreshes it and sends again; ASK sends ASKING and the
    // command to the node named (the map stays). At most max_redirections of these, then the
    // last reply (error_reply). TRYAGAIN (a multi-key command whose keys are partly moved while
    // its slot migrates) sends again every 20 ms for up to try_again_for (2 s from the first
    // TRYAGAIN, whatever each try's round trips take), then the reply (try_again: retriable).
    // No master for the slot in the map: CLUSTERDOWN (cluster_down).
    void exec(command_args args, std::shared_ptr<reply_op> op, const std::string* script);
    using answer_site = cluster_answer_site;
    // exec, and tells where the final answer came from (for WAIT on the same connection).
    void exec_tracked(command_args args, std::shared_ptr<reply_op> op, const std::string* script,
                      std::shared_ptr<answer_site> where);
    // Sends on the link of `node` as it is (no routing, no redirection): WAIT after a lock write.
    void exec_on(std::size_t node, command_args args, std::shared_ptr<reply_op> op);
    // How many times the link of `node` has connected (0 when it has none).
    std::uint64_t node_connects(std::size_t node) const;
    void close();
    error_code last_code() const;
    std::string last_error() const;
    std::string server() const;  // the node the map was last read from, HOST:PORT

    // Sharded pub/sub (cluster_pubsub.cpp): each channel subscribed with SSUBSCRIBE on a link to
    // the master of its slot (the lock's shard: the channel shares the lock keys' hash tag), moved
    // when the map changes, a MOVED answers the subscription or the node unsubscribes us (its slot
    // left); the scripts' SPUBLISH reaches that shard only. `on_push` gets their ssubscribe and
    // smessage frames (and message: a PUBLISH of the same name by another client).
    void ssubscribe(const std::string& channel);
    void sunsubscribe(const std::string& channel);
    bool ssubscribed(const std::string& channel) const;  // placed, and that link connected
    std::function<void(const redis_reply&)> on_push;

    static constexpr int max_redirections = 16;
    static constexpr std::chrono::milliseconds try_again_for{2000};
    std::uint64_t sent = 0, connects = 0;
    // For tests and logs; try_again_answers: commands completed with TRYAGAIN (past
    // try_again_for, or the router closed).
    std::uint64_t moved = 0, asked = 0, tried_again = 0, try_again_answers = 0, refreshes = 0;

    struct routed;  // one command on its way (cluster.cpp)

private:
    struct node {
        std::string host;
        std::uint16_t port = 0;
        std::shared_ptr<redis_link> link;  // opened at the first command for this node
        std::shared_ptr<redis_link> sub;   // sharded pub/sub: opened at the first channel on it
    };
    void on_control_state(redis_state s);
    void refresh();
    void on_map(error_code ec, const redis_reply& r, bool shards);
    void route(std::shared_ptr<routed> c);
    void send(std::shared_ptr<routed> c, std::size_t to_node, bool asking);
    void answered(std::shared_ptr<routed> c, std::size_t from_node, error_code ec, redis_reply r);
    std::size_t node_index(std::string_view host, std::uint16_t port);
    redis_link& link_of(std::size_t i);
    redis_link& sub_of(std::size_t i);
    void place_channels();
    void sub_push(std::size_t node, const redis_reply& r);

    redis_strand strand_;
    redis_url url_;
    redis_options opts_;
    std::function<void(redis_state)> on_state_;
    std::shared_ptr<redis_link> control_;  // to a seed: reads the map
    std::vector<node> nodes_;              // masters (and former masters) by address
    std::array<std::int16_t, 16384> slots_;  // index into nodes_, -1: not known
    std::deque<std::shared_ptr<routed>> waiting_;  // before the first map
    bool mapped_ = false;
    bool refreshing_ = false;
    bool refresh_again_ = false;
    bool closed_ = false;
    std::string map_error_;
    std::map<std::string, std::size_t> channels_;  // sharded channel -> node it is subscribed on
};

// The text a script runs as on a cluster: its PUBLISH calls ("('publish',") made SPUBLISH, so
// that a release tells the lock's shard only (the channel shares the keys' slot, which a script
// may publish to), with its own SHA1. A script that publishes nothing runs as it is. Made once
// per script (by the address of its static text) and kept until exit.
const std::string& sharded_script(const std::string& text, const std::string*& sha);

}  // namespace zkcoro::detail

#endif
