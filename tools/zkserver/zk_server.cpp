#include "zk_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace zktest {

void prepare_child_after_fork(pid_t parent) noexcept
{
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    // The parent may have died before prctl() took effect.
    if (::getppid() != parent)
        ::_exit(127);
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    struct sigaction dfl{};
    dfl.sa_handler = SIG_DFL;
    ::sigemptyset(&dfl.sa_mask);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT, SIGCHLD})
        ::sigaction(s, &dfl, nullptr);
}

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

// ---------------------------------------------------------------------------
// Registry of live child PIDs, readable from a signal handler: a fixed array
// of lock-free atomics (no allocation, no locks in the handler).
constexpr std::size_t max_children = 128;
std::array<std::atomic<pid_t>, max_children> g_children{};
static_assert(std::atomic<pid_t>::is_always_lock_free, "the signal handler reads these");

void register_child(pid_t pid) {
    for (auto& slot : g_children) {
        pid_t expected = 0;
        if (slot.compare_exchange_strong(expected, pid)) return;
    }
    // Registry full: the child still has PR_SET_PDEATHSIG as a fallback.
}

void unregister_child(pid_t pid) {
    for (auto& slot : g_children) {
        pid_t expected = pid;
        if (slot.compare_exchange_strong(expected, 0)) return;
    }
}

void kill_all_children() noexcept {
    for (auto& slot : g_children) {
        pid_t p = slot.load();
        if (p > 0) ::kill(p, SIGKILL);
    }
}

constexpr std::array<int, 3> cleanup_signals{SIGINT, SIGTERM, SIGHUP};
std::array<struct sigaction, 3> g_previous_actions{};

extern "C" void zktest_cleanup_handler(int sig, siginfo_t* info, void* ctx) {
    kill_all_children();
    for (std::size_t i = 0; i < cleanup_signals.size(); ++i) {
        if (cleanup_signals[i] != sig) continue;
        const struct sigaction& prev = g_previous_actions[i];
        // Chain to a handler that was installed before ours (e.g. a test
        // framework's), otherwise die from the signal as if we weren't here.
        if (prev.sa_flags & SA_SIGINFO) {
            if (prev.sa_sigaction != nullptr) {
                prev.sa_sigaction(sig, info, ctx);
                return;
            }
        } else if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) {
            prev.sa_handler(sig);
            return;
        }
        ::signal(sig, SIG_DFL);
        ::raise(sig);
        return;
    }
}

// Called on every server start rather than once: a test framework may have
// put its own handlers back (doctest restores its saved ones after each test
// case), so make sure ours is first in the chain again.
void install_cleanup() {
    static std::mutex m;
    std::lock_guard lock(m);
    for (std::size_t i = 0; i < cleanup_signals.size(); ++i) {
        struct sigaction current{};
        ::sigaction(cleanup_signals[i], nullptr, &current);
        if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == zktest_cleanup_handler) continue;
        // An ignored signal (e.g. under nohup) stays ignored.
        if (!(current.sa_flags & SA_SIGINFO) && current.sa_handler == SIG_IGN) continue;
        struct sigaction act{};
        act.sa_sigaction = zktest_cleanup_handler;
        act.sa_flags = SA_SIGINFO | SA_RESTART;
        ::sigemptyset(&act.sa_mask);
        ::sigaction(cleanup_signals[i], &act, &g_previous_actions[i]);
    }
    static std::once_flag once;
    // Normal exit without destructors having run (std::exit from a test).
    std::call_once(once, [] { std::atexit(kill_all_children); });
}

// ---------------------------------------------------------------------------
// Small helpers.

std::string tail_of_file(const std::string& path, std::size_t lines) {
    std::ifstream in(path);
    if (!in) return fmt::format("(cannot read {})", path);
    std::deque<std::string> last;
    std::string line;
    while (std::getline(in, line)) {
        last.push_back(std::move(line));
        if (last.size() > lines) last.pop_front();
    }
    std::string out;
    for (const auto& l : last) out += l + '\n';
    return out;
}

