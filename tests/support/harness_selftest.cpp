// Self-test of the test support: zk_server, zk_ensemble and tcp_proxy.
// Plain main(); exits 0 when every check passes. Every wait is bounded.
#include "tcp_proxy.hpp"
#include "zk_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

int g_checks = 0;

void check(bool ok, const std::string& what) {
    ++g_checks;
    if (!ok) throw std::runtime_error("check failed: " + what);
    fmt::print("  ok: {}\n", what);
}

long long ms_since(steady::time_point t0) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - t0).count();
}

// Polls cond every 10 ms until it holds or the timeout passes.
bool eventually(const std::function<bool()>& cond, std::chrono::milliseconds timeout) {
    const auto deadline = steady::now() + timeout;
    for (;;) {
        if (cond()) return true;
        if (steady::now() >= deadline) return false;
        std::this_thread::sleep_for(10ms);
    }
}

bool process_gone(pid_t pid) { return pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH; }

// A plain blocking TCP client socket to 127.0.0.1:port.
class raw_conn {
public:
    explicit raw_conn(std::uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
        if (fd_ < 0) throw std::runtime_error("socket failed");
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(port);
        if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
            throw std::runtime_error(fmt::format("connect to {} failed", port));
    }
    ~raw_conn() { ::close(fd_); }
    raw_conn(const raw_conn&) = delete;
    raw_conn& operator=(const raw_conn&) = delete;

    void send(std::string_view s) {
        if (::send(fd_, s.data(), s.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(s.size()))
            throw std::runtime_error("send failed");
    }

    enum class end { eof, reset, timeout };
    struct result {
        std::string data;
        end how;
    };

    // Reads until EOF, reset or the timeout.
    result read_all(std::chrono::milliseconds timeout) {
        const auto deadline = steady::now() + timeout;
        result r{{}, end::timeout};
        char buf[1024];
        for (;;) {
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now()).count();
            if (left <= 0) return r;
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
            ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
            if (n == 0) {
                r.how = end::eof;
                return r;
            }
            if (n < 0) {
                if (errno == EINTR) continue;
                r.how = end::reset;
                return r;
            }
            r.data.append(buf, static_cast<std::size_t>(n));
        }
    }

private:
    int fd_;
};

void test_standalone_and_proxy() {
    fmt::print("== standalone server\n");
    auto t0 = steady::now();
    zktest::zk_server zk;
    fmt::print("  standalone server ready in {} ms at {} (pid {})\n", ms_since(t0), zk.connect_string(), zk.pid());
    const pid_t first_pid = zk.pid();
    check(zk.four_letter("ruok") == "imok", "ruok -> imok");
    check(zk.four_letter("srvr").find("Mode: standalone") != std::string::npos, "srvr reports Mode: standalone");

    fmt::print("== tcp_proxy in front of it\n");
    {
        zktest::tcp_proxy proxy("127.0.0.1", zk.port());
        fmt::print("  proxy at {}\n", proxy.address());
        {
            raw_conn c(proxy.port());
            c.send("ruok");
            auto r = c.read_all(3s);
            check(r.data == "imok" && r.how == raw_conn::end::eof, "ruok through the proxy -> imok, then EOF");
        }
        check(zktest::four_letter(proxy.port(), "srvr").find("Mode: standalone") != std::string::npos,
              "srvr through the proxy");
        check(eventually([&] { return proxy.open_connections() == 0; }, 2s), "finished connections are closed");

        {
            // An idle connection stays open at the server until cut.
            raw_conn c(proxy.port());
            check(eventually([&] { return proxy.open_connections() == 1; }, 2s), "one open connection");
            auto t = steady::now();
            proxy.cut();
            check(proxy.open_connections() == 0, "cut() returns with no open connection");
            auto r = c.read_all(2s);
            check(r.how != raw_conn::end::timeout, fmt::format("client sees the cut (EOF/reset) after {} ms", ms_since(t)));
        }
        {
            raw_conn c(proxy.port());
            check(eventually([&] { return proxy.open_connections() == 1; }, 2s), "proxy accepts again after cut");
            proxy.cut(zktest::tcp_proxy::cut_mode::reset);
            check(c.read_all(2s).how == raw_conn::end::reset, "cut(reset) -> ECONNRESET");
        }

        proxy.set_blackhole(true);
        {
            raw_conn c(proxy.port());
            c.send("ruok");
            auto r = c.read_all(500ms);
            check(r.data.empty() && r.how == raw_conn::end::timeout, "blackhole: no reply, connection stays open");
            proxy.set_blackhole(false);
            check(c.read_all(2s).how != raw_conn::end::timeout,
                  "blackhole off closes connections accepted during it");
        }
        check(zktest::four_letter(proxy.port(), "ruok") == "imok", "blackhole off: ruok works again");
        {
            // Blackhole an established connection: its bytes are dropped.
            raw_conn c(proxy.port());
            check(eventually([&] { return proxy.open_connections() == 1; }, 2s), "connection established");
            // Wait until the upstream side is connected: a ruok through a
            // second connection proves the proxy has processed the first.
            check(zktest::four_letter(proxy.port(), "ruok") == "imok", "proxy forwarding");
            proxy.set_blackhole(true);
            c.send("ruok");
            check(c.read_all(500ms).how == raw_conn::end::timeout, "blackhole on an open connection: no reply");
            proxy.set_blackhole(false);
            check(c.read_all(300ms).data.empty(), "dropped bytes are not replayed");
            proxy.cut();
        }

        proxy.set_refuse(true);
        {
            const auto before = proxy.accepted();
            raw_conn c(proxy.port());
            auto r = c.read_all(2s);
            check(r.how != raw_conn::end::timeout && r.data.empty(), "refuse: connection closed at once");
            check(eventually([&] { return proxy.accepted() == before + 1; }, 1s), "refused connection counted");
        }
        proxy.set_refuse(false);

        proxy.set_delay(150ms);
        {
            auto t = steady::now();
            auto reply = zktest::four_letter(proxy.port(), "ruok", 3s);
            auto took = ms_since(t);
            check(reply == "imok" && took >= 300, fmt::format("delay 150 ms each way: ruok took {} ms", took));
        }
        proxy.set_delay(0ms);
        fmt::print("  proxy accepted {} connections in total\n", proxy.accepted());
    }

    fmt::print("== pause / resume\n");
    zk.pause();
    check(zk.four_letter("ruok", 500ms).empty(), "paused: ruok gets no reply");
    zk.resume();
    check(eventually([&] { return zk.four_letter("ruok") == "imok"; }, 5s), "resumed: ruok -> imok");

    fmt::print("== stop / restart\n");
    auto t1 = steady::now();
    zk.stop();
    fmt::print("  stop took {} ms\n", ms_since(t1));
    check(process_gone(first_pid), "stopped JVM is gone");
    check(zk.four_letter("ruok", 500ms).empty(), "stopped: no reply");
    t1 = steady::now();
    zk.restart();
    fmt::print("  restart ready in {} ms (pid {})\n", ms_since(t1), zk.pid());
    check(zk.four_letter("ruok") == "imok", "restarted on the same port: ruok -> imok");
}

