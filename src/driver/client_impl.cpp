// The driver: the single-threaded ZooKeeper C client run by an Asio executor, with no thread of
// its own. zookeeper_interest() tells which socket, which readiness and which deadline the
// library needs; we wait for them on a dup() of its fd and a steady_timer, then let
// zookeeper_process() do the work, and ask again.
#include "driver/client_impl.hpp"

#include "async/pool.hpp"

#include <zkcoro/error.hpp>

#include <fmt/format.h>

#include <boost/asio/post.hpp>

#include <arpa/inet.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <algorithm>
#include <deque>
#include <thread>

namespace zkcoro::detail {

std::recursive_mutex& zk_mutex() noexcept
{
    static std::recursive_mutex m;
    return m;
}

namespace {

// How deep this thread is in zk_guards, and the client of the innermost (initial-exec: pool.hpp).
thread_local int tl_depth ZKCORO_TLS_INITIAL_EXEC = 0;
thread_local client_impl* tl_current ZKCORO_TLS_INITIAL_EXEC = nullptr;

ZooLogLevel to_zoo_level(log_level l) noexcept
{
    switch (l) {
    case log_level::error: return ZOO_LOG_LEVEL_ERROR;
    case log_level::warn: return ZOO_LOG_LEVEL_WARN;
    case log_level::info: return ZOO_LOG_LEVEL_INFO;
    case log_level::debug: return ZOO_LOG_LEVEL_DEBUG;
    }
    return ZOO_LOG_LEVEL_WARN;
}

// The C library's log level is process-wide: keep it at the most verbose any client asked for.
void raise_library_log_level(log_level l)
{
    static int current = -1;
    if (static_cast<int>(l) > current) {
        current = static_cast<int>(l);
        zoo_set_debug_level(to_zoo_level(l));
    }
}

void discard_log(const char*) {}

// Closes retired handles one after another on a thread of its own: zookeeper_close blocks (up to
// seconds over a dead link) and runs leftover completions inline, so it must run neither on the
// driver nor inside a completion.
class handle_closer {
public:
    static handle_closer& instance()
    {
        static handle_closer c;
        return c;
    }

    void submit(zhandle_t* zh, std::function<void(int)> done)
    {
        {
            std::lock_guard lk(m_);
            jobs_.emplace_back(zh, std::move(done));
            if (!worker_.joinable())
                worker_ = std::thread([this] { run(); });
        }
        cv_.notify_one();
    }

    ~handle_closer()
    {
        {
            std::lock_guard lk(m_);
            stop_ = true;
        }
        cv_.notify_one();
        if (worker_.joinable())
            worker_.join();
    }

private:
    void run()
    {
        std::unique_lock lk(m_);
        for (;;) {
            cv_.wait(lk, [&] { return stop_ || !jobs_.empty(); });
            if (jobs_.empty())
                return;
            auto job = std::move(jobs_.front());
            jobs_.pop_front();
            lk.unlock();
            int close_rc;
            {
                std::lock_guard zl(zk_mutex());
                close_rc = zookeeper_close(job.first);
            }
            // The job (its completions' states, which hold their handlers' executors) goes right
            // after it has posted them, before this thread waits for anything: a caller may end
            // its io_context as soon as its completion has run, and an executor of it destroyed
            // here later would touch the dead context (a strand's service mutex: a hang, or a
            // glibc abort, seen in integration_client after its strand test).
            if (job.second)
                job.second(close_rc);
            job = {};
            lk.lock();
        }
    }

