// The Redis backend of a run (lock_backend.hpp), for -c redis://..., redis+sentinel://... and redis+cluster://...: a
// redis_mutex on the key LOCKPATH (--fair: a redis_fair_mutex; -s/-w: a side of a redis_shared_mutex;
// --semaphore N: one lease of a redis_semaphore of N). There is no waiting line to show. The
// still-held check is a PING; the lease is the TTL, renewed every third of it while held.
#ifdef ZKLOCK_REDIS
#include "lock_backend.hpp"

#include <zkcoro/redis_fair_mutex.hpp>
#include <zkcoro/redis_mutex.hpp>
#include <zkcoro/redis_semaphore.hpp>
#include <zkcoro/redis_shared_mutex.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <optional>
#include <variant>

namespace zklock {

using namespace asio::experimental::awaitable_operators;
using namespace std::chrono_literals;

namespace {

asio::awaitable<zkcoro::error_code> redis_ping(zkcoro::redis_client& rc)
{
    std::vector<std::string> args{"PING"};
    auto [ec, reply] = co_await rc.async_exec(std::move(args), asio::as_tuple(asio::use_awaitable));
    co_return ec;
}

// What `host:port` is in a redis:// URL (an IPv6 address in brackets).
std::string redis_hostport(const std::string& host, std::uint16_t port)
{
    return host.find(':') == std::string::npos ? fmt::format("{}:{}", host, port) : fmt::format("[{}]:{}", host, port);
}

// redis+sentinel://: the sentinels' down-after-milliseconds for the master (SENTINEL MASTER NAME,
// from the first sentinel that answers within 1 s in all); 0 if none tells.
asio::awaitable<long long> sentinels_down_after(const zkcoro::redis_url& url)
{
    auto ex = co_await asio::this_coro::executor;
    const auto until = clock::now() + 1s;
    for (const auto& s : url.sentinels) {
        if (clock::now() >= until)
            break;
        zkcoro::redis_options so;
        so.connect_timeout = 500ms;
        zkcoro::redis_client sc(ex, "redis://" + redis_hostport(s.host, s.port), so);
        asio::steady_timer bound(ex, until);
        std::vector<std::string> args{"SENTINEL", "MASTER", url.master_name};  // (not braced inside co_await: g++ 12)
        auto r = co_await (sc.async_exec(std::move(args), asio::as_tuple(asio::use_awaitable)) ||
                           bound.async_wait(asio::as_tuple(asio::use_awaitable)));
        sc.close();
        if (r.index() != 0)
            break;
        auto& [ec, reply] = std::get<0>(r);
        if (ec || reply.type != zkcoro::redis_reply::kind::array)
            continue;
        for (std::size_t i = 0; i + 1 < reply.elements.size(); i += 2)
            if (reply.elements[i].str == "down-after-milliseconds")
                co_return std::atoll(reply.elements[i + 1].str.c_str());
    }
    co_return 0;
}

asio::awaitable<zkcoro::error_code> redis_connect(zkcoro::redis_client& rc, const options& o)
{
    auto [ec] = co_await rc.async_connect(asio::as_tuple(asio::use_awaitable));
    if (ec || rc.url().sentinels.empty())
        co_return ec;
    // Issue 32 item 11: a failover takes at least down-after-milliseconds; a TTL shorter than that
    // loses the lock in every failover. Said once, on stderr.
    const auto down_after = co_await sentinels_down_after(rc.url());
    if (down_after > 0 && o.redis_ttl.count() < down_after)
        tell(
                   "zklock: warning: the lock's TTL ({} ms, --ttl) is shorter than the sentinels' "
                   "down-after-milliseconds ({} ms) for master '{}': a failover takes at least that long, so "
                   "every failover loses the lock; the TTL must cover down-after-milliseconds, the election and "
                   "one renewal interval (a third of the TTL)\n",
                   o.redis_ttl.count(), down_after, escape(rc.url().master_name));
    co_return ec;
}

// How many replicas the master says are connected (ROLE); -1 if it does not tell within 1 s.
asio::awaitable<int> redis_connected_replicas(zkcoro::redis_client& rc)
{
    asio::steady_timer bound(co_await asio::this_coro::executor, 1s);
    std::vector<std::string> args{"ROLE"};
    auto r = co_await (rc.async_exec(std::move(args), asio::as_tuple(asio::use_awaitable)) ||
                       bound.async_wait(asio::as_tuple(asio::use_awaitable)));
    if (r.index() != 0)
        co_return -1;
    auto& [ec, reply] = std::get<0>(r);
    // ["master", offset, [[ip, port, offset], ...]]
    if (ec || reply.type != zkcoro::redis_reply::kind::array || reply.elements.size() < 3 ||
        reply.elements[0].str != "master")
        co_return -1;
    co_return static_cast<int>(reply.elements[2].elements.size());
}

// Why a Redis acquisition failed: the code's message and the server's own text. acquire()'s what()
// is "acquire KEY (redis lock)[: the server said: TEXT]: MESSAGE [zkcoro.redis:N]"; zklock's
// message names the key already.
std::string redis_refusal(const boost::system::system_error& e, const std::string& key)
{
    const std::string_view what = e.what();
    const std::string head = fmt::format("acquire {} (redis lock)", key);
    const std::string tail = ": " + e.code().what();
    if (!what.starts_with(head) || !what.ends_with(tail) || what.size() < head.size() + tail.size())
        return std::string(what);
    return e.code().message() + std::string(what.substr(head.size(), what.size() - head.size() - tail.size()));
}

// One acquisition (of any recipe): its awaitable, made when called.
using attempt_fn = std::function<asio::awaitable<std::optional<zkcoro::guard>>()>;

asio::awaitable<acquired> redis_acquire(attempt_fn attempt, const options& o, zkcoro::redis_client& rc)
{
    acquired out;
    // The throwing form: its error carries the server's text (an ACL refusal, NOREPLICAS, ...).
    try {
        if (auto g = co_await attempt())
            out.guards.push_back(std::move(*g));
    } catch (const boost::system::system_error& e) {
        out.ec = e.code();
        out.what = escape(redis_refusal(e, o.lock_path));  // the server's text may echo the key's bytes
    }
    // Another --semaphore N than the holders' and waiters': say which, and what to do (ZKMAXLEASES
    // names both counts).
    if (out.ec == zkcoro::redis_errc::leases_mismatch) {
        const auto at = out.what.find("ZKMAXLEASES");
        out.what = fmt::format("--semaphore {}: the semaphore's holders and waiters use another number of leases "
                               "({}): every participant must give the same N (the count is kept while anyone "
                               "holds or waits)",
                               o.semaphore_leases,
                               at == std::string::npos ? out.what : "the server said: " + out.what.substr(at));
    }
    // Replicas that did not confirm in time, or none to confirm (issue 32 item 11): ROLE tells.
    bool no_replica = false;
    if (out.ec == zkcoro::redis_errc::not_replicated) {
        const auto replicas = co_await redis_connected_replicas(rc);
        no_replica = replicas == 0;
    }
    if (no_replica)
        out.what = fmt::format(
            "the lock's write was not confirmed by a replica: the master {} has no replica connected (ROLE "
            "lists none), and the grant waits for one (WAIT 1, the default with redis+sentinel://); after a "
            "failover the promoted replica has none until another re-attaches: given back",
            redis_hostport(rc.url().host, rc.url().port));
    co_return out;
}

// The client's options of a run: the connect bound, the first connection's wait, the log.
zkcoro::redis_options client_options(const options& o)
{
    zkcoro::redis_options ropts;
    ropts.connect_timeout = redis_connect_timeout(o);
    // Issue 39: -t bounds the whole wait, the first connection included: a server that is not up
    // yet, a failover under way (the sentinels still name the dead master) are waited for; -n
    // tries once. Without -t, as the library does by default: redis:// once, Sentinel 6 times
    // (about 3 s): a typing error in the port is not waited on for ever. Refused credentials, an
    // unknown master name, a bad URL fail at once.
    if (o.timeout_s && !o.nonblock)
        ropts.first_connect_wait =
            std::chrono::milliseconds(static_cast<long long>(std::min(*o.timeout_s, 86400.0) * 1000.0));
    if (o.nonblock)
        ropts.first_connect_wait = -1ms;  // one attempt, through Sentinel too
    ropts.reconnect_max = 1000ms;
    if (o.verbose)  // the library's lines (e.g. a release whose PUBLISH was refused), as on ZooKeeper
        ropts.log = [](zkcoro::log_level l, std::string_view m) {
            if (l <= zkcoro::log_level::info)  // error, warn, info: not debug
                tell("zklock: [{}] {}\n", zkcoro::to_string(l), escape(m));
        };
    return ropts;
}

class redis_backend final : public lock_backend {
public:
    redis_backend(asio::io_context& ioc, const options& o)
        : lock_backend(o), rc_(ioc.get_executor(), o.connect, client_options(o))
    {
    }