void write_file(const fs::path& path, const std::string& content) {
    std::ofstream out(path, std::ios::trunc);
    out << content;
    if (!out.flush()) throw std::runtime_error(fmt::format("zktest: cannot write {}", path.string()));
}

// Best effort: a leftover temp dir must not turn into an exception.
void remove_tree(const std::string& dir) noexcept {
    try {
        fs::remove_all(dir);
    } catch (...) {
    }
}

// A test process killed by a signal cannot remove its temp dirs (its JVMs
// die with it). Each dir records its owner's PID; dirs whose owner is gone
// are removed when the next server is created.
void remove_stale_dirs(const std::string& base) noexcept {
    try {
        for (const auto& entry : fs::directory_iterator(base)) {
            if (entry.path().filename().string().rfind("zktest-", 0) != 0) continue;
            std::ifstream in(entry.path() / "owner.pid");
            long owner = 0;
            if (!(in >> owner) || owner <= 0) continue;
            if (::kill(static_cast<pid_t>(owner), 0) != 0 && errno == ESRCH) remove_tree(entry.path().string());
        }
    } catch (...) {
    }
}

std::string make_temp_dir(const char* prefix) {
    const char* tmp = std::getenv("TMPDIR");
    std::string base = (tmp != nullptr && *tmp != '\0') ? tmp : "/tmp";
    remove_stale_dirs(base);
    std::string templ = fmt::format("{}/{}XXXXXX", base, prefix);
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr)
        throw std::runtime_error(fmt::format("zktest: mkdtemp({}) failed: {}", templ, std::strerror(errno)));
    std::string dir(buf.data());
    write_file(fs::path(dir) / "owner.pid", fmt::format("{}\n", ::getpid()));
    return dir;
}

std::vector<std::string> split_ws(const std::string& s) {
    std::istringstream in(s);
    std::vector<std::string> out;
    std::string w;
    while (in >> w) out.push_back(w);
    return out;
}

// Resolved before fork(): the child may only make async-signal-safe calls.
std::string find_java() {
    if (const char* j = std::getenv("ZKTEST_JAVA"); j != nullptr && *j != '\0') return j;
    if (const char* home = std::getenv("JAVA_HOME"); home != nullptr && *home != '\0') {
        fs::path p = fs::path(home) / "bin" / "java";
        if (::access(p.c_str(), X_OK) == 0) return p.string();
    }
    if (const char* path = std::getenv("PATH"); path != nullptr) {
        std::string_view rest(path);
        while (!rest.empty()) {
            auto colon = rest.find(':');
            std::string dir(rest.substr(0, colon));
            rest = colon == std::string_view::npos ? std::string_view{} : rest.substr(colon + 1);
            if (dir.empty()) continue;
            fs::path p = fs::path(dir) / "java";
            if (::access(p.c_str(), X_OK) == 0) return p.string();
        }
    }
    return "/usr/bin/java";
}

std::string zk_classpath() {
    if (const char* cp = std::getenv("ZKTEST_CLASSPATH"); cp != nullptr && *cp != '\0') return cp;
    // zookeeper.jar's manifest Class-Path brings in the other jars.
    return "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar";
}

// Value after "Mode: " in a `srvr` reply, "" if absent.
std::string mode_of(const std::string& srvr) {
    auto pos = srvr.find("Mode: ");
    if (pos == std::string::npos) return {};
    pos += 6;
    auto end = srvr.find('\n', pos);
    return srvr.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
}

// Process state letter from /proc/PID/stat ('T' when stopped), 0 if unknown.
char proc_state(pid_t pid) {
    std::ifstream in(fmt::format("/proc/{}/stat", pid));
    std::string s;
    std::getline(in, s);
    // The command name may contain spaces or ')': the state follows the last ')'.
    auto rp = s.rfind(')');
    if (rp == std::string::npos || rp + 2 >= s.size()) return 0;
    return s[rp + 2];
}

