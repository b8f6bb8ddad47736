// A deterministic in-memory model of one ZooKeeper server's data tree (issue 34, item 1, first
// building block): nodes with ZooKeeper's Stat, sessions and their ephemerals, one-shot watches,
// multi, containers. Test code for the simulator to sit on: no Asio, no threads, no I/O, no clock
// of its own (the caller sets the time), and the same inputs always give the same outputs.
//
// What it is checked against: tests/sim/test_zk_world_vs_server.cpp runs seeded random sequences
// on a real ZooKeeper 3.8 and on this model and compares every reply and watch event.
//
// Ordering (ZooKeeper's guarantee, programmer's guide "Ordering Guarantees"): a client sees a
// watch event before it sees the reply of any request the server applied after the event's write,
// and it sees its own replies in request order. The model stamps every applied request (reads
// too) with a server sequence number `seq`, increasing by one per request, and every watch event
// with the `seq` of the write that fired it. A caller (later the simulator's scheduler) that
// delivers a session's events and replies in `seq` order keeps the guarantee: before a reply
// stamped `r`, deliver the session's queued events with seq <= r (take_events_through does that:
// the server sends a write's events before that write's own reply).
// Nothing is delivered by the model itself: events wait in the session's queue.
//
// Room for faults (the scheduler's part): a request "applied but its reply lost" is a call whose
// reply the scheduler drops (then disconnect); "not applied" is a call the scheduler never makes,
// or one made while the session is disconnected; a delayed reply is one the scheduler holds
// (later events of the session wait behind it, by `seq`); a disconnect and a reconnect to the
// same session are disconnect() and reconnect() (the server's side of SetWatches); an expiry is
// expire_session(). The scheduler must apply one session's requests in the order they were sent
// (ZooKeeper's FIFO client order; replies go back in that order too); requests of different
// sessions may interleave in any order. The client library's side (which watches a client holds
// and re-sends, the last zxid it saw, ZINVALIDSTATE after an expiry) is the seam's, not the model's.
#ifndef ZKCORO_TESTS_SIM_ZK_WORLD_HPP
#define ZKCORO_TESTS_SIM_ZK_WORLD_HPP

