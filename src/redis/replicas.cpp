// WAIT after the lock's writes.
#include "redis/replicas.hpp"

#include "redis/cluster.hpp"
#include "redis/lock_scripts.hpp"
#include "redis/shared_scripts.hpp"

#include <fmt/format.h>

namespace zkcoro::detail {

int replica_acks(const redis_impl& rc) noexcept
{
    if (rc.opts.replica_acks >= 0)
        return rc.opts.replica_acks;
    return rc.url.sentinels.empty() && rc.url.cluster_nodes.empty() ? 0 : 1;
}

namespace {

// Whether the reply of the acquire or renew script says it wrote.
bool wrote(const std::string& script, const redis_reply& r)
{
    if (&script == &acquire_script().text || &script == &fair_acquire_script().text ||
        &script == &rw_read_script().text || &script == &rw_write_script().text)
        return r.type == redis_reply::kind::array && !r.elements.empty() &&
               r.elements[0].type == redis_reply::kind::integer && r.elements[0].integer == 1;
    if (&script == &renew_script().text || &script == &rw_renew_script().text)
        return r.type == redis_reply::kind::integer && r.integer == 1;
    return false;
}

}  // namespace

void eval_acked(redis_impl& rc, const std::string& script, const std::string& sha, command_args keys_and_args,
                int nkeys, std::shared_ptr<reply_op> op)
{
    const int n = replica_acks(rc);
    const bool fair = &script == &fair_acquire_script().text;
    // A read-write lock's acquisition (redis_shared_mutex) or renewal.
    const bool rw = &script == &rw_read_script().text || &script == &rw_write_script().text;
    if (n <= 0 || (&script != &acquire_script().text && &script != &renew_script().text && !fair && !rw &&
                   &script != &rw_renew_script().text))
        return rc.eval(script, sha, keys_and_args, nkeys, std::move(op));
    // An unconfirmed grant is given back: the acquire script's KEYS[1] and ARGV[1] (key, value);
    // a fair lock's with its queue and timeouts (KEYS[3], KEYS[4]) and channel prefix (ARGV[4]).
    std::vector<std::string> give_back;
    if (&script == &acquire_script().text && keys_and_args.size() >= 3)
        give_back = {std::string(keys_and_args[0]), std::string(keys_and_args[2]),
                     fmt::format("{}:released", keys_and_args[0])};
    if (fair && keys_and_args.size() >= 8)
        give_back = {std::string(keys_and_args[0]), std::string(keys_and_args[2]), std::string(keys_and_args[3]),
                     std::string(keys_and_args[4]), std::string(keys_and_args[7])};
    // A read-write lock's: the key, readers, writers (KEYS[1], [3], [4]), our value (ARGV[1]),
    // and the lock's channel.
    if (rw && keys_and_args.size() >= 5)
        give_back = {std::string(keys_and_args[0]), std::string(keys_and_args[2]), std::string(keys_and_args[3]),
                     std::string(keys_and_args[4]), fair_prefix(keys_and_args[0]) + ":released"};
    std::weak_ptr<redis_impl> weak = rc.shared_from_this();
    // On a cluster: the master whose connection answered the script (after MOVED or ASK too).
    auto where = rc.url.cluster_nodes.empty() ? nullptr : std::make_shared<cluster_answer_site>();
    auto after = std::make_shared<reply_op>(
        [weak, op, n, &script, fair, rw, give_back = std::move(give_back), where](error_code ec, redis_reply r) {
            auto self = weak.lock();
            if (!self || ec || !wrote(script, r))
                return void(op->complete(ec, std::move(r)));
            // Here, on the strand, the command connection is the one the script ran on unless it
            // has reconnected since: WAIT now counts the script's write. On a cluster: that
            // master's connection.
            auto connects_now = [where](const redis_impl& s) {
                return where ? (s.cluster() ? s.cluster()->node_connects(where->node) : 0) : s.connects.load();
            };
            const auto conn = where ? where->connects : self->connects.load();
            const auto timeout = self->opts.replica_ack_timeout;
            auto script_reply = std::make_shared<redis_reply>(std::move(r));
            auto waited = std::make_shared<reply_op>(
                [weak, op, n, conn, timeout, script_reply, fair, rw, give_back, connects_now](error_code wec,
                                                                                               redis_reply wr) {
                    auto s = weak.lock();
                    if (!s)
                        return void(op->complete(redis_errc::closed, std::move(*script_reply)));
                    if (wec == redis_errc::connection_lost || wec == redis_errc::closed)
                        return void(op->complete(wec, std::move(*script_reply)));
                    const bool same = connects_now(*s) == conn;
                    if (wec || wr.type != redis_reply::kind::integer || wr.integer < n || !same) {
                        s->log(log_level::warn,
                               fmt::format("redis: WAIT {} {}: {}", n, timeout.count(),
                                           wec && wr.type == redis_reply::kind::error
                                                   ? fmt::format("{}: the server said: {}", wec.message(), wr.str)
                                           : wec   ? wec.message()
                                           : !same ? std::string("the connection changed before it")
                                                   : fmt::format("{} replica(s) acknowledged", wr.integer)));
                        if (!give_back.empty()) {
                            // Set on the master, not confirmed by the replicas: compare-and-delete
                            // (and PUBLISH the release), on this connection, before answering.
                            auto ignore = std::make_shared<reply_op>([](error_code, redis_reply) {}, s->strand);
                            const auto& undo = fair ? fair_release_script()
                                               : rw ? rw_release_script()
                                                    : release_script();
                            s->eval(undo.text, undo.sha, views_of(give_back), fair || rw ? 3 : 1, std::move(ignore));
                        }
                        // WAIT refused (an ACL user without WAIT): the server's refusal and its
                        // text, not replicas too slow.
                        if (wec && wr.type == redis_reply::kind::error)
                            return void(op->complete(wec, std::move(wr)));
                        return void(op->complete(redis_errc::not_replicated, std::move(*script_reply)));
                    }
                    op->complete({}, std::move(*script_reply));
                },
                self->strand);
            const auto n_arg = std::to_string(n);
            const auto timeout_arg = std::to_string(timeout.count());
            const std::string_view args[] = {"WAIT", n_arg, timeout_arg};
            if (where && self->cluster())
                return self->cluster()->exec_on(where->node, args, std::move(waited));
            self->exec(args, std::move(waited));
        },
        rc.strand);
    if (where)
        return rc.cluster_eval_tracked(script, sha, keys_and_args, nkeys, std::move(after), std::move(where));
    rc.eval(script, sha, keys_and_args, nkeys, std::move(after));
}

}  // namespace zkcoro::detail
