#include "netns.hpp"

#include "process.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace zkfault {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

constexpr const char* near_address = "198.51.100.1/24";
constexpr const char* far_ip = "198.51.100.2";
constexpr const char* far_address = "198.51.100.2/24";
constexpr const char* name_prefix = "zkfault";

// The namespace names of this process, prepared ahead so that the signal path needs no
// allocation: "/run/netns/zkfault<pid>n" and "...f".
std::array<char, 64> g_near_path{};
std::array<char, 64> g_far_path{};

std::string slurp(const std::string& file)
{
    std::ifstream in(file);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// A file descriptor closed on scope exit.
struct unique_fd {
    int fd = -1;
    ~unique_fd()
    {
        if (fd >= 0)
            ::close(fd);
    }
};

asio::awaitable<void> pump(std::shared_ptr<tcp::socket> from, std::shared_ptr<tcp::socket> to)
{
    std::array<char, 16384> buf;
    for (;;) {
        auto [ec, n] = co_await from->async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
        if (ec)
            break;
        auto [wec, m] = co_await asio::async_write(*to, asio::buffer(buf.data(), n), asio::as_tuple(asio::use_awaitable));
        (void)m;
        if (wec)
            break;
    }
    // One side ended: end both, as a plain TCP relay does.
    boost::system::error_code ignored;
    from->close(ignored);
    to->close(ignored);
}

// Connects to the server from the root namespace (this thread never leaves it) and pumps bytes
// both ways.
asio::awaitable<void> serve(tcp::socket down, std::uint16_t server_port)
{
    auto up = std::make_shared<tcp::socket>(down.get_executor());
    auto [ec] = co_await up->async_connect(tcp::endpoint(asio::ip::address_v4::loopback(), server_port),
                                           asio::as_tuple(asio::use_awaitable));
    if (ec)
        co_return;  // the holder sees its connection closed, as if the server were down
    auto d = std::make_shared<tcp::socket>(std::move(down));
    auto ex = d->get_executor();
    asio::co_spawn(ex, pump(d, up), asio::detached);
    asio::co_spawn(ex, pump(up, d), asio::detached);
}

}  // namespace

int run_command(const std::vector<std::string>& argv, std::string* output)
{
    const char* tmpdir = std::getenv("TMPDIR");
    std::string templ = fmt::format("{}/zkfault-cmd-XXXXXX", tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp");
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    const int fd = ::mkstemp(buf.data());
    if (fd < 0)
        throw std::runtime_error(fmt::format("mkstemp: {}", std::strerror(errno)));
    ::close(fd);
    const std::string out(buf.data());
    const pid_t pid = spawn(argv, out, out);
    auto st = wait_exit(pid, std::chrono::seconds(20));
    const int rc = st ? *st : end_process(pid, std::chrono::seconds(2));
    if (output != nullptr)
        *output = slurp(out);
    ::unlink(out.c_str());
    return st ? rc : 124;
}

struct netns_partition::relay {
    asio::io_context ioc;
    std::vector<std::unique_ptr<tcp::acceptor>> acceptors;
    std::vector<std::uint16_t> listen_ports;
    std::atomic<std::size_t> accepted{0};
    std::thread thread;

    ~relay()
    {
        ioc.stop();
        if (thread.joinable())
            thread.join();
    }

    asio::awaitable<void> accept_loop(tcp::acceptor& acc, std::uint16_t server_port)
    {
        for (;;) {
            auto [ec, sock] = co_await acc.async_accept(asio::as_tuple(asio::use_awaitable));
            if (ec == asio::error::operation_aborted || !acc.is_open())
                co_return;
            if (ec)
                continue;
            ++accepted;
            asio::co_spawn(acc.get_executor(), serve(std::move(sock), server_port), asio::detached);
        }
    }
};

namespace {

// A listening TCP socket on 198.51.100.2:0 created inside the namespace at ns_path; the calling
// thread is back in its own namespace when this returns. Returns the descriptor and the port.
std::pair<int, std::uint16_t> listen_in_namespace(const std::string& ns_path)
{
    unique_fd own{::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)};
    unique_fd target{::open(ns_path.c_str(), O_RDONLY | O_CLOEXEC)};
    if (own.fd < 0 || target.fd < 0)
        throw std::runtime_error(fmt::format("relay: cannot open the namespaces ({}): {}", ns_path, std::strerror(errno)));
    if (::setns(target.fd, CLONE_NEWNET) != 0)
        throw std::runtime_error(fmt::format("relay: setns({}): {}", ns_path, std::strerror(errno)));
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int socket_errno = errno;
    std::string failure;
    std::uint16_t port = 0;
    if (fd < 0) {
        failure = fmt::format("socket: {}", std::strerror(socket_errno));
    } else {
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        ::inet_pton(AF_INET, far_ip, &addr.sin_addr);
        socklen_t len = sizeof addr;
        if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 64) != 0 ||
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
            failure = fmt::format("bind/listen {}: {}", far_ip, std::strerror(errno));
            ::close(fd);
            fd = -1;
        } else {
            port = ntohs(addr.sin_port);
        }
    }
    // Back home before anything else: this thread forks holders and talks to the servers.
    if (::setns(own.fd, CLONE_NEWNET) != 0) {
        // A thread stuck in the far namespace would break everything after; stop here.
        std::fprintf(stderr, "fault-suite: setns back to the root namespace failed: %s\n", std::strerror(errno));
        std::abort();
    }
    if (fd < 0)
        throw std::runtime_error("relay: " + failure);
    return {fd, port};
}

}  // namespace

