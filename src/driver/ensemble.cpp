// Following the ensemble as it is reconfigured (ZooKeeper 3.5+ dynamic reconfiguration), as
// Curator's EnsembleTracker does (client_config::follow_ensemble).
//
// At each connection, and at each change (a watch), the client reads /zookeeper/config, parses its
// member list and resolves it; a list that differs from the one in use is handed to the C library
// with zoo_set_servers. Where we part from the library's own handling of a new list:
// - zoo_set_servers on a connected handle may decide to move the session (to spread the load),
//   and then closes the socket on the spot (update_addrs, 3.8): no session event, and the
//   requests sent on it stay in its list of sent requests, waiting for replies that the next
//   server never sends (its first reply then fails the connection as inconsistent). So the new
//   list is handed over only while the library has no connection: right after a failure, before
//   its next pick (apply_pending_servers, called where failover.cpp steers). When the client
//   must leave its server now (the server left the ensemble, or the load is to be spread), the
//   connection is ended the ordinary way (shutdown, as our ping does): the library fails the
//   requests in flight with a connection loss, which every caller handles, and reconnects, with
//   the same session, to a member of the new list.
// - Rebalancing: when members were added and the server in use stays, the client moves with
//   probability 1 - old count / new count (the library's and the Java client's rule), so the
//   sessions spread over the new members; otherwise it stays, and the new list is used at its
//   next connection (the library consults its list only then).
// - A static configuration (version=0: reconfiguration disabled) and a standalone server (no
//   members) are not followed: the connect string stays as given, which may name a subset of the
//   members on purpose (the failover tests do).
// Observers: they are in the list. An observer serves reads and forwards writes to the leader like
// a follower, and a session on an observer is as good as one on a follower; the lock protocol's
// writes are ordered by the leader whichever member forwards them. So the client connects to
// observers as to participants (a list of observers only is used as it is).
#include "driver/client_impl.hpp"
#include "driver/ensemble.hpp"

#include "async/random_seed.hpp"

#include <zkcoro/error.hpp>

#include <boost/asio/ip/address.hpp>

#include <fmt/format.h>

#include <sys/socket.h>
#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <random>

namespace zkcoro::detail {

// ---------------------------------------------------------------------------------------------
// The parser

namespace {

std::string_view trim(std::string_view s)
{
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
        s.remove_suffix(1);
    return s;
}

bool parse_port(std::string_view text, std::uint16_t& port)
{
    unsigned p = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), p);
    if (ec != std::errc{} || end != text.data() + text.size() || p == 0 || p > 65535)
        return false;
    port = static_cast<std::uint16_t>(p);
    return true;
}

// A host as written in the configuration: "[v6]", a bare IPv6 address, an IPv4 address or a name.
std::optional<host_port> make_host(std::string_view host)
{
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
        host = host.substr(1, host.size() - 2);
    if (host.empty() || host.size() > 253)
        return std::nullopt;
    host_port hp;
    boost::system::error_code ec;
    auto a = boost::asio::ip::make_address(std::string(host), ec);
    if (!ec) {
        hp.host = a.to_string();
        hp.numeric = true;
        return hp;
    }
    for (char c : host)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
              c == '.'))
            return std::nullopt;
    hp.host = std::string(host);
    return hp;
}

bool is_wildcard(const host_port& h)
{
    if (!h.numeric)
        return false;
    boost::system::error_code ec;
    auto a = boost::asio::ip::make_address(h.host, ec);
    return !ec && a.is_unspecified();
}

// "[v6]:rest" or "host:rest": the host and what follows its ':' (nullopt without one).
std::optional<std::pair<std::string_view, std::string_view>> split_host(std::string_view s)
{
    if (!s.empty() && s.front() == '[') {
        auto close = s.find(']');
        if (close == std::string_view::npos || close + 1 >= s.size() || s[close + 1] != ':')
            return std::nullopt;
        return std::pair{s.substr(0, close + 1), s.substr(close + 2)};
    }
    auto colon = s.find(':');
    if (colon == std::string_view::npos)
        return std::nullopt;
    return std::pair{s.substr(0, colon), s.substr(colon + 1)};
}

}  // namespace