std::string common_config(const server_options& o, const fs::path& data_dir) {
    std::string c;
    c += fmt::format("tickTime={}\n", o.tick_ms);
    c += fmt::format("dataDir={}\n", data_dir.string());
    // Unlimited connections per client IP: every test client is 127.0.0.1.
    c += "maxClientCnxns=0\n";
    c += "admin.enableServer=false\n";
    c += "4lw.commands.whitelist=*\n";
    if (o.max_session_timeout_ms > 0) c += fmt::format("maxSessionTimeout={}\n", o.max_session_timeout_ms);
    // Test data needs no durability against power loss; fsync per txn is slow.
    c += "forceSync=no\n";
    // Txn log files are preallocated (64 MB by default); keep temp dirs small.
    c += "preAllocSize=1024\n";
    return c;
}

}  // namespace

// ---------------------------------------------------------------------------

std::vector<std::string> default_jvm_flags() {
    if (const char* f = std::getenv("ZKTEST_JVM_FLAGS"); f != nullptr) return split_ws(f);
    // Measured on this machine: C1 only + serial GC + small heap start the
    // JVM fastest; no perf-data file in /tmp.
    return {"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:CICompilerCount=1", "-Xshare:auto",
            "-Xss512k",   "-Xms32m", "-Xmx256m", "-XX:-UsePerfData", "-Djava.net.preferIPv4Stack=true"};
}

std::uint16_t free_loopback_port() {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw std::runtime_error(fmt::format("zktest: socket: {}", std::strerror(errno)));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        int e = errno;
        ::close(fd);
        throw std::runtime_error(fmt::format("zktest: bind 127.0.0.1:0: {}", std::strerror(e)));
    }
    ::close(fd);
    return ntohs(addr.sin_port);
}

std::string four_letter(std::uint16_t port, std::string_view cmd, std::chrono::milliseconds timeout) {
    const auto deadline = steady::now() + timeout;
    auto remaining_ms = [&] {
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now()).count();
        return static_cast<int>(std::max<long long>(ms, 0));
    };
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return {};
    struct closer {
        int fd;
        ~closer() { ::close(fd); }
    } guard{fd};

    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        if (errno != EINPROGRESS) return {};
        pollfd p{fd, POLLOUT, 0};
        if (::poll(&p, 1, remaining_ms()) <= 0) return {};
        int err = 0;
        socklen_t len = sizeof err;
        if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) return {};
    }
    std::size_t sent = 0;
    while (sent < cmd.size()) {
        ssize_t n = ::send(fd, cmd.data() + sent, cmd.size() - sent, MSG_NOSIGNAL);
        if (n > 0) {
            sent += static_cast<std::size_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            pollfd p{fd, POLLOUT, 0};
            if (::poll(&p, 1, remaining_ms()) <= 0) return {};
            continue;
        }
        return {};
    }
    // The server answers and closes: read until EOF or the deadline.
    std::string reply;
    char buf[4096];
    for (;;) {
        pollfd p{fd, POLLIN, 0};
        int r = ::poll(&p, 1, remaining_ms());
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return {};
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n == 0) return reply;
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
            // A reset after a complete reply still counts as a reply.
            return reply;
        }
        reply.append(buf, static_cast<std::size_t>(n));
    }
}

// ---------------------------------------------------------------------------

namespace detail {

// One ZooKeeper JVM: its directory, config and process.
class server_process {
public:
    server_process(std::string dir, std::uint16_t client_port, std::string config, int myid)
        : dir_(std::move(dir)), client_port_(client_port) {
        fs::create_directories(fs::path(dir_) / "data");
        if (myid > 0) write_file(fs::path(dir_) / "data" / "myid", fmt::format("{}\n", myid));
        write_file(cfg_path(), config);
    }
    ~server_process() {
        try {
            stop(2s);
        } catch (...) {
            // Destructors must not throw; stop() only throws on spawn-side errors.
        }
    }
    server_process(const server_process&) = delete;
    server_process& operator=(const server_process&) = delete;