    void make_lock() override
    {
        if (o_.kind == recipe::read || o_.kind == recipe::write) {
            zkcoro::redis_shared_mutex_options so;
            so.ttl = o_.redis_ttl;
            auto& rw = shared_.emplace(rc_, o_.lock_path, so);
            lock_ = o_.kind == recipe::read ? &rw.reader() : &rw.writer();
            return;
        }
        if (o_.kind == recipe::semaphore) {
            zkcoro::redis_semaphore_options so;
            so.ttl = o_.redis_ttl;
            sem_.emplace(rc_, o_.lock_path, o_.semaphore_leases, so);
            return;
        }
        if (o_.redis_fair) {
            zkcoro::redis_fair_mutex_options fo;
            fo.ttl = o_.redis_ttl;
            lock_ = &fair_.emplace(rc_, o_.lock_path, fo);
            return;
        }
        zkcoro::redis_mutex_options ro;
        ro.ttl = o_.redis_ttl;
        lock_ = &mutex_.emplace(rc_, o_.lock_path, ro);
    }

    asio::awaitable<zkcoro::error_code> connect() override { return redis_connect(rc_, o_); }

    std::string connect_failure(const zkcoro::error_code& ec) const override
    {
        return fmt::format("cannot connect to Redis ({}): {}", o_.connect_origin,
                           escape(rc_.last_error().empty() ? ec.message() : rc_.last_error()));
    }