std::optional<ensemble_config> parse_ensemble_config(std::string_view text, std::string* why)
{
    ensemble_config cfg;
    auto fail = [&](std::string_view line, std::string_view reason) -> std::optional<ensemble_config> {
        if (why)
            *why = fmt::format("\"{}\": {}", line.substr(0, 200), reason);
        return std::nullopt;
    };
    while (!text.empty()) {
        auto nl = text.find('\n');
        auto line = trim(text.substr(0, nl));
        text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
        if (line.empty())
            continue;
        auto eq = line.find('=');
        if (eq == std::string_view::npos)
            continue;
        auto key = trim(line.substr(0, eq));
        auto value = trim(line.substr(eq + 1));
        if (key == "version") {
            cfg.version = std::string(value);
            continue;
        }
        if (key.substr(0, 7) != "server.")
            continue;  // group.N, weight.N, ...
        ensemble_member m;
        auto id_text = key.substr(7);
        auto [id_end, id_ec] = std::from_chars(id_text.data(), id_text.data() + id_text.size(), m.id);
        if (id_ec != std::errc{} || id_end != id_text.data() + id_text.size())
            return fail(line, "the server id is not a number");
        auto semi = value.find(';');
        auto server_part = trim(value.substr(0, semi));
        auto client_part = semi == std::string_view::npos ? std::string_view{} : trim(value.substr(semi + 1));
        // host:quorumport:electionport[:role]
        auto hs = split_host(server_part);
        if (!hs)
            return fail(line, "expected host:quorumport:electionport[:role]");
        auto quorum_host = make_host(hs->first);
        if (!quorum_host)
            return fail(line, "the member's host is not an address or a host name");
        std::string_view rest = hs->second;
        for (int field = 0; field < 2; ++field) {
            auto colon = rest.find(':');
            rest = colon == std::string_view::npos ? std::string_view{} : rest.substr(colon + 1);
        }
        m.observer = rest == "observer";
        if (client_part.empty()) {
            ++cfg.skipped;  // serves no clients
            continue;
        }
        // [clientaddress:]clientport; a bare IPv6 address is split at its last ':'.
        std::uint16_t port = 0;
        host_port client = *quorum_host;
        auto last = client_part.rfind(':');
        if (last == std::string_view::npos) {
            if (!parse_port(client_part, port))
                return fail(line, "the client port is not a number from 1 to 65535");
        } else {
            if (!parse_port(client_part.substr(last + 1), port))
                return fail(line, "the client port is not a number from 1 to 65535");
            auto addr = make_host(client_part.substr(0, last));
            if (!addr)
                return fail(line, "the client address is not an address or a host name");
            if (!is_wildcard(*addr))
                client = *addr;
        }
        client.port = port;
        m.client = std::move(client);
        cfg.members.push_back(std::move(m));
    }
    return cfg;
}

// ---------------------------------------------------------------------------------------------
// Reading /zookeeper/config

// The context of a read in flight: the C library holds it until it calls back (with ZCLOSING at
// the latest, on the closer's thread). retire_handle() detaches it first (impl = nullptr): all of
// this runs under zk_mutex.
struct ensemble_read {
    client_impl* impl = nullptr;

    static void done(int rc, const char* value, int len, const Stat*, const void* data)
    {
        std::unique_ptr<ensemble_read> r(static_cast<ensemble_read*>(const_cast<void*>(data)));
        if (!r->impl || rc == ZCLOSING)
            return;
        client_impl* self = r->impl;
        self->ensemble_read_ = nullptr;
        self->on_ensemble_read(rc, value && len > 0 ? std::string_view(value, static_cast<std::size_t>(len))
                                                    : std::string_view{});
    }
};

// The read in flight (if any) no longer reaches us: the closer completes it with ZCLOSING.
void client_impl::detach_ensemble_read() noexcept
{
    if (ensemble_read_)
        ensemble_read_->impl = nullptr;
    ensemble_read_ = nullptr;
}

namespace {

std::string joined(const std::vector<std::string>& v)
{
    std::string s;
    for (const auto& a : v)
        s += (s.empty() ? "" : ",") + a;
    return s;
}

bool same_set(std::vector<std::string> a, std::vector<std::string> b)
{
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    return a == b;
}

}  // namespace

// Lock held, inside the library (a session or watch event): reads the member list, with a watch.
void client_impl::read_ensemble()
{
    if (!cfg.follow_ensemble || !zh_ || closed_ || ensemble_read_)
        return;
    auto* r = new ensemble_read{this};
    // Without a chroot zoo_aget sends the very request zoo_agetconfig does (the chroot is the only
    // difference: zoo_agetconfig reads the node outside it), and it is one the simulated C client
    // of tests/sim implements.
    int rc = spec_.chroot.empty() ? zoo_aget(zh_, ZOO_CONFIG_NODE, 1, &ensemble_read::done, r)
                                  : zoo_agetconfig(zh_, 1, &ensemble_read::done, r);
    if (rc != ZOK) {
        delete r;
        log(log_level::debug, fmt::format("cannot read {}: {}", ZOO_CONFIG_NODE, zerror(rc)));
        return;
    }
    ensemble_read_ = r;
}