void test_ensemble() {
    fmt::print("== ensemble of 3\n");
    std::vector<pid_t> pids;
    {
        auto t0 = steady::now();
        zktest::zk_ensemble ens(3);
        fmt::print("  ensemble ready in {} ms at {}\n", ms_since(t0), ens.connect_string());
        for (int i = 0; i < ens.size(); ++i) pids.push_back(ens.member_pid(i));

        int leaders = 0;
        for (int i = 0; i < ens.size(); ++i)
            if (ens.four_letter(i, "srvr").find("Mode: leader") != std::string::npos) ++leaders;
        check(leaders == 1, "exactly one leader");
        const int old_leader = ens.leader();
        check(old_leader >= 0, fmt::format("leader() = {}", old_leader));

        auto t = steady::now();
        ens.stop(old_leader);
        ens.wait_for_quorum(30s);
        const int new_leader = ens.leader();
        check(new_leader >= 0 && new_leader != old_leader,
              fmt::format("leader stopped, new leader {} elected in {} ms", new_leader, ms_since(t)));

        t = steady::now();
        ens.restart(old_leader);
        ens.wait_for_quorum(30s);
        check(ens.four_letter(old_leader, "srvr").find("Mode: follower") != std::string::npos,
              fmt::format("old leader rejoined as follower in {} ms", ms_since(t)));

        const int follower = (new_leader + 1) % ens.size();
        ens.pause(follower);
        check(ens.four_letter(follower, "ruok", 300ms).empty(), "paused member does not answer");
        t = steady::now();
        ens.wait_for_quorum(10s);
        check(ens.leader() == new_leader, fmt::format("quorum kept with one member paused ({} ms)", ms_since(t)));
        ens.resume(follower);
        ens.wait_for_quorum(30s);
        check(eventually([&] { return ens.four_letter(follower, "srvr").find("Mode: follower") != std::string::npos; },
                         30s),
              "resumed member serves again");
    }
    bool all_gone = true;
    for (pid_t p : pids) all_gone = all_gone && process_gone(p);
    check(all_gone, "ensemble destructor ended every JVM");
}

}  // namespace

int main() {
    try {
        auto t0 = steady::now();
        test_standalone_and_proxy();
        test_ensemble();
        fmt::print("harness_selftest: {} checks passed in {} ms\n", g_checks, ms_since(t0));
        return 0;
    } catch (const std::exception& e) {
        fmt::print(stderr, "harness_selftest: FAILED: {}\n", e.what());
        return 1;
    }
}