    std::string cfg_path() const { return (fs::path(dir_) / "zoo.cfg").string(); }
    std::string log_path() const { return (fs::path(dir_) / "server.log").string(); }
    const std::string& dir() const { return dir_; }
    std::uint16_t port() const { return client_port_; }
    pid_t pid() const { return pid_; }
    bool running() const { return pid_ > 0; }
    bool paused() const { return paused_; }

    void start() {
        if (pid_ > 0) return;
        install_cleanup();
        // Everything the child needs is prepared here: after fork() in a
        // multithreaded process only async-signal-safe calls are allowed.
        std::vector<std::string> args;
        args.push_back(find_java());
        for (auto& f : default_jvm_flags()) args.push_back(f);
        args.push_back("-Dzookeeper.admin.enableServer=false");
        args.push_back("-Dznode.container.checkIntervalMs=500");
        args.push_back("-Dzookeeper.4lw.commands.whitelist=*");
        // Timestamps in server.log, to line it up with test output.
        args.push_back("-Dorg.slf4j.simpleLogger.showDateTime=true");
        args.push_back("-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS");
        args.push_back("-cp");
        args.push_back(zk_classpath());
        args.push_back("org.apache.zookeeper.server.quorum.QuorumPeerMain");
        args.push_back(cfg_path());
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        const std::string log = log_path();
        const pid_t parent = ::getpid();
        rlimit rl{};
        int max_fd = 4096;
        if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
            max_fd = static_cast<int>(std::min<rlim_t>(rl.rlim_cur, 1 << 20));

        pid_t pid = ::fork();
        if (pid < 0) throw std::runtime_error(fmt::format("zktest: fork: {}", std::strerror(errno)));
        if (pid == 0) exec_child(argv.data(), log.c_str(), parent, max_fd);
        register_child(pid);
        pid_ = pid;
        paused_ = false;
    }

    // True once the process has exited (without reaping it).
    bool has_exited() const {
        if (pid_ <= 0) return true;
        siginfo_t info{};
        int r = ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT);
        if (r != 0) return errno == ECHILD;
        return info.si_pid == pid_;
    }

    void stop(std::chrono::milliseconds grace) {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGTERM);
        // A stopped process only acts on SIGTERM once continued.
        ::kill(pid_, SIGCONT);
        const auto deadline = steady::now() + grace;
        while (!has_exited() && steady::now() < deadline) std::this_thread::sleep_for(10ms);
        if (!has_exited()) ::kill(pid_, SIGKILL);
        reap();
    }

    void kill_now() {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGKILL);
        reap();
    }

    void pause() {
        if (pid_ <= 0) throw std::logic_error("zktest: pause() on a stopped server");
        ::kill(pid_, SIGSTOP);
        paused_ = true;
        // SIGSTOP is asynchronous: wait (bounded) until the kernel shows it.
        const auto deadline = steady::now() + 2s;
        while (proc_state(pid_) != 'T' && steady::now() < deadline) std::this_thread::sleep_for(1ms);
    }

    void resume() {
        if (pid_ <= 0) throw std::logic_error("zktest: resume() on a stopped server");
        ::kill(pid_, SIGCONT);
        paused_ = false;
        const auto deadline = steady::now() + 2s;
        while (proc_state(pid_) == 'T' && steady::now() < deadline) std::this_thread::sleep_for(1ms);
    }

    // Mode reported by `srvr` if the server answers ruok and serves, else "".
    std::string serving_mode(std::chrono::milliseconds probe_timeout) const {
        if (pid_ <= 0 || paused_) return {};
        if (zktest::four_letter(client_port_, "ruok", probe_timeout) != "imok") return {};
        return mode_of(zktest::four_letter(client_port_, "srvr", probe_timeout));
    }

    std::string describe() const {
        if (pid_ <= 0) return "stopped";
        if (paused_) return fmt::format("paused (pid {})", pid_);
        if (has_exited()) return fmt::format("exited (pid {})", pid_);
        auto mode = serving_mode(500ms);
        return fmt::format("pid {}, {}", pid_, mode.empty() ? "not serving" : "Mode: " + mode);
    }

    std::string failure_report(const std::string& what) const {
        return fmt::format("{}\n--- last 30 lines of {} ---\n{}", what, log_path(), tail_of_file(log_path(), 30));
    }