netns_partition::netns_partition(const std::vector<std::uint16_t>& server_ports)
{
    const long pid = static_cast<long>(::getpid());
    near_ = fmt::format("{}{}n", name_prefix, pid);
    far_ = fmt::format("{}{}f", name_prefix, pid);
    veth_near_ = fmt::format("zkf{}a", pid);
    veth_far_ = fmt::format("zkf{}b", pid);
    std::snprintf(g_near_path.data(), g_near_path.size(), "/run/netns/%s", near_.c_str());
    std::snprintf(g_far_path.data(), g_far_path.size(), "/run/netns/%s", far_.c_str());
    const std::vector<std::vector<std::string>> steps = {
        {"ip", "netns", "add", near_},
        {"ip", "netns", "add", far_},
        // Both ends are born in our namespaces: the veth never exists in the root namespace.
        {"ip", "-n", near_, "link", "add", veth_near_, "type", "veth", "peer", "name", veth_far_, "netns", far_},
        {"ip", "-n", near_, "addr", "add", near_address, "dev", veth_near_},
        {"ip", "-n", far_, "addr", "add", far_address, "dev", veth_far_},
        {"ip", "-n", near_, "link", "set", "lo", "up"},
        {"ip", "-n", far_, "link", "set", "lo", "up"},
        {"ip", "-n", near_, "link", "set", veth_near_, "up"},
        {"ip", "-n", far_, "link", "set", veth_far_, "up"},
    };
    try {
        for (const auto& s : steps) {
            std::string out;
            if (const int rc = run_command(s, &out); rc != 0) {
                std::string cmd;
                for (const auto& a : s)
                    cmd += a + ' ';
                throw std::runtime_error(fmt::format("`{}` failed ({}): {}", cmd, rc, out));
            }
        }
        relay_ = std::make_unique<relay>();
        for (const auto port : server_ports) {
            auto [fd, listen_port] = listen_in_namespace(g_far_path.data());
            auto acc = std::make_unique<tcp::acceptor>(relay_->ioc);
            acc->assign(tcp::v4(), fd);
            relay_->listen_ports.push_back(listen_port);
            asio::co_spawn(relay_->ioc, relay_->accept_loop(*acc, port), asio::detached);
            relay_->acceptors.push_back(std::move(acc));
        }
        relay_->thread = std::thread([r = relay_.get()] { r->ioc.run(); });
    } catch (...) {
        relay_.reset();
        remove_own();
        throw;
    }
}

netns_partition::~netns_partition()
{
    relay_.reset();
    for (const auto& ns : {near_, far_}) {
        std::string out;
        if (run_command({"ip", "netns", "del", ns}, &out) != 0)
            std::fprintf(stderr, "fault-suite: ip netns del %s failed: %s\n", ns.c_str(), out.c_str());
    }
}

std::string netns_partition::relay_connect_string() const
{
    std::string s;
    for (const auto p : relay_->listen_ports)
        s += fmt::format("{}{}:{}", s.empty() ? "" : ",", far_ip, p);
    return s;
}

void netns_partition::set_far_link(bool up)
{
    std::string out;
    if (const int rc = run_command({"ip", "-n", far_, "link", "set", veth_far_, up ? "up" : "down"}, &out); rc != 0)
        throw std::runtime_error(fmt::format("ip link set {} {} failed ({}): {}", veth_far_, up ? "up" : "down", rc, out));
}

void netns_partition::partition() { set_far_link(false); }
void netns_partition::heal() { set_far_link(true); }

std::size_t netns_partition::relayed_connections() const { return relay_->accepted.load(); }

std::string netns_partition::root_snapshot()
{
    std::string addrs, routes, links;
    run_command({"ip", "-o", "-4", "addr", "show"}, &addrs);
    run_command({"ip", "-4", "route", "show"}, &routes);
    run_command({"ip", "-o", "link", "show"}, &links);
    // Addresses without their lifetimes (a DHCP lease counts down): the text before the "\".
    std::string stable_addrs;
    std::istringstream ain(addrs);
    std::string line;
    while (std::getline(ain, line))
        stable_addrs += line.substr(0, line.find('\\')) + '\n';
    // Interface names only: "N: name: <FLAGS> ..." -> "name".
    std::string names;
    std::istringstream in(links);
    while (std::getline(in, line)) {
        const auto a = line.find(": ");
        const auto b = a == std::string::npos ? a : line.find(": ", a + 2);
        if (b != std::string::npos)
            names += line.substr(a + 2, b - a - 2) + '\n';
    }
    return "addresses:\n" + stable_addrs + "routes:\n" + routes + "interfaces:\n" + names;
}

void netns_partition::remove_stale()
{
    DIR* d = ::opendir("/run/netns");
    if (d == nullptr)
        return;
    std::vector<std::string> stale;
    while (const dirent* e = ::readdir(d)) {
        const std::string_view name = e->d_name;
        if (!name.starts_with(name_prefix) || name.size() < std::strlen(name_prefix) + 2)
            continue;
        const std::string digits(name.substr(std::strlen(name_prefix), name.size() - std::strlen(name_prefix) - 1));
        if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos)
            continue;
        const long owner = std::atol(digits.c_str());
        if (owner > 0 && ::kill(static_cast<pid_t>(owner), 0) != 0 && errno == ESRCH)
            stale.emplace_back(name);
    }
    ::closedir(d);
    for (const auto& ns : stale) {
        std::fprintf(stderr, "fault-suite: deleting namespace %s left by an earlier run\n", ns.c_str());
        run_command({"ip", "netns", "del", ns});
    }
}

void netns_partition::remove_own() noexcept
{
    // What `ip netns del` does: detach the bind mount that keeps the namespace, remove the file.
    for (const auto* p : {g_near_path.data(), g_far_path.data()}) {
        if (p[0] == '\0')
            continue;
        ::umount2(p, MNT_DETACH);
        ::unlink(p);
    }
}

}  // namespace zkfault
