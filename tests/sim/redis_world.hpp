// The simulated Redis's data (issue 34, item 2): string keys with millisecond TTLs on the
// simulated clock (and the fair lock's list and sorted set), the lock's three Lua scripts and the
// fair lock's two (redis_world_fair.cpp) as C++ models of exactly what their Lua does (by
// SHA through EVALSHA, NOSCRIPT until loaded by EVAL or SCRIPT LOAD), publish/subscribe, WAIT, and
// the few commands the client's handshake sends. A deterministic function of the commands and the
// clock: the network, the connections and the faults are redis_sim's. Checked against a real
// redis-server by integration_redis_world (test_redis_world_vs_server.cpp). The semaphore's three
// scripts: redis_world_semaphore.cpp.
#ifndef ZKCORO_TESTS_SIM_REDIS_WORLD_HPP
#define ZKCORO_TESTS_SIM_REDIS_WORLD_HPP

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace zksim {

// A whole decimal number, as Redis reads an integer argument (nullopt: not one).
std::optional<std::int64_t> integer_of(const std::string& s);

// The process part of an owner value "process:task" (Lua's string.match(v, '^[^:]*'): up to the
// first ':'), as the fair lock's and the semaphore's scripts take it.
inline std::string process_of(const std::string& v) { return v.substr(0, v.find(':')); }

// One RESP2 reply.
struct resp {
    enum class kind { nil, status, error, integer, bulk, array };
    kind type = kind::nil;
    std::int64_t integer = 0;
    std::string str;  // status, error, bulk
    std::vector<resp> elements;

    static resp nil() { return {}; }
    static resp status(std::string s) { return {kind::status, 0, std::move(s), {}}; }
    static resp error(std::string s) { return {kind::error, 0, std::move(s), {}}; }
    static resp number(std::int64_t n) { return {kind::integer, n, {}, {}}; }
    static resp bulk(std::string s) { return {kind::bulk, 0, std::move(s), {}}; }
    static resp array(std::vector<resp> e) { return {kind::array, 0, {}, std::move(e)}; }
    // Its bytes on the wire.
    std::string encode() const;
    // Readable: 1, "text", +OK, -ERR ..., (nil), [a, b].
    std::string show() const;
    bool operator==(const resp&) const = default;
};

class redis_world {
public:
    // The server's clock (TIME), in microseconds since the Unix epoch; keys expire on it.
    void set_now_us(std::int64_t us) { now_us_ = us; }
    std::int64_t now_us() const { return now_us_; }

    // Runs one command from connection `conn`: its replies (one, or one per channel of a
    // (UN)SUBSCRIBE). Messages published go to take_published().
    std::vector<resp> exec(int conn, const std::vector<std::string>& args);
    // What PUBLISH sent since the last call: (subscribed connection, the message push), in order.
    std::vector<std::pair<int, resp>> take_published();
    // The connection is gone: its subscriptions with it.
    void drop_connection(int conn);
    bool subscribed(int conn) const;

    // The keys that are there now (expired ones gone), with their values.
    std::map<std::string, std::string> live_keys();
    std::optional<std::string> get(const std::string& key);
    // Every write so far, numbered: a replica's view is the data after its first n writes.
    std::int64_t writes() const { return static_cast<std::int64_t>(log_.size()); }
    // A failover to a replica that missed the writes after the first `n`: the data as it was then
    // (scripts and subscriptions stay with the connections that have them; the script cache of
    // a replica is its own: emptied).
    void roll_back_to(std::int64_t n);

    // Modelled replicas, for WAIT's answer (0: none).
    int replicas = 0;
    // Negative control (test only): the acquire script grants even when another value holds
    // the key (a take without the owner check).
    bool broken_acquire = false;
    // Negative control (test only): the release script deletes nothing and answers 0 (as if the
    // key were not ours); the key stays until its TTL, nobody is told.
    bool broken_release = false;
    // Negative control (test only): the fair acquire script grants a free key to any acquisition,
    // not only to the queue's head (a fair lock without its order).
    bool broken_fair_order = false;
    // Negative controls (test only, redis_world_shared.cpp): the read-write lock's read script
    // grants a read lease while a writer holds the key or waits (it ignores K and P:writers); its
    // release script leaves a writer's key (answers as if it were not ours).
    bool broken_rw_read = false;
    bool broken_rw_release = false;
    long commands = 0;
    // Every grant of the acquire script gets a token above every earlier grant's of the same
    // lock (fencing counter), across failovers (roll_back_to keeps these): the first that does
    // not, or "". Two locks' tokens may be equal (TIME in microseconds).
    std::string token_drop;
    std::map<std::string, std::int64_t> last_grant_token;  // by fencing counter

    // The fair lock's order (redis_world_fair.cpp), per queue key. An acquisition is its value:
    // it arrives with the first acquire script that runs for it (granted at once or queued), and
    // is granted by the first that answers {1, token} to it; it departs when its timeout passes
    // (purged), when it heads the queue without a timeout (dropped), or by the release script
    // (left). `fifo_break`: the first grant that went to an acquisition while one that arrived
    // before it was still there (neither granted nor departed), or "". Not rolled back by a
    // failover (with failovers the order is not checked).
    struct fair_order {
        std::int64_t next = 0;
        std::map<std::string, std::int64_t> waiting;  // value -> arrival number
        long arrived = 0, granted = 0, purged = 0, dropped = 0, left = 0;
    };
    std::map<std::string, fair_order> fair;
    std::string fifo_break;

    // The semaphore's scripts (redis_world_semaphore.cpp): its order on the server, per queue key.
    // An acquisition (its value, wanting n leases: its ":s<n>" suffix) arrives with the first
    // acquire script run for it that does not find it holding, and departs as a fair lock's
    // waiter does. At every grant of leases that the value did not hold: `sem_over`, the first
    // grant after which the leases held on the server exceed the count (ARGV[5]); `sem_fifo_break`,
    // the first grant after which the leases held plus those wanted by the acquisitions that
    // arrived before it and still wait exceed the count (a later acquisition took leases an
    // earlier one waits for). Not rolled back by a failover.
    struct sem_order {
        std::int64_t next = 0;
        std::map<std::string, std::pair<std::int64_t, std::int64_t>> waiting;  // value -> (arrival, n)
        long arrived = 0, granted = 0, departed = 0, left = 0, passed = 0;  // passed: granted past an earlier waiter
    };
    std::map<std::string, sem_order> sem_orders;
    std::string sem_over, sem_fifo_break;
    // Negative controls (test only): the acquire script counts no lease as held (a grant beside
    // holders that leaves more than the count out), or grants when its own leases fit whatever
    // waits before it (a later small acquisition passes an earlier big one).
    bool broken_sem_leases = false;
    bool broken_sem_order = false;
    // Negative control (test only): the release script answers 1 and frees nothing (the lease
    // stays until its TTL passes; nobody is told).
    bool broken_sem_release = false;

private:
    struct entry {
        std::string value;
        std::int64_t expires_ms = -1;  // -1: no TTL
        enum class kind { string, list, zset } type = kind::string;
        std::vector<std::string> list;               // a list's elements, head first
        std::map<std::string, std::int64_t> zset;    // a sorted set: member -> score (integers here)
    };
    // An entry that is there (not expired), or null.
    entry* find(const std::string& key);
    void set(const std::string& key, std::string value, std::int64_t expires_ms);
    void del(const std::string& key);
    std::int64_t now_ms() const { return now_us_ / 1000; }
    std::int64_t pttl(const std::string& key);
    resp run_script(const std::string& text, const std::vector<std::string>& keys, const std::vector<std::string>& argv);
    resp publish(const std::string& channel, const std::string& message);
    // redis_world_fair.cpp: the fair lock's scripts, and the list and sorted-set commands.
    resp fair_acquire(const std::vector<std::string>& keys, const std::vector<std::string>& argv);
    resp fair_release(const std::vector<std::string>& keys, const std::vector<std::string>& argv);
    std::optional<resp> fair_types(const std::string& q, const std::string& z);
    void fair_purge(const std::string& q, const std::string& z);
    void fair_grant_order(const std::string& q, const std::string& value);
    // redis_world_semaphore.cpp: the semaphore's three scripts (nullopt: not one of them).
    std::optional<resp> sem_script(const std::string& text, const std::vector<std::string>& keys,
                                   const std::vector<std::string>& argv);
    // redis_world_shared.cpp: the read-write lock's four scripts (nullopt: `text` is none of them).
    std::optional<resp> rw_script(const std::string& text, const std::vector<std::string>& keys,
                                  const std::vector<std::string>& argv);
    resp rw_renew(const std::string& key, const std::string& readers, const std::string& value,
                  const std::string& ttl);
    std::optional<resp> exec_collection(const std::string& cmd, const std::vector<std::string>& args);
    entry* find_list(const std::string& key);
    entry* find_zset(const std::string& key);
    void put(const std::string& key, const entry& e);  // a list or a set written (gone when empty)
    void lrem(const std::string& key, std::int64_t count, const std::string& v);
    bool zrem(const std::string& key, const std::string& member);

    std::int64_t now_us_ = 1'700'000'000'000'000;
    std::map<std::string, entry> keys_;
    std::set<std::string> scripts_;  // SHAs loaded
    std::map<std::string, std::set<int>> channels_;
    std::map<int, std::set<std::string>> subs_of_;
    std::vector<std::pair<int, resp>> published_;
    // Every write, in order: (key, the entry after it; nullopt: deleted), for roll_back_to. A
    // fair script's writes are one element (Redis replicates a script's effects in MULTI/EXEC:
    // a replica has all of them or none); every other write is one of its own.
    using write = std::pair<std::string, std::optional<entry>>;
    std::vector<std::vector<write>> log_;
    std::optional<std::vector<write>> batch_;  // a fair script's writes so far
};

// The SHA1 of a script, in hex (as EVALSHA names it).
std::string sha1_hex(const std::string& text);

}  // namespace zksim

#endif