void client_impl::on_ensemble_read(int rc, std::string_view data)
{
    if (rc != ZOK) {
        // A lost connection: read again at the next one. ZNONODE: a server before 3.5.
        log(log_level::debug, fmt::format("reading {}: {}", ZOO_CONFIG_NODE, zerror(rc)));
        return;
    }
    std::string why;
    auto parsed = parse_ensemble_config(data, &why);
    if (!parsed) {
        log(log_level::warn, fmt::format("cannot follow the ensemble: {} holds a line this client does not "
                                         "understand ({}); keeping the servers in use ({})",
                                         ZOO_CONFIG_NODE, why, joined(servers_in_use_)));
        return;
    }
    if (parsed->members.empty() || parsed->version.empty() || parsed->version == "0") {
        // A standalone server, or a static configuration: nothing is reconfigured.
        log(log_level::debug, fmt::format("{}: static configuration (version {}), not followed", ZOO_CONFIG_NODE,
                                          parsed->version.empty() ? "none" : parsed->version));
        return;
    }
    if (parsed->version == ensemble_version_)
        return;
    std::string summary;
    int observers = 0;
    for (const auto& m : parsed->members) {
        summary += fmt::format("{}server.{} {}:{}{}", summary.empty() ? "" : ", ", m.id, m.client.host, m.client.port,
                               m.observer ? " (observer)" : "");
        observers += m.observer ? 1 : 0;
    }
    summary = fmt::format("{} members ({} observers): {}{}", parsed->members.size(), observers, summary,
                          parsed->skipped ? fmt::format("; {} without a client port left out", parsed->skipped) : "");
    // Names are resolved with Asio, as the connect string's are (the library would block in
    // getaddrinfo); addresses need nothing.
    struct pending_resolution {
        std::vector<std::vector<std::string>> addresses;
        std::size_t pending = 0;
        std::string version, summary;
    };
    auto r = std::make_shared<pending_resolution>();
    r->addresses.resize(parsed->members.size());
    r->version = parsed->version;
    r->summary = std::move(summary);
    const auto gen = ++ensemble_resolve_gen_;
    auto finish = [this, r] {
        std::vector<std::string> all;
        for (auto& list : r->addresses)
            for (auto& a : list)
                if (std::find(all.begin(), all.end(), a) == all.end())
                    all.push_back(a);
        on_ensemble_resolved(std::move(all), r->version, r->summary);
    };
    for (std::size_t i = 0; i < parsed->members.size(); ++i) {
        const auto& h = parsed->members[i].client;
        if (h.numeric)
            r->addresses[i].push_back(c_host_port(h.host, h.port));
        else
            ++r->pending;
    }
    if (r->pending == 0)
        return finish();
    for (std::size_t i = 0; i < parsed->members.size(); ++i) {
        const auto h = parsed->members[i].client;
        if (h.numeric)
            continue;
        resolver_.async_resolve(h.host, std::to_string(h.port), asio::ip::tcp::resolver::numeric_service,
            [self = shared_from_this(), r, i, h, gen, finish](const error_code& ec,
                                                              const asio::ip::tcp::resolver::results_type& res) {
                zk_guard g(self.get());
                if (self->closed_ || gen != self->ensemble_resolve_gen_)
                    return;  // closed, or a newer list is on its way
                if (ec)
                    self->log(log_level::warn, fmt::format("cannot resolve the ensemble member {}: {}", h.host,
                                                           ec.message()));
                for (const auto& e : res)
                    r->addresses[i].push_back(c_host_port(e.endpoint().address().to_string(), h.port));
                if (--r->pending == 0) {
                    finish();
                    self->rearm();
                }
            });
    }
}

void client_impl::on_ensemble_resolved(std::vector<std::string> addresses, std::string version, std::string summary)
{
    if (addresses.empty()) {
        log(log_level::warn, fmt::format("ensemble version {}: no member could be resolved; keeping the servers in "
                                         "use ({})", version, joined(servers_in_use_)));
        return;
    }
    ensemble_version_ = std::move(version);
    ensemble_addresses_ = addresses;
    forced_moves_ = 0;
    const auto& current = servers_pending_.empty() ? servers_in_use_ : servers_pending_;
    if (same_set(addresses, current)) {
        log(log_level::info, fmt::format("ensemble version {}: {}; the servers in use already", ensemble_version_,
                                         summary));
        return;
    }
    ensemble_changes.fetch_add(1, std::memory_order_relaxed);
    const std::size_t old_count = servers_in_use_.size();
    servers_pending_ = std::move(addresses);
    pending_since_ = std::chrono::steady_clock::now();
    log(log_level::info, fmt::format("ensemble version {}: {}; servers were {}", ensemble_version_, summary,
                                     joined(servers_in_use_)));
    if (!zh_ || zoo_state(zh_) != ZOO_CONNECTED_STATE || !desc_.is_open())
        return;  // handed over before the next connection attempt
    const std::string here = connected_address();
    const bool stays = std::find(servers_pending_.begin(), servers_pending_.end(), here) != servers_pending_.end();
    bool move = !stays;
    if (stays && servers_pending_.size() > old_count && old_count > 0) {
        static thread_local std::minstd_rand rng{random_seed()};
        std::uniform_real_distribution<double> u(0.0, 1.0);
        move = u(rng) < 1.0 - static_cast<double>(old_count) / static_cast<double>(servers_pending_.size());
    }
    if (!move) {
        log(log_level::info, fmt::format("staying on {} (a member of the new list); the new list is used from the "
                                         "next connection", here));
        return;
    }
    log(log_level::info,
        stays ? fmt::format("moving from {} to another member to spread the load over the new list, with session "
                            "0x{:x}", here, fsm_.session_id())
              : fmt::format("{} is no longer a member: moving to a member of the new list, with session 0x{:x}",
                            here, fsm_.session_id()));
    // The library sees the end of the stream at its next read and fails the connection as if the
    // server had closed it (requests in flight: connection loss); the new list is handed over then.
    ::shutdown(desc_.native_handle(), SHUT_RDWR);
}

