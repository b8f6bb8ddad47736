// Replica-acknowledged lock writes (internal): a lock script followed, on the same connection, by
// WAIT n timeout, when redis_options::replica_acks asks for it.
#ifndef ZKCORO_SRC_REDIS_REPLICAS_HPP
#define ZKCORO_SRC_REDIS_REPLICAS_HPP

#include "redis/redis_impl.hpp"

namespace zkcoro::detail {

// How many replicas must acknowledge a lock write: redis_options::replica_acks, where -1 means
// 1 for a redis+sentinel:// URL and 0 for redis://.
int replica_acks(const redis_impl& rc) noexcept;

// Runs `script` like redis_impl::eval. When it is the acquire or renew script, the reply says it
// wrote (acquired, or renewed), and replica_acks(rc) > 0: then WAIT n timeout, sent from the
// script's reply handler, so on the connection the script ran on (if that connection changed in
// between, nothing is confirmed). `op` completes with the script's reply, or with
// redis_errc::not_replicated (and the script's reply) when fewer than n replicas confirmed, or
// with WAIT's own error reply when the server refused it (no_permission: an ACL user without
// WAIT); an acquire script's key is then given back first (compare-and-delete with its value).
// On the strand.
void eval_acked(redis_impl& rc, const std::string& script, const std::string& sha, command_args keys_and_args,
                int nkeys, std::shared_ptr<reply_op> op);

}  // namespace zkcoro::detail

#endif
