#include <zkcoro/error.hpp>

#include <zookeeper/zookeeper.h>

#include <string>

namespace zkcoro {
namespace {

class client_category_impl final : public detail::classifying_category {
public:
    const char* name() const noexcept override { return "zkcoro.client"; }
    std::string message(int v) const override
    {
        switch (static_cast<client_errc>(v)) {
        case client_errc::invalid_path:
            return "invalid path: a ZooKeeper path starts with '/', has no empty, '.' or '..' node "
                   "names, no trailing '/', and no control or reserved characters (check_path() "
                   "names the position)";
        case client_errc::invalid_argument:
            return "invalid argument: a value is out of its documented range";
        case client_errc::invalid_connect_string:
            return "invalid connect string: expected host:port[,host:port...][/chroot] with ports "
                   "1-65535, e.g. \"127.0.0.1:2181\"";
        case client_errc::data_too_large:
            return "node data too large: it exceeds client_config::max_data_size (the server "
                   "refuses requests over its jute.maxbuffer, 1 MiB by default)";
        case client_errc::closed:
            return "the client is closed: the operation was pending when close() was called, or "
                   "was started after it; create a new client to continue";
        case client_errc::session_expired:
            return "the ZooKeeper session expired while the operation was pending: its ephemeral "
                   "nodes and watches are gone; the client is establishing a new session";
        case client_errc::connect_timeout:
            return "no ZooKeeper session within client_config::connect_timeout: check that a "
                   "server listens at the connect string and that it is reachable";
        case client_errc::not_connected:
            return "the client is not connected: call async_connect first";
        case client_errc::auth_failed:
            return "the server rejected the authentication in client_config::auth: check the "
                   "scheme and credentials";
        case client_errc::operation_in_progress:
            return "another call of this operation is in progress on the same object: wait for "
                   "it to complete first";
        case client_errc::not_owner:
            return "not the owner: the lock is held by another task";
        case client_errc::name_resolution_failed:
            return "no host of the connect string could be resolved to an address: check the "
                   "host names and DNS (the client's log names each host and the resolver's answer)";
        case client_errc::chroot_not_found:
            return "the chroot of the connect string does not exist on the server: create it "
                   "(e.g. zkCli.sh create /app) or remove it from the connect string";
        case client_errc::lock_lost:
            return "the lock was lost: its session may have expired or its node is gone; the "
                   "critical section must stop";
        case client_errc::not_revocable:
            return "the guard is not revocable: acquire with mutex_options::revocable = true to be "
                   "told of revocation requests";
        case client_errc::not_supported:
            return "not supported by this lock's backend: ZooKeeper transactions fenced by the lock "
                   "node need a ZooKeeper lock";
        case client_errc::would_deadlock:
            return "the acquisition would wait forever: a holder of the lock waits, directly or through other "
                   "tasks of this process, for a lock the asking task holds (client_config::detect_deadlocks; "
                   "the log names the tasks and the lock)";
        case client_errc::empty_guard:
            return "the guard is empty: it was released already (a second release), moved from, or never "
                   "held a lock";
        case client_errc::internal_error:
            return "internal error: an unexpected exception in zkcoro's own code (a bug: please report it with "
                   "the log); the operation did not complete";
        case client_errc::upgrade_not_supported:
            return "read-to-write upgrade is not supported: the write lock would wait forever "
                   "behind this task's own read lock; release the read lock first";
        }
        return "unknown zkcoro client error";
    }
    error_kind kind(int v) const noexcept override
    {
        switch (static_cast<client_errc>(v)) {
        // No server reached yet, or no name resolved yet: a server down or a DNS entry missing at
        // start-up may be back later, and async_connect may be called again on the same client
        // (it resolves again). The same rule as Redis' connect_failed and no_sentinel.
        case client_errc::connect_timeout:
        case client_errc::name_resolution_failed:
            return error_kind::retriable;
        case client_errc::session_expired:
        case client_errc::closed:
        case client_errc::auth_failed:
        case client_errc::lock_lost:
            return error_kind::session_lost;
        default:
            return error_kind::permanent;
        }
    }
};

class zookeeper_category_impl final : public detail::classifying_category {
public:
    const char* name() const noexcept override { return "zkcoro.zookeeper"; }
    std::string message(int v) const override
    {
        std::string name;
        switch (v) {
        case ZOK: return "ZOK: success";
        case ZSYSTEMERROR: name = "ZSYSTEMERROR"; break;
        case ZRUNTIMEINCONSISTENCY: name = "ZRUNTIMEINCONSISTENCY"; break;
        case ZDATAINCONSISTENCY: name = "ZDATAINCONSISTENCY"; break;
        case ZCONNECTIONLOSS: name = "ZCONNECTIONLOSS"; break;
        case ZMARSHALLINGERROR: name = "ZMARSHALLINGERROR"; break;
        case ZUNIMPLEMENTED: name = "ZUNIMPLEMENTED"; break;
        case ZOPERATIONTIMEOUT: name = "ZOPERATIONTIMEOUT"; break;
        case ZBADARGUMENTS: name = "ZBADARGUMENTS"; break;
        case ZINVALIDSTATE: name = "ZINVALIDSTATE"; break;
        case ZNEWCONFIGNOQUORUM: name = "ZNEWCONFIGNOQUORUM"; break;
        case ZRECONFIGINPROGRESS: name = "ZRECONFIGINPROGRESS"; break;
        case ZSSLCONNECTIONERROR: name = "ZSSLCONNECTIONERROR"; break;
        case ZAPIERROR: name = "ZAPIERROR"; break;
        case ZNONODE: name = "ZNONODE"; break;
        case ZNOAUTH: name = "ZNOAUTH"; break;
        case ZBADVERSION: name = "ZBADVERSION"; break;
        case ZNOCHILDRENFOREPHEMERALS: name = "ZNOCHILDRENFOREPHEMERALS"; break;
        case ZNODEEXISTS: name = "ZNODEEXISTS"; break;
        case ZNOTEMPTY: name = "ZNOTEMPTY"; break;
        case ZSESSIONEXPIRED: name = "ZSESSIONEXPIRED"; break;
        case ZINVALIDCALLBACK: name = "ZINVALIDCALLBACK"; break;
        case ZINVALIDACL: name = "ZINVALIDACL"; break;
        case ZAUTHFAILED: name = "ZAUTHFAILED"; break;
        case ZCLOSING: name = "ZCLOSING"; break;
        case ZNOTHING: name = "ZNOTHING"; break;
        case ZSESSIONMOVED: name = "ZSESSIONMOVED"; break;
        case ZNOTREADONLY: name = "ZNOTREADONLY"; break;
        case ZEPHEMERALONLOCALSESSION: name = "ZEPHEMERALONLOCALSESSION"; break;
        case ZNOWATCHER: name = "ZNOWATCHER"; break;
        case ZRECONFIGDISABLED: name = "ZRECONFIGDISABLED"; break;
        case ZSESSIONCLOSEDREQUIRESASLAUTH: name = "ZSESSIONCLOSEDREQUIRESASLAUTH"; break;
        case ZTHROTTLEDOP: name = "ZTHROTTLEDOP"; break;
        default: return "unknown ZooKeeper error " + std::to_string(v);
        }
        // zerror() is a pure table look-up in the C library: no state, safe without the lock.
        return name + ": " + zerror(v);
    }
    error_kind kind(int v) const noexcept override
    {
        switch (static_cast<zk_errc>(v)) {
        case zk_errc::connection_loss:
        case zk_errc::operation_timeout:
        case zk_errc::throttled_op:
        // The C client fails every pending request with ZRUNTIMEINCONSISTENCY when a reply comes
        // out of order, drops the connection and reconnects with the session: a lost connection
        // for the caller, each request applied or not. Seen under load (bench/scale.sh: 10 000
        // waiters of 4 processes on three servers), where an acquisition gave up on it.
        case zk_errc::runtime_inconsistency:
            return error_kind::retriable;
        case zk_errc::session_expired:
        case zk_errc::auth_failed:
        case zk_errc::closing:
        case zk_errc::session_moved:
            return error_kind::session_lost;
        default:
            return error_kind::permanent;
        }
    }
};

const client_category_impl client_cat;
const zookeeper_category_impl zookeeper_cat;

}  // namespace

const boost::system::error_category& client_category() noexcept { return client_cat; }
const boost::system::error_category& zookeeper_category() noexcept { return zookeeper_cat; }

error_kind classify(const error_code& ec) noexcept
{
    if (!ec)
        return error_kind::none;
    // Each of our categories (client, ZooKeeper, Redis) classifies its own codes; any other
    // category's error is permanent.
    if (const auto* c = dynamic_cast<const detail::classifying_category*>(&ec.category()))
        return c->kind(ec.value());
    return error_kind::permanent;
}

}  // namespace zkcoro