#include <zkcoro/error.hpp>
#include <zkcoro/types.hpp>

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace zksim {

using zkcoro::create_mode;
using zkcoro::error_code;
using zkcoro::node_stat;
using zkcoro::watch_event_type;

using session_id = std::int64_t;

// The requests (the write ones may also be parts of a multi).
struct create_req {
    std::string path;
    std::string data;
    create_mode mode = create_mode::persistent;
};
struct remove_req {
    std::string path;
    std::int32_t version = -1;
};
struct set_data_req {
    std::string path;
    std::string data;
    std::int32_t version = -1;
};
struct check_req {
    std::string path;
    std::int32_t version = -1;
};
using multi_op = std::variant<create_req, remove_req, set_data_req, check_req>;

// The replies. `ec` uses zkcoro's codes (zk_errc for the server's, client_errc::invalid_path and
// invalid_argument for what zkcoro's client refuses before sending), so that a seam over the model
// hands users the codes the real client gives them. `seq` is the server order (see above); 0 for a
// request refused before it reached the server.
struct create_reply {
    error_code ec;
    std::string path;  ///< the created node's path (with the sequence suffix)
    node_stat stat;
    std::uint64_t seq = 0;
};
struct stat_reply {  ///< remove (stat unused) and set_data
    error_code ec;
    node_stat stat;
    std::uint64_t seq = 0;
};
struct exists_reply {
    error_code ec;
    std::optional<node_stat> stat;  ///< empty: no such node (not an error)
    std::uint64_t seq = 0;
};
struct data_reply {
    error_code ec;
    std::string data;
    node_stat stat;
    std::uint64_t seq = 0;
};
struct children_reply {
    error_code ec;
    /// Names, in an order the caller must not rely on (ZooKeeper returns a HashSet's order). The
    /// model's order is deterministic but scrambled: by a hash of the name mixed with the world's
    /// order_salt, so code that assumes sorted children fails here too.
    std::vector<std::string> children;
    node_stat stat;  ///< the parent's
    std::uint64_t seq = 0;
};
struct multi_result {
    error_code ec;     ///< on failure: zk_errc::ok (0) before the failing op, its code, then
                       ///< runtime_inconsistency after it (as the real server reports them)
    std::string path;  ///< create: the created path
    node_stat stat;    ///< set_data: the new Stat. create: empty, as zkcoro's client reports it
                       ///< (the C client's multi create asks for no Stat)
};
struct multi_reply {
    error_code ec;  ///< the first failing op's code, or empty
    std::vector<multi_result> results;
    std::uint64_t seq = 0;
};

/// A watch event waiting in a session's queue.
struct event {
    watch_event_type type{};
    std::string path;
    std::uint64_t seq = 0;  ///< the seq of the write that fired it
    bool operator==(const event&) const = default;
};

class zk_world {
public:
    /// `order_salt` scrambles the order of get_children (see children_reply).
    explicit zk_world(std::uint64_t order_salt = 0);

    /// The time (ms) stamped into ctime/mtime of later writes. The model never reads a clock.
    void set_now(std::int64_t ms) { now_ms_ = ms; }

    // Sessions. Opening a session is a write on the real server (it takes a zxid); so here.
    session_id open_session();
    /// Ends the session as the client's close does: one transaction (one zxid) deletes its
    /// ephemerals, each deletion firing its watches; its own watches and queued events are dropped.
    /// ZooKeeper deletes them in a HashSet's order; the model in path order. no_node if unknown.
    error_code close_session(session_id s);
    /// The server expired it: the same as close for the tree (the client is told by the scheduler).
    error_code expire_session(session_id s) { return close_session(s); }
    bool alive(session_id s) const;

    /// What a client re-registers after a reconnect (SetWatches): the watches it left and has not
    /// seen fire, by the kind the client library files them under.
    struct watch_set {
        std::vector<std::string> data;   ///< get_data, and exists on a node that existed
        std::vector<std::string> exist;  ///< exists on a missing node
        std::vector<std::string> child;  ///< get_children
    };
    /// The session's connection dropped; the session lives on (until expire_session). The server
    /// forgets the connection's watches (DataTree.removeCnxn), and events queued but not sent are
    /// lost with it: take what was delivered (take_events_through) first. Until reconnect, the
    /// session's requests are not applied: zk_errc::connection_loss.
    void disconnect(session_id s);
    /// The client is back on the same session and re-registers its watches with the last zxid it
    /// saw (a reply carries the server's last zxid: last_zxid() at the time of the call). As
    /// DataTree.setWatches: a data watch fires at once NodeDeleted if the node is gone, else
    /// NodeDataChanged if its mzxid is newer, else it is armed again; an exist watch fires
    /// NodeCreated if the node exists; a child watch NodeDeleted if gone, else
    /// NodeChildrenChanged if its pzxid is newer. So a node deleted and created again while the
    /// client was away shows as a data change, and one created and deleted not at all. Returns the
    /// seq of the SetWatches (its events carry it); 0 if the session is gone.
    std::uint64_t reconnect(session_id s, std::int64_t relative_zxid, const watch_set& w);

    // Operations of a session (zk_errc::session_expired for a closed or unknown one).
    create_reply create(session_id s, const create_req& r);
    stat_reply remove(session_id s, const remove_req& r);
    exists_reply exists(session_id s, std::string_view path, bool watch = false);
    data_reply get_data(session_id s, std::string_view path, bool watch = false);
    stat_reply set_data(session_id s, const set_data_req& r);
    children_reply get_children(session_id s, std::string_view path, bool watch = false);
    /// All or nothing: the ops see each other's effects in order; the first failure rolls all back.
    multi_reply multi(session_id s, const std::vector<multi_op>& ops);

    /// One pass of ZooKeeper's ContainerManager (checkIntervalMs; the scheduler decides when): a
    /// container with no children and an internal cversion > 0 (it had a child once; a new
    /// empty container is kept) is deleted, each deletion a write with its own zxid and watches. Containers that
    /// become empty by this pass wait for the next one, as on the server. Returns the deleted paths.
    std::vector<std::string> reap_containers();

    // Observation, for tests and the scheduler.
    const std::deque<event>& pending_events(session_id s) const;
    std::vector<event> take_events(session_id s);
    /// Removes and returns the session's events with seq <= `seq` (deliver them before a reply stamped `seq`).
    std::vector<event> take_events_through(session_id s, std::uint64_t seq);
    /// Every node, one line each in path order: "path v=.. cv=.. n=.. owner=.. czxid=.. data=..".
    std::string dump() const;
    std::int64_t last_zxid() const { return zxid_; }
    std::uint64_t last_seq() const { return seq_; }
    std::optional<node_stat> stat_of(std::string_view path) const;
    /// A node's children's names, sorted (for checkers: no session, no watch, no zxid).
    std::vector<std::string> children_of(std::string_view path) const;
    /// A node's data, or nothing when there is no node (for checkers, as children_of).
    std::optional<std::string> data_of(std::string_view path) const
    {
        auto it = nodes_.find(std::string(path));
        if (it == nodes_.end())
            return std::nullopt;
        return it->second.data;
    }
    std::size_t node_count() const { return nodes_.size(); }

private:
    struct node {
        std::string data;
        node_stat stat;
        std::set<std::string> children;  // names
        // The server keeps the count of child creations as its internal cversion: the sequence
        // suffix is that count (%010d), and the cversion a client reads is 2 * creates minus the
        // children present (DataNode.copyStat: "translate from the count of the creates to the
        // count of the changes"; each child gone was one delete). So a suffix is not the cversion
        // the client sees once a child was deleted: "n-" after 2 creates and 2 deletes (cversion
        // 4) gets n-0000000002. Found by the differential test.
        std::int32_t creates = 0;
        // The server marks a container by an ephemeralOwner of its own (Long.MIN_VALUE) but shows
        // clients 0 there (DataNode.getClientEphemeralOwner): here a flag, and 0 in the Stat.
        bool container = false;
    };
    struct session {
        bool alive = true;
        bool connected = true;
        std::set<std::string> ephemerals;
        std::deque<event> events;
    };
    struct trigger {  // a watch trigger collected while a write runs, fired when it commits
        watch_event_type type;
        std::string path;
    };

    session* live(session_id s);
    error_code admit(session_id s, const std::string& path, bool sequential = false);
    template <class Reply, class Apply>
    Reply write(session_id s, const std::string& path, bool sequential, Apply apply);
    // The start of a read: admitted, given its place in the order (seq); the node, or null when
    // there is none or the read was refused (then rep.ec says why).
    template <class Reply>
    const node* read(session_id s, const std::string& path, Reply& rep);
    error_code do_create(session_id s, const create_req& r, std::string& made, std::vector<trigger>& t);
    error_code do_remove(const std::string& path, std::int32_t version, std::vector<trigger>& t,
                         bool only_if_container = false);
    error_code do_set(const std::string& path, const std::string& data, std::int32_t version,
                      std::vector<trigger>& t);
    error_code do_check(const std::string& path, std::int32_t version) const;
    void fire(const std::vector<trigger>& t);
    void deliver(std::map<std::string, std::set<session_id>>& table, const std::string& path,
                 watch_event_type type, std::set<session_id>* already);

    std::int64_t now_ms_ = 0;
    std::int64_t zxid_ = 0;
    std::uint64_t seq_ = 0;
    std::uint64_t order_salt_;
    session_id next_session_ = 1;
    std::map<std::string, node> nodes_;
    std::map<session_id, session> sessions_;
    std::set<std::string> containers_;
    // Server-side watch tables: one entry per session and path (ZooKeeper keys them by the
    // connection: a session that watches a path twice gets one event; the client library then
    // wakes every watcher it registered for that path).
    std::map<std::string, std::set<session_id>> data_watches_;   // exists and get_data
    std::map<std::string, std::set<session_id>> child_watches_;  // get_children
};

}  // namespace zksim

#endif