    std::mutex m_;
    std::condition_variable cv_;
    std::deque<std::pair<zhandle_t*, std::function<void(int)>>> jobs_;
    std::thread worker_;
    bool stop_ = false;
};

}  // namespace

zk_guard::zk_guard(client_impl* self) : lock_(zk_mutex()), self_(self), prev_(tl_current)
{
    ++tl_depth;
    tl_current = self;
}

zk_guard::~zk_guard()
{
    tl_current = prev_;
    if (--tl_depth == 0 && self_ && !self_->log_buffer.empty()) {
        auto lines = std::move(self_->log_buffer);
        self_->log_buffer.clear();
        lock_.unlock();
        if (self_->cfg.log)
            for (auto& [level, text] : lines)
                self_->cfg.log(level, text);
    }
}

client_impl::client_impl(asio::any_io_executor ex, client_config c)
    : executor(std::move(ex)), cfg(std::move(c)), resolver_(executor), resolve_retry_(executor), desc_(executor),
      ping_timer_(executor), timer_(executor)
{
    std::string why;
    config_error_ = check_config(cfg, &why);
    if (config_error_)
        log(log_level::error, "invalid client_config: " + why);
    else
        spec_ = *parse_connect_string(cfg.connect_string, nullptr);
    acl_entries_.reserve(cfg.default_acl.size());
    for (auto& e : cfg.default_acl) {
        ACL a{};
        a.perms = e.perms;
        a.id.scheme = e.scheme.data();
        a.id.id = e.id.data();
        acl_entries_.push_back(a);
    }
    acl_vector.count = static_cast<std::int32_t>(acl_entries_.size());
    acl_vector.data = acl_entries_.data();
}

client_impl::~client_impl()
{
    // close() already retired the handle; this only covers a client never closed.
    if (zh_) {
        zk_guard g(nullptr);
        detach_ensemble_read();
        zoo_set_context(zh_, nullptr);
        zoo_set_log_callback(zh_, &discard_log);
        handle_closer::instance().submit(zh_, nullptr);
    }
}

void client_impl::log(log_level level, std::string message)
{
    if (!cfg.log || level > cfg.log_threshold)
        return;
    if (tl_depth > 0) {
        // Inside the lock: emitted by the outermost zk_guard once the lock is released.
        log_buffer.emplace_back(level, std::move(message));
        return;
    }
    cfg.log(level, message);
}

void client_impl::log_thunk(const char* message)
{
    auto* self = tl_current;
    if (!self || !message)
        return;
    std::string_view m(message);
    log_level level = log_level::debug;
    if (m.find("ZOO_ERROR@") != std::string_view::npos)
        level = log_level::error;
    else if (m.find("ZOO_WARN@") != std::string_view::npos)
        level = log_level::warn;
    else if (m.find("ZOO_INFO@") != std::string_view::npos)
        level = log_level::info;
    // The watch on /zookeeper/config of a client with a chroot (driver/ensemble.cpp): the library
    // finds the event's path outside the chroot and says so at error level; it is expected.
    if (level == log_level::error && m.find("server path " ZOO_CONFIG_NODE " does not include chroot path") !=
                                         std::string_view::npos)
        level = log_level::debug;
    self->log(level, std::string(m));
}

session_credentials client_impl::credentials() const
{
    zk_guard g(nullptr);
    session_credentials c;
    if (zh_) {
        const clientid_t* id = zoo_client_id(zh_);
        c.id = id->client_id;
        c.password.assign(id->passwd, sizeof id->passwd);
    }
    return c;
}

std::string client_impl::connected_server() const
{
    zk_guard g(nullptr);
    if (!zh_ || fsm_.state() != session_state::connected)
        return {};
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (!zookeeper_get_connected_host(zh_, reinterpret_cast<sockaddr*>(&ss), &len))
        return {};
    char buf[INET6_ADDRSTRLEN] = {};
    if (ss.ss_family == AF_INET) {
        auto* a = reinterpret_cast<sockaddr_in*>(&ss);
        inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
        return fmt::format("{}:{}", buf, ntohs(a->sin_port));
    }
    if (ss.ss_family == AF_INET6) {
        auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
        inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
        return fmt::format("[{}]:{}", buf, ntohs(a->sin6_port));
    }
    return {};
}

void client_impl::mark_heard() noexcept { last_heard_ns.store(now_ns(), std::memory_order_relaxed); }

// Makes a handle for the connect string, resolving host names first. Numeric addresses need no
// lookup, and the handle is made at once. Lock held.
void client_impl::begin_handle()
{
    if (resolving_)
        return;
    if (cfg.follow_ensemble && !ensemble_addresses_.empty()) {
        // After an expiry: the ensemble as last read (driver/ensemble.cpp), not the connect
        // string, whose members may all be gone by now.
        servers_pending_.clear();
        servers_in_use_ = ensemble_addresses_;
        server_count_ = servers_in_use_.size();
        std::string hosts;
        for (const auto& a : servers_in_use_)
            hosts += (hosts.empty() ? "" : ",") + a;
        log(log_level::info, fmt::format("ZooKeeper servers in use: {} (ensemble version {})", hosts,
                                         ensemble_version_));
        return start_handle(hosts + spec_.chroot);
    }
    auto r = std::make_shared<resolution>();
    r->addresses.resize(spec_.hosts.size());
    for (std::size_t i = 0; i < spec_.hosts.size(); ++i)
        if (spec_.hosts[i].numeric)
            r->addresses[i].push_back(c_host_port(spec_.hosts[i].host, spec_.hosts[i].port));
        else
            ++r->pending;
    resolving_ = r;
    if (r->pending == 0)
        return on_resolved();
    for (std::size_t i = 0; i < spec_.hosts.size(); ++i) {
        const auto& h = spec_.hosts[i];
        if (h.numeric)
            continue;
        resolver_.async_resolve(h.host, std::to_string(h.port), asio::ip::tcp::resolver::numeric_service,
            [self = shared_from_this(), r, i](const error_code& ec, const asio::ip::tcp::resolver::results_type& res) {
                zk_guard g(self.get());
                if (self->resolving_ != r)
                    return;  // closed meanwhile
                const auto& host = self->spec_.hosts[i];
                if (ec)
                    r->failures.push_back(fmt::format("{}: {}", host.host, ec.message()));
                for (const auto& e : res)
                    r->addresses[i].push_back(c_host_port(e.endpoint().address().to_string(), host.port));
                if (!ec && res.empty())
                    r->failures.push_back(fmt::format("{}: no address", host.host));
                if (--r->pending == 0)
                    self->on_resolved();
            });
    }
}

// Every host of the connect string is resolved (or failed): make the handle with the addresses,
// or report that no host could be resolved. Lock held.
void client_impl::on_resolved()
{
    auto r = std::move(resolving_);
    resolving_.reset();
    if (closed_)
        return;
    // Each address once: the library's list must hold distinct addresses for the failover
    // steering (driver/failover.cpp) to know where it stands.
    std::string hosts;
    std::vector<std::string> seen;
    for (const auto& list : r->addresses)
        for (const auto& a : list)
            if (std::find(seen.begin(), seen.end(), a) == seen.end()) {
                seen.push_back(a);
                hosts += (hosts.empty() ? "" : ",") + a;
            }
    server_count_ = seen.size();
    servers_in_use_ = seen;
    servers_pending_.clear();
    if (!hosts.empty())
        log(log_level::info, fmt::format("ZooKeeper servers in use: {}", hosts));
    for (const auto& f : r->failures)
        log(hosts.empty() ? log_level::error : log_level::warn,
            fmt::format("cannot resolve the ZooKeeper host {}", f));
    if (!hosts.empty())
        return start_handle(hosts + spec_.chroot);
    if (fsm_.generation() == 0) {
        // The first connect: tell its callers; a later async_connect resolves again.
        started_ = false;
        for (auto& w : connect_waiters_)
            w.op->complete(client_errc::name_resolution_failed);
        connect_waiters_.clear();
        return;
    }
    // After an expiry: the client keeps trying, once a second, until closed.
    resolve_retry_.expires_after(std::chrono::seconds(1));
    resolve_retry_.async_wait([self = shared_from_this()](const error_code& ec) {
        if (ec)
            return;
        zk_guard g(self.get());
        if (!self->closed_ && !self->zh_)
            self->begin_handle();
    });
}

void client_impl::start_handle(const std::string& hosts)
{
    raise_library_log_level(cfg.log_threshold);
    clientid_t id{};
    const clientid_t* idp = nullptr;
    if (cfg.resume_session && fsm_.generation() == 0) {
        id.client_id = cfg.resume_session->id;
        std::memcpy(id.passwd, cfg.resume_session->password.data(),
                    std::min(sizeof id.passwd, cfg.resume_session->password.size()));
        idp = &id;
    }
    zh_ = zookeeper_init2(hosts.c_str(), &client_impl::watcher_thunk,
                          static_cast<int>(cfg.session_timeout.count()), idp, this, 0,
                          cfg.log ? &client_impl::log_thunk : &discard_log);
    if (!zh_) {
        int err = errno;
        log(log_level::error, fmt::format("cannot create a ZooKeeper handle for \"{}\" (from \"{}\"): {}",
                                          hosts, cfg.connect_string, std::strerror(err)));
        // The only causes are a connect string the library cannot parse or resolve, and memory.
        auto a = fsm_.on_close();
        closed_ = true;
        state_atomic = fsm_.state();
        apply(a);
        for (auto& w : connect_waiters_)
            w.op->complete(client_errc::invalid_connect_string);
        connect_waiters_.clear();
        return;
    }
    // By default the library resolves the host list again on every zookeeper_interest call
    // (getaddrinfo, /dev/urandom, ~10 system calls): measured as half of the client's CPU per
    // request. Resolve on connection loss only.
    zoo_set_servers_resolution_delay(zh_, -1);
    ensemble_read_ = nullptr;
    established_ = false;
    steered_ = false;
    attempt_.clear();
    for (auto& a : cfg.auth)
        zoo_add_auth(zh_, a.scheme.c_str(), a.credentials.data(),
                     static_cast<int>(a.credentials.size()), nullptr, nullptr);
    rearm();
}

void client_impl::close(std::shared_ptr<op_state<>> op)
{
    zk_guard g(this);
    if (op)
        close_waiters_.push_back(op);
    if (closed_) {
        // Already closed and the handle retired (or never made): nothing to wait for.
        if (!zh_) {
            for (auto& w : close_waiters_)
                w->complete({});
            close_waiters_.clear();
        }
        return;
    }
    closed_ = true;
    resolving_.reset();
    resolver_.cancel();
    resolve_retry_.cancel();
    auto a = fsm_.on_close();
    state_atomic = fsm_.state();
    apply(a);
    for (auto& w : connect_waiters_)
        w.op->complete(client_errc::closed);
    connect_waiters_.clear();
    if (zh_) {
        // Completed on our own executor, not on the closer's thread: there a completion's state
        // (and the handler's executor it holds) could outlive the caller's io_context, which the
        // caller may end as soon as its completion has run (integration_client's strand test
        // left a strand to be destroyed after its context: a hang or a glibc abort in the next
        // test). The closer keeps only our executor, whose copy ends with nothing to touch.
        auto waiters = std::make_shared<std::vector<std::shared_ptr<op_state<>>>>(std::move(close_waiters_));
        close_waiters_.clear();
        retire_handle([waiters, ex = executor](int) mutable {
            if (waiters->empty())
                return;  // nothing to post: the context may be gone (a client destroyed, no close awaited)
            asio::post(ex, [w = std::move(waiters)] {
                for (auto& waiter : *w)
                    waiter->complete({});
            });
        });
    } else {
        for (auto& w : close_waiters_)
            w->complete({});
        close_waiters_.clear();
    }
}

// Hands the current handle to the closer thread, after cutting every tie it has to us.
void client_impl::retire_handle(std::function<void(int)> done)
{
    ping_timer_.cancel();
    ++ping_gen_;
    drop_socket();
    timer_.cancel();
    ++timer_gen_;
    timer_pending_ = false;
    detach_ensemble_read();
    zoo_set_context(zh_, nullptr);
    zoo_set_log_callback(zh_, &discard_log);
    handle_closer::instance().submit(zh_, std::move(done));
    zh_ = nullptr;
}

}  // namespace zkcoro::detail