    void connected() override
    {
        // With Sentinel the URL names no server: the master the sentinels named is the client's.
        // On a cluster: the node the slot map was read from (the lock's key goes to its slot's master).
        say(o_, !rc_.url().cluster_nodes.empty()
                    ? fmt::format("connected to Redis Cluster (slot map from {})", escape(rc_.server()))
                : rc_.url().sentinels.empty()
                    ? fmt::format("connected to Redis at {}", escape(rc_.server()))
                    : fmt::format("connected to Redis master '{}' at {}, named by Sentinel",
                                  escape(rc_.url().master_name), escape(rc_.server())));
    }

    asio::awaitable<acquired> acquire(clock::duration wait, bool) override
    {
        // Not coroutines themselves: each returns the library's awaitable, which holds `wait`.
        if (sem_)
            return redis_acquire(
                [this, wait] { return wait == clock::duration::zero() ? sem_->try_acquire(1) : sem_->acquire(1, wait); },
                o_, rc_);
        return redis_acquire([this, wait] { return lock_->acquire(wait); }, o_, rc_);
    }
    std::string acquire_failure(const acquired& got) const override { return got.what; }

    asio::awaitable<zkcoro::error_code> probe(zkcoro::guard&) override { return redis_ping(rc_); }
    // The probe proves only that the server answers; the key may have expired while zklock was
    // stopped if the stop outlasted what a renewal just before it could cover.
    bool lost_by_stop(clock::duration stopped_for) const override { return stopped_for >= lease() * 2 / 3; }
    std::chrono::milliseconds lease() const override { return o_.redis_ttl; }
    std::string_view lost_why() const override
    {
        return "no renewal was confirmed within its TTL, or the key was deleted or taken over";
    }
    std::string_view unreleased() const override { return "the key expires within its TTL"; }

    bool close(asio::io_context& ioc) override
    {
        lock_ = nullptr;
        mutex_.reset();
        fair_.reset();
        shared_.reset();
        sem_.reset();
        // The close writes out what is queued (a cancelled acquisition's take-back of a key it may
        // have set) and ends the connection after the replies, 1 s at most: run until then (run_for
        // returns as soon as nothing is left to do).
        rc_.close();
        ioc.restart();
        ioc.run_for(1500ms);
        return true;
    }

private:
    std::string refusal_hint(const zkcoro::error_code&) const override { return {}; }

    zkcoro::redis_client rc_;
    std::optional<zkcoro::redis_mutex> mutex_;
    std::optional<zkcoro::redis_fair_mutex> fair_;  // --fair
    std::optional<zkcoro::redis_shared_mutex> shared_;  // -s, -w
    std::optional<zkcoro::redis_semaphore> sem_;        // --semaphore N
    zkcoro::basic_mutex<zkcoro::redis_lock_backend>* lock_ = nullptr;  // the lock taken (none: the semaphore)
};

}  // namespace

std::unique_ptr<lock_backend> make_redis_backend(asio::io_context& ioc, const options& o)
{
    return std::make_unique<redis_backend>(ioc, o);
}

}  // namespace zklock
#endif
