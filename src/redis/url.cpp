// parse_redis_url: redis:// (one server), redis+sentinel:// (the sentinels of a master) and
// redis+cluster:// (seed nodes of a Redis Cluster);
// redact_url: a URL or connect string as messages show it (no password).
#include <zkcoro/redis.hpp>

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <limits>

namespace zkcoro {

namespace {

bool parse_int(std::string_view s, long long lo, long long hi, long long& out)
{
    if (s.empty())
        return false;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc{} && p == s.data() + s.size() && out >= lo && out <= hi;
}

// host[:port] or [v6][:port]; "" on success, else why not.
std::string parse_hostport(std::string_view hostport, std::string& host_out, std::uint16_t& port_out)
{
    std::string_view host, port;
    if (hostport.starts_with('[')) {
        auto close = hostport.find(']');
        if (close == std::string_view::npos)
            return "an IPv6 address opened with '[' is not closed with ']'";
        host = hostport.substr(1, close - 1);
        auto after = hostport.substr(close + 1);
        if (!after.empty()) {
            if (after[0] != ':')
                return "expected ':port' after the IPv6 address";
            port = after.substr(1);
        }
    } else {
        auto colon = hostport.rfind(':');
        host = hostport.substr(0, colon);
        if (colon != std::string_view::npos)
            port = hostport.substr(colon + 1);
    }
    if (host.empty())
        return "the host is empty";
    for (char c : host)
        if (static_cast<unsigned char>(c) <= ' ' || c == '/' || c == '?' || c == '#' || c == '@' || c == ',')
            return fmt::format("the host '{}' has a character not allowed in a host name", host);
    host_out = std::string(host);
    if (!port.empty() || hostport.ends_with(':')) {
        long long n = 0;
        if (!parse_int(port, 1, 65535, n))
            return fmt::format("the port '{}' is not a number from 1 to 65535", port);
        port_out = static_cast<std::uint16_t>(n);
    }
    return {};
}

// The length of "scheme:" at the start of `text` when a URL's scheme is there (RFC 3986: a
// letter, then letters, digits, '+', '-', '.'), and what follows the ':' is not a digit (then it
// is a ZooKeeper connect string's host:port); else 0.
std::size_t scheme_length(std::string_view text)
{
    auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
    auto digit = [](char c) { return c >= '0' && c <= '9'; };
    if (text.empty() || !alpha(text[0]))
        return 0;
    for (std::size_t i = 1; i < text.size(); ++i) {
        const char c = text[i];
        if (c == ':')
            return i + 1 < text.size() && digit(text[i + 1]) ? 0 : i + 1;
        if (!alpha(c) && !digit(c) && c != '+' && c != '-' && c != '.')
            return 0;
    }
    return 0;
}

std::string lower(std::string_view s)
{
    std::string out(s);
    for (auto& c : out)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

}  // namespace

std::string redact_url(std::string_view text)
{
    std::size_t start = 0;
    std::size_t at = std::string_view::npos;
    if (const auto n = scheme_length(text); n > 0) {
        // A URL (or what was meant as one): its user info ends at the last '@', as
        // parse_redis_url reads it (a password may hold '/' and '@').
        start = n;
        while (start < text.size() && text[start] == '/')
            ++start;
        at = text.rfind('@');
        if (at != std::string_view::npos && at < start)
            at = std::string_view::npos;
    } else {
        // A connect string: an '@' in the hosts (a chroot may hold one, and is shown).
        at = text.substr(0, text.find('/')).rfind('@');
    }
    if (at == std::string_view::npos)
        return std::string(text);
    auto cred = text.substr(start, at - start);
    const auto colon = cred.find(':');
    const auto user = colon == std::string_view::npos ? std::string_view{} : cred.substr(0, colon + 1);
    if (cred.size() == user.size())
        return std::string(text);  // an empty password: nothing to hide
    std::string out(text.substr(0, start));
    out += user;
    out += "***";
    out += text.substr(at);
    return out;
}

redis_url parse_redis_url(std::string_view text, error_code& ec, std::string* why)
{
    redis_url u;
    auto bad = [&](std::string reason) {
        ec = redis_errc::bad_url;
        if (why)
            *why = fmt::format("bad Redis URL '{}': {}", redact_url(text), reason);
        return redis_url{};
    };
    ec = {};
    // The scheme is case-insensitive (RFC 3986 3.1).
    auto starts_nocase = [&](std::string_view prefix) {
        if (text.size() < prefix.size())
            return false;
        for (std::size_t i = 0; i < prefix.size(); ++i)
            if (std::tolower(static_cast<unsigned char>(text[i])) != prefix[i])
                return false;
        return true;
    };
    constexpr std::string_view scheme = "redis://";
    constexpr std::string_view sentinel_scheme = "redis+sentinel://";
    constexpr std::string_view cluster_scheme = "redis+cluster://";
    constexpr std::string_view forms = "redis://[[USER]:PASSWORD@]HOST:PORT[/DB], "
                                       "redis+sentinel://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT...]/MASTER[/DB] or "
                                       "redis+cluster://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT...]";
    const bool sentinel = starts_nocase(sentinel_scheme);
    const bool cluster = !sentinel && starts_nocase(cluster_scheme);
    if (!sentinel && !cluster && !starts_nocase(scheme)) {
        // Say which schemes there are, whatever was given (the scheme, if any, is no secret).
        const auto sep = text.find("://");
        const auto given = sep == std::string_view::npos ? std::string() : lower(text.substr(0, sep));
        if (given == "rediss")
            return bad("TLS is not supported by Debian's hiredis 0.14: use redis:// (through a TLS tunnel if needed)");
        if (given == "rediss+sentinel" || given == "redis+sentinels" || given == "rediss+sentinels")
            return bad(fmt::format("TLS is not supported by Debian's hiredis 0.14: use redis+sentinel:// (through a "
                                   "TLS tunnel if needed); the supported forms are {}",
                                   forms));
        if (given == "rediss+cluster")
            return bad(fmt::format("TLS is not supported by Debian's hiredis 0.14: use redis+cluster:// (through a "
                                   "TLS tunnel if needed); the supported forms are {}",
                                   forms));
        if (given == "cluster" || given == "redis-cluster" || given == "redis+clusters")
            return bad(fmt::format("the scheme '{}://' is not supported: Redis Cluster URLs are "
                                   "redis+cluster://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT...]",
                                   given));
        if (given == "sentinel" || given == "redis-sentinel" || given == "sentinels")
            return bad(fmt::format("the scheme '{}://' is not supported: Sentinel URLs are "
                                   "redis+sentinel://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT...]/MASTER[/DB]",
                                   given));
        if (!given.empty() && given.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789+-.") == std::string::npos)
            return bad(fmt::format("the scheme '{}://' is not supported: use {} (unix sockets and TLS are not "
                                   "supported)",
                                   given, forms));
        return bad(fmt::format("it must start with redis://, redis+sentinel:// or redis+cluster://: {} (unix sockets "
                               "and TLS are not "
                               "supported)",
                               forms));
    }
    auto rest = text.substr(sentinel ? sentinel_scheme.size() : cluster ? cluster_scheme.size() : scheme.size());
    if (auto at = rest.rfind('@'); at != std::string_view::npos) {
        auto cred = rest.substr(0, at);
        rest = rest.substr(at + 1);
        if (auto colon = cred.find(':'); colon != std::string_view::npos) {
            u.user = std::string(cred.substr(0, colon));
            cred = cred.substr(colon + 1);
        }
        if (cred.empty())
            return bad(u.user.empty() ? "the password before '@' is empty"
                                      : fmt::format("the password of user '{}' is empty", u.user));
        u.password = std::string(cred);
    }
    auto slash = rest.find('/');
    std::string_view hosts = rest.substr(0, slash);
    std::string_view path = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
    if (sentinel) {
        // /MASTER[/db]
        auto s2 = path.find('/');
        u.master_name = std::string(path.substr(0, s2));
        if (u.master_name.empty())
            return bad("the master's name is missing: redis+sentinel://host:port[,host:port...]/MASTER[/db]");
        path = s2 == std::string_view::npos ? std::string_view{} : path.substr(s2 + 1);
        if (hosts.empty())
            return bad("no sentinel is given before the master's name");
        while (true) {
            auto comma = hosts.find(',');
            redis_url::endpoint e;
            e.port = 26379;
            auto one = hosts.substr(0, comma);
            if (auto err = parse_hostport(one, e.host, e.port); !err.empty())
                return bad(fmt::format("sentinel {}: {}", u.sentinels.size() + 1, err));
            u.sentinels.push_back(std::move(e));
            if (comma == std::string_view::npos)
                break;
            hosts = hosts.substr(comma + 1);
        }
        u.host.clear();
        u.port = 0;
    } else if (cluster) {
        // host:port[,host:port...]: seed nodes, any of them (a master or a replica) tells the map.
        if (!path.empty() || slash != std::string_view::npos)
            return bad(fmt::format("a Redis Cluster has database 0 only: nothing may follow the nodes (found '/{}')",
                                   path));
        if (hosts.empty())
            return bad("no cluster node is given: redis+cluster://host:port[,host:port...]");
        while (true) {
            auto comma = hosts.find(',');
            redis_url::endpoint e;
            e.port = 6379;
            auto one = hosts.substr(0, comma);
            if (one.empty())
                return bad(fmt::format("cluster node {} is empty (two commas, or a comma at the start or end)",
                                       u.cluster_nodes.size() + 1));
            if (auto err = parse_hostport(one, e.host, e.port); !err.empty())
                return bad(fmt::format("cluster node {}: {}", u.cluster_nodes.size() + 1, err));
            u.cluster_nodes.push_back(std::move(e));
            if (comma == std::string_view::npos)
                break;
            hosts = hosts.substr(comma + 1);
        }
        u.host.clear();
        u.port = 0;
    } else if (auto err = parse_hostport(hosts, u.host, u.port); !err.empty()) {
        return bad(err);
    }
    if (!path.empty()) {
        long long n = 0;
        // Any database an int holds: how many the server has (its `databases` setting, 16 by
        // default) is the server's to say, with SELECT's error at the connection.
        if (!parse_int(path, 0, std::numeric_limits<int>::max(), n))
            return bad(fmt::format("the database '{}' is not a whole number from 0 to {}", path,
                                   std::numeric_limits<int>::max()));
        u.db = static_cast<int>(n);
    }
    return u;
}

}  // namespace zkcoro