private:
    [[noreturn]] static void exec_child(char** argv, const char* log, pid_t parent, int max_fd) noexcept {
        prepare_child_after_fork(parent);
        // Own process group: a terminal's Ctrl-C goes to the test, which then
        // decides how the server ends.
        ::setpgid(0, 0);
        int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        int out = ::open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (in < 0 || out < 0) ::_exit(126);
        ::dup2(in, 0);
        ::dup2(out, 1);
        ::dup2(out, 2);
        // Don't leak the test's sockets (Asio doesn't set CLOEXEC) into the JVM.
        if (::close_range(3, ~0U, 0) != 0)
            for (int fd = 3; fd < max_fd; ++fd) ::close(fd);
        ::execv(argv[0], argv);
        static const char msg[] = "zktest: execv(java) failed\n";
        [[maybe_unused]] auto n = ::write(2, msg, sizeof msg - 1);
        ::_exit(127);
    }

    void reap() {
        // Wait for exit without reaping, drop the PID from the registry, and
        // only then reap: the signal handler never sees a recycled PID.
        siginfo_t info{};
        while (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
        }
        unregister_child(pid_);
        while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
        }
        pid_ = -1;
        paused_ = false;
    }

    std::string dir_;
    std::uint16_t client_port_;
    pid_t pid_ = -1;
    bool paused_ = false;
};

}  // namespace detail

namespace {

using detail::server_process;

bool mode_ok(const std::string& mode, bool ensemble) {
    if (ensemble) return mode == "leader" || mode == "follower" || mode == "observer";
    return mode == "standalone";
}

// Polls every 50 ms until each given member serves in an acceptable mode
// (or only answers ruok, if ruok_only); throws with the log tail on timeout
// or if a JVM exits.
void wait_ready(const std::vector<server_process*>& procs, bool ensemble, bool ruok_only,
                std::chrono::seconds timeout) {
    const auto deadline = steady::now() + timeout;
    std::vector<bool> ready(procs.size(), false);
    for (;;) {
        bool all = true;
        for (std::size_t i = 0; i < procs.size(); ++i) {
            if (ready[i]) continue;
            auto* p = procs[i];
            if (p->has_exited())
                throw std::runtime_error(
                    p->failure_report(fmt::format("zktest: ZooKeeper on port {} exited during start-up", p->port())));
            // Short probes: a connection made before the server accepts may
            // stall; a fresh probe 50 ms later is cheaper.
            if (ruok_only)
                ready[i] = four_letter(p->port(), "ruok", 300ms) == "imok";
            else
                ready[i] = mode_ok(p->serving_mode(300ms), ensemble);
            all = all && ready[i];
        }
        if (all) return;
        if (steady::now() >= deadline) {
            for (std::size_t i = 0; i < procs.size(); ++i)
                if (!ready[i])
                    throw std::runtime_error(procs[i]->failure_report(fmt::format(
                        "zktest: ZooKeeper on port {} not ready after {} s", procs[i]->port(), timeout.count())));
        }
        std::this_thread::sleep_for(50ms);
    }
}

std::string extra_lines(const server_options& o) {
    std::string c;
    for (const auto& l : o.extra_config) c += l + '\n';
    return c;
}

}  // namespace

// ---------------------------------------------------------------------------
// zk_server

