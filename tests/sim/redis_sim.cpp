// The simulated Redis server and its network (redis_sim.hpp), and the program's
// redisAsyncConnect.
#include "redis_sim.hpp"

#include "capi_sim_internal.hpp"

#include <fmt/format.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <random>
#include <stdexcept>

namespace zksim {

struct redis_sim::conn {
    int id = 0;
    int fd = -1;
    redisReader* reader = nullptr;
    bool open = true;        // the server's side: applies and answers
    bool client_gone = false;  // the client closed its end: what it sent is still applied
    std::int64_t last_up_ns = 0, last_down_ns = 0;
    struct request {
        std::uint64_t id;
        std::vector<std::string> args;
        bool arrived = false;
    };
    std::deque<request> inbox;  // read from the socket, in order; applied once arrived
    std::uint64_t next_request = 0;
    std::int64_t last_write = 0;     // how many writes the data had after this connection's last one
    std::int64_t blocked_until = 0;  // a WAIT holds the connection until then (ns)
    ~conn()
    {
        if (reader)
            redisReaderFree(reader);
        if (fd >= 0)
            ::close(fd);
    }
};

struct redis_sim_access {
    static bool poll(redis_sim& s) { return s.poll(); }
};

namespace {

std::map<std::uint16_t, redis_sim*>& servers()
{
    static std::map<std::uint16_t, redis_sim*> s;
    return s;
}

std::mt19937_64& rng() { return S().rng; }

bool coin(double p)
{
    return p > 0 && std::bernoulli_distribution(p)(rng());
}

std::int64_t draw_ms(std::int64_t lo, std::int64_t hi)
{
    return std::uniform_int_distribution<std::int64_t>(lo, std::max(lo, hi))(rng()) * 1'000'000;
}

std::int64_t now() { return S().now_ns.load(); }

// ZKCORO_SIM_REDIS_TRACE=1: each command as the server applies it, with its reply, and each fault.
void trace(int conn, const std::string& what)
{
    static const bool on = std::getenv("ZKCORO_SIM_REDIS_TRACE") != nullptr;
    if (on)
        std::fprintf(stderr, "%12.6f redis c%d: %s\n", static_cast<double>(now() - sim_epoch_ns) / 1e9, conn,
                     what.substr(0, 300).c_str());
}

std::string shown(const std::vector<std::string>& args)
{
    std::string out;
    for (auto& a : args) {
        auto one = a.size() > 64 ? a.substr(0, 40) + "..." : a;  // a script's text
        std::replace(one.begin(), one.end(), '\n', ' ');
        out += (out.empty() ? "" : " ") + one;
    }
    return out;
}

// The scheduler's question at every step: the servers read what their clients wrote.
bool poll_all()
{
    bool any = false;
    for (auto& [port, srv] : servers())
        any = redis_sim_access::poll(*srv) || any;
    return any;
}

}  // namespace

std::string redis_socket_path(std::uint16_t port)
{
    return fmt::format("/tmp/zkcoro-sim-redis-{}-{}.sock", ::getpid(), port);
}

redis_sim::redis_sim(std::uint16_t p, redis_faults f) : faults(f), port(p)
{
    if (servers().count(port))
        throw std::logic_error("redis_sim: a server on that port already");
    path_ = redis_socket_path(port);
    ::unlink(path_.c_str());
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path_.c_str());
    if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listen_fd_, 128) != 0)
        throw std::runtime_error(fmt::format("redis_sim: cannot listen on {}: {}", path_, std::strerror(errno)));
    world.replicas = faults.replicas;
    servers()[port] = this;
    S().poll_hook = poll_all;
    sync_clock();
    schedule_pause();
    schedule_failover();
    schedule_script_flush();
}

redis_sim::~redis_sim()
{
    *alive_ = false;
    servers().erase(port);
    if (servers().empty())
        S().poll_hook = nullptr;
    conns_.clear();
    ::close(listen_fd_);
    ::unlink(path_.c_str());
}

std::string redis_sim::url() const
{
    return fmt::format("redis://127.0.0.1:{}", port);
}

std::size_t redis_sim::open_connections() const
{
    return static_cast<std::size_t>(std::count_if(conns_.begin(), conns_.end(), [](auto& c) { return c->open; }));
}

void redis_sim::quiet()
{
    quiet_ = true;
    faults = {};
}

