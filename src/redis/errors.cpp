// The Redis client's error category (zkcoro.redis): each code's message and kind, and the code of
// a server's error reply by its prefix.
#include <zkcoro/error.hpp>
#include <zkcoro/redis.hpp>

#include <fmt/format.h>

namespace zkcoro {

namespace {

class redis_category_impl final : public detail::classifying_category {
public:
    const char* name() const noexcept override { return "zkcoro.redis"; }
    std::string message(int ev) const override
    {
        switch (static_cast<redis_errc>(ev)) {
        case redis_errc::bad_url:
            return "not a Redis URL: redis://[[user]:password@]host:port[/db], "
                   "redis+sentinel://[[user]:password@]host:port[,host:port...]/MASTER[/db] or "
                   "redis+cluster://[[user]:password@]host:port[,host:port...]";
        case redis_errc::connect_failed: return "cannot connect to the Redis server";
        case redis_errc::auth_failed: return "the Redis server refused the user name or password";
        case redis_errc::not_redis: return "the server does not speak Redis' protocol";
        case redis_errc::connection_lost: return "the Redis connection dropped before the reply came";
        case redis_errc::closed: return "the Redis client was closed";
        case redis_errc::error_reply: return "the Redis server answered with an error";
        case redis_errc::unexpected_reply: return "the Redis server's reply has an unexpected type";
        case redis_errc::bad_key: return "a lock key must have 1 to 1024 bytes";
        case redis_errc::bad_ttl: return "a lock TTL must be between 100 ms and 24 h, and the margin below a third of it";
        case redis_errc::read_only:
            return "the Redis server is a replica (READONLY): connected to a replica: point at the master";
        case redis_errc::out_of_memory:
            return "the Redis server refuses writes (OOM): maxmemory reached: raise maxmemory or free memory";
        case redis_errc::wrong_type:
            return "a key of the lock holds a value of another type (WRONGTYPE): delete it or use another key";
        case redis_errc::bad_fencing_counter:
            return "the lock's fencing counter <key>:fencing holds something that is not an integer: "
                   "delete it or use another key";
        case redis_errc::no_sentinel: return "no Redis sentinel answered";
        case redis_errc::unknown_master: return "the Redis sentinels know no master of that name";
        case redis_errc::not_master: return "the Redis server the sentinels named is not a master (ROLE)";
        case redis_errc::not_replicated:
            return "the lock's write was not confirmed by enough replicas in time (WAIT): given back";
        case redis_errc::no_permission:
            return "the Redis server refused a command or key to this ACL user (NOPERM): the lock needs EVAL, "
                   "EVALSHA, PUBLISH (and WAIT with replica acknowledgement) on its key, <key>:fencing and the "
                   "channel <key>:released";
        case redis_errc::no_replicas:
            return "the Redis master refuses writes (NOREPLICAS): fewer good replicas than min-replicas-to-write";
        case redis_errc::loading: return "the Redis server is loading its data set (LOADING): retry shortly";
        case redis_errc::master_down:
            return "the Redis replica has lost its master (MASTERDOWN): point at the master, or wait for it";
        case redis_errc::bad_leases:
            return "a semaphore's max_leases must be 1 or more, and an acquisition must ask for 1 to max_leases leases";
        case redis_errc::leases_mismatch:
            return "the semaphore's P:max on the server holds another max_leases than this participant's: every "
                   "participant must pass the same count";
        case redis_errc::try_again: return "the Redis Cluster slot is migrating, its keys partly moved (TRYAGAIN)";
        case redis_errc::cluster_down: return "no Redis Cluster master serves the slot now (CLUSTERDOWN)";
        }
        return fmt::format("unknown zkcoro.redis error {}", ev);
    }
    error_kind kind(int ev) const noexcept override
    {
        switch (static_cast<redis_errc>(ev)) {
        // The server may answer later: a new connection, a promoted master, freed memory.
        case redis_errc::connect_failed:
        case redis_errc::connection_lost:
        case redis_errc::read_only:
        case redis_errc::out_of_memory:
        // Sentinels that come back, a failover that ends, replicas that catch up.
        case redis_errc::no_sentinel:
        case redis_errc::not_master:
        case redis_errc::not_replicated:
        // A master short of replicas, a server loading its data, a replica without its master.
        case redis_errc::no_replicas:
        case redis_errc::loading:
        case redis_errc::master_down:
        case redis_errc::try_again:     // a slot's migration that ends
        case redis_errc::cluster_down:  // a shard's failover that ends
            return error_kind::retriable;
        case redis_errc::closed:
        case redis_errc::auth_failed:
            return error_kind::session_lost;
        default:
            return error_kind::permanent;
        }
    }
};

}  // namespace

error_code redis_error_code(std::string_view text) noexcept
{
    if (text.starts_with("READONLY"))
        return redis_errc::read_only;
    if (text.starts_with("OOM"))
        return redis_errc::out_of_memory;
    if (text.starts_with("WRONGTYPE"))
        return redis_errc::wrong_type;
    if (text.starts_with("ZKFENCING"))
        return redis_errc::bad_fencing_counter;
    if (text.starts_with("ZKMAXLEASES"))
        return redis_errc::leases_mismatch;
    // An ACL refusal: of the command itself (NOPERM), or inside a script (Redis 7.0 says ERR there).
    if (text.starts_with("NOPERM") || text.starts_with("ERR The user executing the script can't"))
        return redis_errc::no_permission;
    if (text.starts_with("NOREPLICAS"))
        return redis_errc::no_replicas;
    if (text.starts_with("LOADING"))
        return redis_errc::loading;
    if (text.starts_with("MASTERDOWN"))
        return redis_errc::master_down;
    if (text.starts_with("TRYAGAIN") || text.starts_with("CLUSTERDOWN"))
        return text[0] == 'T' ? redis_errc::try_again : redis_errc::cluster_down;
    return redis_errc::error_reply;
}

const boost::system::error_category& redis_category() noexcept
{
    static const redis_category_impl c;
    return c;
}

}  // namespace zkcoro