zk_server::zk_server(server_options opts) : opts_(std::move(opts)) {
    const std::string dir = make_temp_dir("zktest-");
    try {
        const std::uint16_t port = free_loopback_port();
        std::string cfg = common_config(opts_, fs::path(dir) / "data");
        cfg += fmt::format("clientPort={}\n", port);
        cfg += "clientPortAddress=127.0.0.1\n";
        cfg += extra_lines(opts_);
        proc_ = std::make_unique<server_process>(dir, port, cfg, 0);
        proc_->start();
        wait_ready({proc_.get()}, false, false, opts_.start_timeout);
    } catch (...) {
        proc_.reset();
        remove_tree(dir);
        throw;
    }
}

zk_server::~zk_server() {
    if (!proc_) return;
    std::string dir = proc_->dir();
    proc_.reset();
    remove_tree(dir);
}

std::string zk_server::connect_string() const { return fmt::format("127.0.0.1:{}", proc_->port()); }
std::uint16_t zk_server::port() const { return proc_->port(); }
pid_t zk_server::pid() const { return proc_->pid(); }
bool zk_server::running() const { return proc_->running(); }
std::string zk_server::dir() const { return proc_->dir(); }
std::string zk_server::log_path() const { return proc_->log_path(); }
void zk_server::stop() { proc_->stop(opts_.stop_timeout); }
void zk_server::kill() { proc_->kill_now(); }
void zk_server::pause() { proc_->pause(); }
void zk_server::resume() { proc_->resume(); }

void zk_server::restart() {
    proc_->stop(opts_.stop_timeout);
    proc_->start();
    wait_ready({proc_.get()}, false, false, opts_.start_timeout);
}

std::string zk_server::four_letter(std::string_view cmd, std::chrono::milliseconds timeout) const {
    return zktest::four_letter(proc_->port(), cmd, timeout);
}

// ---------------------------------------------------------------------------
// zk_ensemble

namespace {

// The zoo.cfg of an ensemble member; with opts.reconfig the member list goes to `dynamic`
// (written beside zoo.cfg as zoo.cfg.dynamic), else into zoo.cfg itself.
std::string member_config(const server_options& o, const fs::path& dir, const std::string& servers,
                          bool observer = false) {
    std::string cfg = common_config(o, dir / "data");
    if (observer) cfg += "peerType=observer\n";
    cfg += "initLimit=10\nsyncLimit=5\n";
    // Fail fast on a paused or dead peer instead of the 5 s default.
    cfg += "cnxTimeout=1000\n";
    // Re-election notifications back off up to 60 s by default; cap it.
    cfg += "fastleader.maxNotificationInterval=1000\n";
    if (o.reconfig) {
        cfg += "reconfigEnabled=true\nstandaloneEnabled=false\nskipACL=yes\n";
        cfg += fmt::format("dynamicConfigFile={}\n", (dir / "zoo.cfg.dynamic").string());
        write_file(dir / "zoo.cfg.dynamic", servers);
    } else {
        cfg += servers;
    }
    cfg += extra_lines(o);
    return cfg;
}

}  // namespace