void redis_sim::sync_clock()
{
    // The server's clock: 1.7e15 us since the Unix epoch at the simulation's start, then the
    // simulated clock's microseconds.
    world.set_now_us(1'700'000'000'000'000 + (now() - sim_epoch_ns) / 1000);
}

bool redis_sim::poll()
{
    bool any = false;
    const auto before = conns_.size();
    accept_new();
    any = conns_.size() != before;
    for (std::size_t i = 0; i < conns_.size(); ++i) {
        auto c = conns_[i];
        if (c->fd < 0)
            continue;
        const auto n = c->inbox.size();
        read_from(c);
        any = any || c->inbox.size() != n;
    }
    // Connections closed on both sides, their requests done: gone.
    std::erase_if(conns_, [](auto& c) { return c->fd < 0 && c->inbox.empty(); });
    return any;
}

void redis_sim::accept_new()
{
    for (int guard = 0; guard < 1000; ++guard) {
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        if (coin(faults.refuse_connect)) {
            trace(next_conn_, "connection refused (closed at once)");
            ++counts.refused;
            ::close(fd);
            continue;
        }
        auto c = std::make_shared<conn>();
        c->id = next_conn_++;
        c->fd = fd;
        c->reader = redisReaderCreate();
        ++counts.connections;
        conns_.push_back(c);
        schedule_drop(c);
    }
}

void redis_sim::read_from(const std::shared_ptr<conn>& c)
{
    char buf[16384];
    for (int guard = 0; guard < 10'000; ++guard) {
        const auto n = ::recv(c->fd, buf, sizeof buf, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n <= 0) {
            // The client closed its end (or it broke): what it sent before is still applied as
            // it arrives (Redis runs the commands it read), the answers go nowhere.
            c->client_gone = true;
            ::close(c->fd);
            c->fd = -1;
            break;
        }
        if (!c->open)
            continue;  // closed by the server: what the client still writes is lost
        redisReaderFeed(c->reader, buf, static_cast<std::size_t>(n));
    }
    if (!c->open)
        return;
    for (int guard = 0; guard < 100'000; ++guard) {
        void* r = nullptr;
        if (redisReaderGetReply(c->reader, &r) != REDIS_OK)
            throw std::runtime_error("redis_sim: a client sent bytes that are not RESP");
        if (!r)
            break;
        auto* reply = static_cast<redisReply*>(r);
        std::vector<std::string> args;
        if (reply->type == REDIS_REPLY_ARRAY)
            for (std::size_t i = 0; i < reply->elements; ++i)
                args.emplace_back(reply->element[i]->str, reply->element[i]->len);
        freeReplyObject(reply);
        const auto id = c->next_request++;
        c->inbox.push_back({id, std::move(args), false});
        if (coin(faults.drop_on_request))  // the connection breaks while this request is on the wire
            at(now() + 1, [this, w = std::weak_ptr<conn>(c), a = alive_] {
                if (auto cc = w.lock(); *a && cc && cc->open)
                    drop(cc);
            });
        const auto t = std::max(now() + latency_ns(), c->last_up_ns + 1);
        c->last_up_ns = t;
        at(t, [this, w = std::weak_ptr<conn>(c), a = alive_, id] {
            auto cc = w.lock();
            if (!*a || !cc)
                return;
            for (auto& q : cc->inbox)
                if (q.id == id)
                    q.arrived = true;
            drain(cc);
        });
    }
    if (c->client_gone && c->inbox.empty() && c->open) {
        c->open = false;
        world.drop_connection(c->id);
    }
}

void redis_sim::drain(const std::shared_ptr<conn>& c)
{
    while (c->open && !c->inbox.empty() && c->inbox.front().arrived && now() >= paused_until_ &&
           now() >= c->blocked_until) {
        auto args = std::move(c->inbox.front().args);
        c->inbox.pop_front();
        apply(c, args);
    }
    if (c->client_gone && c->inbox.empty() && c->open) {
        c->open = false;
        world.drop_connection(c->id);
    }
}

void redis_sim::apply(const std::shared_ptr<conn>& c, const std::vector<std::string>& args)
{
    sync_clock();
    ++counts.steps;
    if (wait_command(c, args))
        return;
    const auto writes = world.writes();
    auto replies = world.exec(c->id, args);
    if (world.writes() != writes)
        replicate(c);
    trace(c->id, shown(args) + " -> " + (replies.size() == 1 ? replies[0].show() : resp::array(replies).show()));
    std::string bytes;
    for (auto& r : replies)
        bytes += r.encode();
    if (!c->client_gone)
        send_down(c, std::move(bytes));
    for (auto& [to, push] : world.take_published())
        for (auto& other : conns_)
            if (other->id == to && other->open && !other->client_gone)
                send_down(other, push.encode());
}

void redis_sim::send_down(const std::shared_ptr<conn>& c, std::string bytes)
{
    auto lat = latency_ns();
    if (coin(faults.delay_chance)) {
        ++counts.delayed;
        lat += draw_ms(1, faults.max_delay_ms);
    }
    const auto t = std::max(now() + lat, c->last_down_ns + 1);
    c->last_down_ns = t;
    at(t, [this, w = std::weak_ptr<conn>(c), a = alive_, bytes = std::move(bytes)] {
        auto cc = w.lock();
        if (!*a || !cc || !cc->open || cc->fd < 0 || cc->client_gone)
            return;
        ++counts.steps;
        const auto n = ::send(cc->fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        if (n != static_cast<ssize_t>(bytes.size()) && !(n < 0 && (errno == EPIPE || errno == ECONNRESET)))
            throw std::runtime_error(fmt::format("redis_sim: a reply of {} bytes not written whole ({})", bytes.size(), n));
    });
}

// The server closes the connection: what was read and not applied arrives or not (a coin each;
// an applied one's reply is lost), replies on their way are lost; the client sees the end of the
// stream a trip later.
void redis_sim::drop(const std::shared_ptr<conn>& c)
{
    if (!c->open)
        return;
    ++counts.drops;
    auto inbox = std::move(c->inbox);
    c->inbox.clear();
    c->client_gone = true;  // no more replies
    sync_clock();
    for (auto& q : inbox) {
        if (coin(0.5)) {
            ++counts.applied_unanswered;
            trace(c->id, "on the wire at the close, applied (reply lost): " + shown(q.args));
            const auto writes = world.writes();
            world.exec(c->id, q.args);
            if (world.writes() != writes)
                replicate(c);
            for (auto& [to, push] : world.take_published())
                for (auto& other : conns_)
                    if (other->id == to && other->open && !other->client_gone)
                        send_down(other, push.encode());
        } else {
            trace(c->id, "on the wire at the close, not applied: " + shown(q.args));
            ++counts.not_applied;
        }
    }
    c->open = false;
    world.drop_connection(c->id);
    trace(c->id, "closed by the server");
    at(now() + latency_ns(), [w = std::weak_ptr<conn>(c)] {
        auto cc = w.lock();
        if (cc && cc->fd >= 0) {
            ::shutdown(cc->fd, SHUT_RDWR);
            ::close(cc->fd);
            cc->fd = -1;
        }
    });
}

void redis_sim::drop_all()
{
    auto all = conns_;
    for (auto& c : all)
        drop(c);
}

void redis_sim::schedule_drop(const std::shared_ptr<conn>& c)
{
    if (faults.drops_per_s <= 0 || quiet_)
        return;
    std::exponential_distribution<double> d(faults.drops_per_s);
    const auto after = static_cast<std::int64_t>(d(rng()) * 1e9) + 1;
    at(now() + after, [this, w = std::weak_ptr<conn>(c), a = alive_] {
        auto cc = w.lock();
        if (*a && cc && cc->open && !quiet_)
            drop(cc);
    });
}

void redis_sim::schedule_pause()
{
    if (faults.pauses_per_s <= 0 || quiet_)
        return;
    std::exponential_distribution<double> d(faults.pauses_per_s);
    const auto after = static_cast<std::int64_t>(d(rng()) * 1e9) + 1;
    at(now() + after, [this, a = alive_] {
        if (!*a || quiet_)
            return;
        ++counts.pauses;
        paused_until_ = std::max(paused_until_, now() + draw_ms(1, faults.max_pause_ms));
        trace(0, fmt::format("paused until {:.6f} s", static_cast<double>(paused_until_ - sim_epoch_ns) / 1e9));
        at(paused_until_, [this, a] {
            if (!*a)
                return;
            auto all = conns_;
            for (auto& c : all)
                drain(c);
        });
        schedule_pause();
    });
}

void redis_sim::schedule_failover()
{
    if (faults.failovers_per_s <= 0 || world.replicas <= 0 || quiet_)
        return;
    std::exponential_distribution<double> d(faults.failovers_per_s);
    const auto after = static_cast<std::int64_t>(d(rng()) * 1e9) + 1;
    at(now() + after, [this, a = alive_] {
        if (!*a || quiet_)
            return;
        failover();
        schedule_failover();
    });
}

void redis_sim::schedule_script_flush()
{
    if (faults.script_flushes_per_s <= 0 || quiet_)
        return;
    std::exponential_distribution<double> d(faults.script_flushes_per_s);
    const auto after = static_cast<std::int64_t>(d(rng()) * 1e9) + 1;
    at(now() + after, [this, a = alive_] {
        if (!*a || quiet_)
            return;
        ++counts.script_flushes;
        world.exec(0, {"SCRIPT", "FLUSH"});
        trace(0, "SCRIPT FLUSH (a fault)");
        schedule_script_flush();
    });
}

void redis_sim::failover()
{
    ++counts.failovers;
    drop_all();
    // The replica has the writes replicated by now (a prefix: they reach it in order).
    const auto t = now();
    const auto keep = static_cast<std::int64_t>(
        std::upper_bound(replicated_at_.begin(), replicated_at_.end(), t) - replicated_at_.begin());
    counts.lost_writes += world.writes() - keep;
    trace(0, fmt::format("failover: the replica had {} of {} writes", keep, world.writes()));
    world.roll_back_to(keep);
    replicated_at_.resize(static_cast<std::size_t>(keep));
}

// The replica receives the writes the last command made, in order, each after a drawn lag.
void redis_sim::replicate(const std::shared_ptr<conn>& c)
{
    c->last_write = world.writes();
    if (world.replicas <= 0)
        return;
    while (static_cast<std::int64_t>(replicated_at_.size()) < world.writes()) {
        auto t = now() + latency_ns();
        if (faults.replica_lag_ms > 0)
            t += draw_ms(0, faults.replica_lag_ms);
        if (!replicated_at_.empty())
            t = std::max(t, replicated_at_.back());
        replicated_at_.push_back(t);
    }
}

// WAIT numreplicas timeout: answered when the replica has this connection's last write (1), or at
// the timeout (0); the connection runs nothing else until then (Redis blocks the client). With no
// replica modelled: 0 at once.
bool redis_sim::wait_command(const std::shared_ptr<conn>& c, const std::vector<std::string>& args)
{
    if (args.size() != 3 || (args[0] != "WAIT" && args[0] != "wait") || world.replicas <= 0)
        return false;
    ++world.commands;
    const auto timeout_ms = std::strtoll(args[2].c_str(), nullptr, 10);
    const auto w = std::min<std::int64_t>(c->last_write, static_cast<std::int64_t>(replicated_at_.size()));
    const auto has = w == 0 ? now() : replicated_at_[static_cast<std::size_t>(w - 1)];
    std::int64_t when = std::max(now(), has);
    int acked = 1;
    if (timeout_ms > 0 && when > now() + timeout_ms * 1'000'000) {
        when = now() + timeout_ms * 1'000'000;
        acked = 0;
    }
    trace(c->id, fmt::format("{} -> {} at {:.6f} s", shown(args), acked, static_cast<double>(when - sim_epoch_ns) / 1e9));
    if (when <= now()) {
        if (!c->client_gone)
            send_down(c, resp::number(acked).encode());
        return true;
    }
    c->blocked_until = when;
    at(when, [this, wc = std::weak_ptr<conn>(c), a = alive_, acked] {
        auto cc = wc.lock();
        if (!*a || !cc || !cc->open)
            return;
        if (!cc->client_gone)
            send_down(cc, resp::number(acked).encode());
        drain(cc);
    });
    return true;
}

}  // namespace zksim

// The seam: libzkcoro's redis_link connects here. The simulated server of that port, through the
// real hiredis on a unix socket (no server there: the connection fails, as refused).
extern "C" redisAsyncContext* redisAsyncConnect(const char* ip, int port)
{
    (void)ip;
    const auto path = zksim::redis_socket_path(static_cast<std::uint16_t>(port));
    return redisAsyncConnectUnix(path.c_str());
}