// Lock held, outside any library call, before zookeeper_interest (rearm): the library has no
// connection (its state is 0 right after a failure), so zoo_set_servers changes its list without
// closing anything, and its next pick is a member of the new list.
void client_impl::apply_pending_servers()
{
    // 0: right after a failure; ZOO_NOTCONNECTED_STATE: before the first attempt, or after the
    // library closed its socket itself (update_addrs). No socket either way.
    const int st = zh_ ? zoo_state(zh_) : -1;
    if (servers_pending_.empty() || (st != 0 && st != ZOO_NOTCONNECTED_STATE))
        return;
    const std::string hosts = joined(servers_pending_);
    // The hosts only: the handle keeps the chroot it was made with.
    const int rc = zoo_set_servers(zh_, hosts.c_str());
    if (rc != ZOK) {
        log(log_level::error, fmt::format("the C client refused the new server list {}: {}", hosts, zerror(rc)));
        servers_pending_.clear();
        return;
    }
    servers_in_use_ = std::move(servers_pending_);
    servers_pending_.clear();
    server_count_ = servers_in_use_.size();
    // The library's next pick follows its own rule for a new list (its "reconfig" mode: new
    // members first, with a probability): not the ZOOKEEPER-2466 step, whose correction resumes
    // from the next failure on (failover.cpp).
    steered_ = true;
    attempt_.clear();
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                          pending_since_);
    log(log_level::info, fmt::format("ZooKeeper servers in use: {} (ensemble version {}, read {} ms ago)", hosts,
                                     ensemble_version_, ms.count()));
}

// Lock held, in the session event of a new connection: a connection to a server that is no longer
// a member (the library's first pick after a new list may still be one of the old list, seen on
// 3.8.0) is left at once. Bounded: after more moves in a row than there are members, the client
// stays where it is (the member list it has may be the stale one) until the next change.
void client_impl::leave_if_not_member()
{
    if (!cfg.follow_ensemble || ensemble_addresses_.empty() || !desc_.is_open())
        return;
    const std::string here = connected_address();
    if (here.empty() ||
        std::find(ensemble_addresses_.begin(), ensemble_addresses_.end(), here) != ensemble_addresses_.end()) {
        forced_moves_ = 0;
        return;
    }
    if (++forced_moves_ > ensemble_addresses_.size() + 1) {
        log(log_level::warn, fmt::format("connected to {}, which the ensemble's configuration (version {}) does not "
                                         "list; staying after {} moves", here, ensemble_version_, forced_moves_ - 1));
        return;
    }
    if (servers_pending_.empty() && !same_set(ensemble_addresses_, servers_in_use_)) {
        servers_pending_ = ensemble_addresses_;
        pending_since_ = std::chrono::steady_clock::now();
    }
    log(log_level::info, fmt::format("{} is no longer a member (ensemble version {}): moving to a member, with "
                                     "session 0x{:x}", here, ensemble_version_, fsm_.session_id()));
    ::shutdown(desc_.native_handle(), SHUT_RDWR);
}

std::string client_impl::connected_address() const
{
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (!zh_ || !zookeeper_get_connected_host(zh_, reinterpret_cast<sockaddr*>(&ss), &len))
        return {};
    char buf[INET6_ADDRSTRLEN] = {};
    if (ss.ss_family == AF_INET) {
        auto* a = reinterpret_cast<sockaddr_in*>(&ss);
        inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
        return c_host_port(buf, ntohs(a->sin_port));
    }
    if (ss.ss_family == AF_INET6) {
        auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
        inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
        return c_host_port(buf, ntohs(a->sin6_port));
    }
    return {};
}

std::vector<std::string> client_impl::servers() const
{
    zk_guard g(nullptr);
    return servers_pending_.empty() ? servers_in_use_ : servers_pending_;
}

}  // namespace zkcoro::detail