zk_ensemble::zk_ensemble(int members, server_options opts) : opts_(std::move(opts)) {
    if (members < 1 || members > 9) throw std::invalid_argument("zktest: ensemble size must be 1..9");
    if (opts_.observers < 0 || opts_.observers >= members)
        throw std::invalid_argument("zktest: observers must be 0..members-1 (at least one member votes)");
    const auto first_observer = static_cast<std::size_t>(members - opts_.observers);
    root_ = make_temp_dir("zktest-ensemble-");
    try {
        const auto n = static_cast<std::size_t>(members);
        // Client, quorum and election port for each member, all picked
        // before any JVM starts.
        ports_.resize(n);
        for (auto& p : ports_)
            for (auto& one : p) {
                // free_loopback_port() can hand out the same port twice once
                // it is closed again; retry until distinct.
                do one = free_loopback_port();
                while (std::find(taken_.begin(), taken_.end(), one) != taken_.end());
                taken_.push_back(one);
            }
        std::string servers;
        for (std::size_t i = 0; i < n; ++i) {
            const bool observer = i >= first_observer;
            servers += (opts_.reconfig ? member_spec(static_cast<int>(i), observer ? "observer" : "participant")
                                       : fmt::format("server.{}=127.0.0.1:{}:{}{};127.0.0.1:{}", i + 1, ports_[i][1],
                                                     ports_[i][2], observer ? ":observer" : "", ports_[i][0])) +
                       "\n";
        }
        for (std::size_t i = 0; i < n; ++i) {
            const fs::path dir = fs::path(root_) / fmt::format("member{}", i);
            fs::create_directories(dir);
            std::string cfg = member_config(opts_, dir, servers, i >= first_observer);
            members_.push_back(
                std::make_unique<server_process>(dir.string(), ports_[i][0], cfg, static_cast<int>(i) + 1));
        }
        // All JVMs start at once, then one wait: start-up costs one JVM start.
        for (auto& m : members_) m->start();
        std::vector<server_process*> all;
        for (auto& m : members_) all.push_back(m.get());
        wait_ready(all, true, false, opts_.start_timeout);
    } catch (...) {
        members_.clear();
        remove_tree(root_);
        throw;
    }
}

zk_ensemble::~zk_ensemble() {
    // Stop all members concurrently-ish: SIGTERM everyone first, then reap.
    for (auto& m : members_)
        if (m->running()) {
            ::kill(m->pid(), SIGTERM);
            ::kill(m->pid(), SIGCONT);
        }
    members_.clear();
    remove_tree(root_);
}

void zk_ensemble::check_index(int i) const {
    if (i < 0 || i >= size()) throw std::out_of_range(fmt::format("zktest: no ensemble member {}", i));
}

std::string zk_ensemble::connect_string() const {
    std::string s;
    for (const auto& m : members_) s += fmt::format("{}127.0.0.1:{}", s.empty() ? "" : ",", m->port());
    return s;
}

std::string zk_ensemble::member_connect_string(int i) const {
    return fmt::format("127.0.0.1:{}", member_port(i));
}

std::uint16_t zk_ensemble::member_port(int i) const {
    check_index(i);
    return members_[static_cast<std::size_t>(i)]->port();
}

pid_t zk_ensemble::member_pid(int i) const {
    check_index(i);
    return members_[static_cast<std::size_t>(i)]->pid();
}

std::string zk_ensemble::member_log_path(int i) const {
    check_index(i);
    return members_[static_cast<std::size_t>(i)]->log_path();
}

std::string zk_ensemble::dir() const { return root_; }

int zk_ensemble::size() const { return static_cast<int>(members_.size()); }

int zk_ensemble::leader() const {
    for (int i = 0; i < size(); ++i)
        if (members_[static_cast<std::size_t>(i)]->serving_mode(2s) == "leader") return i;
    return -1;
}

void zk_ensemble::stop(int i) {
    check_index(i);
    members_[static_cast<std::size_t>(i)]->stop(opts_.stop_timeout);
}

void zk_ensemble::kill(int i) {
    check_index(i);
    members_[static_cast<std::size_t>(i)]->kill_now();
}

void zk_ensemble::restart(int i) {
    check_index(i);
    auto& m = *members_[static_cast<std::size_t>(i)];
    m.stop(opts_.stop_timeout);
    m.start();
    // Without a majority running the member can never serve; then only
    // wait for the process to answer.
    int running = 0;
    for (const auto& other : members_)
        if (other->running() && !other->paused()) ++running;
    const bool quorum_possible = running > size() / 2;
    wait_ready({&m}, true, !quorum_possible, opts_.start_timeout);
}

void zk_ensemble::pause(int i) {
    check_index(i);
    members_[static_cast<std::size_t>(i)]->pause();
}

void zk_ensemble::resume(int i) {
    check_index(i);
    members_[static_cast<std::size_t>(i)]->resume();
}

void zk_ensemble::wait_for_quorum(std::chrono::seconds timeout) const {
    const auto deadline = steady::now() + timeout;
    for (;;) {
        int leaders = 0;
        int serving = 0;
        for (const auto& m : members_) {
            auto mode = m->serving_mode(1s);
            if (mode == "leader") ++leaders;
            if (mode == "leader" || mode == "follower") ++serving;
        }
        if (leaders == 1 && serving > size() / 2) return;
        if (steady::now() >= deadline) {
            std::string state;
            for (int i = 0; i < size(); ++i)
                state += fmt::format("\n  member {} (port {}): {}", i, member_port(i),
                                     members_[static_cast<std::size_t>(i)]->describe());
            throw std::runtime_error(
                fmt::format("zktest: no quorum after {} s (leaders: {}, serving: {}){}", timeout.count(), leaders,
                            serving, state));
        }
        std::this_thread::sleep_for(50ms);
    }
}

std::string zk_ensemble::four_letter(int i, std::string_view cmd, std::chrono::milliseconds timeout) const {
    return zktest::four_letter(member_port(i), cmd, timeout);
}

int zk_ensemble::member_id(int i) const {
    check_index(i);
    return i + 1;
}

std::string zk_ensemble::member_spec(int i, std::string_view role) const {
    // Not check_index: the constructor asks before the member exists.
    if (i < 0 || static_cast<std::size_t>(i) >= ports_.size())
        throw std::out_of_range(fmt::format("zktest: no ensemble member {}", i));
    const auto& p = ports_[static_cast<std::size_t>(i)];
    return fmt::format("server.{}=127.0.0.1:{}:{}:{};127.0.0.1:{}", i + 1, p[1], p[2], role, p[0]);
}

int zk_ensemble::add_member(const std::vector<int>& current) {
    if (!opts_.reconfig) throw std::logic_error("zktest: add_member needs server_options::reconfig");
    // Server ids 1..N; ZooKeeper takes up to 255, the ports and JVMs are the limit here.
    if (size() >= 16) throw std::invalid_argument("zktest: at most 16 members, added ones included");
    const int i = size();
    std::array<std::uint16_t, 3> p{};
    for (auto& one : p) {
        do one = free_loopback_port();
        while (std::find(taken_.begin(), taken_.end(), one) != taken_.end());
        taken_.push_back(one);
    }
    ports_.push_back(p);
    try {
        std::string servers;
        for (int c : current) {
            check_index(c);
            servers += member_spec(c) + "\n";
        }
        servers += member_spec(i, "observer") + "\n";
        const fs::path dir = fs::path(root_) / fmt::format("member{}", i);
        fs::create_directories(dir);
        std::string cfg = member_config(opts_, dir, servers);
        members_.push_back(std::make_unique<server_process>(dir.string(), p[0], cfg, i + 1));
    } catch (...) {
        ports_.pop_back();
        throw;
    }
    auto& m = *members_.back();
    m.start();
    wait_ready({&m}, true, true, opts_.start_timeout);
    return i;
}

void zk_ensemble::wait_serving(int i, std::chrono::seconds timeout) const {
    check_index(i);
    const auto& m = *members_[static_cast<std::size_t>(i)];
    const auto deadline = steady::now() + timeout;
    for (;;) {
        if (m.has_exited())
            throw std::runtime_error(m.failure_report(fmt::format("zktest: member {} exited", i)));
        auto mode = m.serving_mode(300ms);
        if (mode == "leader" || mode == "follower" || mode == "observer") return;
        if (steady::now() >= deadline)
            throw std::runtime_error(m.failure_report(
                fmt::format("zktest: member {} (port {}) not serving after {} s", i, m.port(), timeout.count())));
        std::this_thread::sleep_for(50ms);
    }
}

}  // namespace zktest
