// What zklock's integration tests share: the test server, temporary files, processes started
// and waited for with a bound, and a zkcoro client for the test's own ZooKeeper operations.
#ifndef ZKCORO_TESTS_ZKLOCK_TEST_UTIL_HPP
#define ZKCORO_TESTS_ZKLOCK_TEST_UTIL_HPP
#include <zk_server.hpp>
#include <tcp_proxy.hpp>

#include <zkcoro/client.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>


extern char** environ;

namespace zklock_test {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

// $ZKLOCK_UNDER_TEST runs the tests against another zklock binary (e.g. an older build, to see
// which tests catch its defects).
inline const std::string zklock_bin = std::getenv("ZKLOCK_UNDER_TEST") != nullptr ? std::getenv("ZKLOCK_UNDER_TEST") : ZKLOCK_BIN;
inline const std::string child_bin = ZKLOCK_TEST_CHILD_BIN;
inline const std::string interval_check_bin = INTERVAL_CHECK_BIN;
inline const std::string curator_build_sh = CURATOR_BUILD_SH;

inline zktest::zk_server& server()
{
    // The audit log tells a node deleted by its owner ("operation=delete") from one removed by
    // the session's end ("ephemeralZNodeDeletionOnSessionCloseOrExpire").
    static zktest::zk_server s(zktest::server_options{.extra_config = {"audit.enable=true"}});
    return s;
}

inline std::string connect() { return server().connect_string(); }

inline const std::string& work_dir()
{
    static std::string dir = [] {
        std::string t = fmt::format("{}/zklock-test.XXXXXX", std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp");
        if (::mkdtemp(t.data()) == nullptr)
            throw std::runtime_error("mkdtemp failed");
        return t;
    }();
    return dir;
}

inline std::string unique_path(std::string_view name)
{
    static int n = 0;
    return fmt::format("/zklock-test-{}-{}/{}", ::getpid(), ++n, name);
}

inline std::string file(std::string_view name)
{
    static int n = 0;
    return fmt::format("{}/{}-{}", work_dir(), ++n, name);
}

inline std::string slurp(const std::string& path)
{
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

struct proc {
    pid_t pid = -1;
    std::string out, err;
    int status = -1;  // exit code, 128+N for a signal; -1 while running
    clock_type::time_point started;
};

// Starts argv with stdout/stderr in files, stdin from /dev/null. With `err_fd` (a pipe's or a
// terminal's end), stderr goes there instead; neither it nor `other_fd` (the other end) stays open
// in the child but as its stderr.
inline proc start(std::vector<std::string> argv, int err_fd = -1, int other_fd = -1)
{
    proc p;
    p.out = file("out");
    p.err = err_fd < 0 ? file("err") : "(not a file)";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, p.out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (err_fd < 0) {
        posix_spawn_file_actions_addopen(&fa, 2, p.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    } else {
        posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
        posix_spawn_file_actions_addclose(&fa, other_fd);
        posix_spawn_file_actions_addclose(&fa, err_fd);
    }
    std::vector<char*> args;
    for (auto& a : argv)
        args.push_back(a.data());
    args.push_back(nullptr);
    p.started = clock_type::now();
    const int rc = posix_spawn(&p.pid, args[0], &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    REQUIRE_MESSAGE(rc == 0, "cannot start " << argv[0] << ": " << std::strerror(rc));
    return p;
}

// Waits at most `limit` for p to end; on timeout kills it (SIGKILL, by PID) and fails.
inline int wait_for(proc& p, clock_type::duration limit)
{
    if (p.status >= 0)
        return p.status;
    const auto deadline = clock_type::now() + limit;
    int st = 0;
    for (;;) {
        const pid_t r = ::waitpid(p.pid, &st, WNOHANG);
        if (r == p.pid)
            break;
        if (clock_type::now() >= deadline) {
            // Where it is stuck: each thread's state and kernel wait channel, and its children.
            std::string where;
            for (const auto& t : std::filesystem::directory_iterator(fmt::format("/proc/{}/task", p.pid))) {
                const auto stat = slurp(t.path().string() + "/stat");
                where += fmt::format("\n  thread {}: {} wchan {} children [{}]", t.path().filename().string(),
                                     stat.substr(stat.rfind(')') + 2, 1), slurp(t.path().string() + "/wchan"),
                                     slurp(t.path().string() + "/children"));
            }
            const auto signals = [](int pid) {
                std::istringstream in(slurp(fmt::format("/proc/{}/status", pid)));
                std::string out;
                for (std::string line; std::getline(in, line);)
                    if (line.starts_with("Sig") || line.starts_with("ShdPnd") || line.starts_with("State") ||
                        line.starts_with("NSpgid") || line.starts_with("Name"))
                        out += " " + line;
                return out;
            };
            where += "\n  it:" + signals(p.pid);
            std::istringstream kids(slurp(fmt::format("/proc/{}/task/{}/children", p.pid, p.pid)));
            for (int kid = 0; kids >> kid;)
                where += fmt::format("\n  child {}:", kid) + signals(kid);
            ::kill(p.pid, SIGKILL);
            ::waitpid(p.pid, &st, 0);
            FAIL_CHECK("process " << p.pid << " did not end in time;" << where << "\nstderr: " << slurp(p.err));
            p.status = 999;
            return p.status;
        }
        std::this_thread::sleep_for(10ms);
    }
    p.status = WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
    return p.status;
}

inline double seconds_since(clock_type::time_point t)
{
    return std::chrono::duration<double>(clock_type::now() - t).count();
}

// Ends (SIGKILL) a process still running at the end of a test: only ones started here.
struct reaper {
    std::vector<proc*> procs;
    ~reaper()
    {
        for (auto* p : procs)
            if (p->status < 0) {
                ::kill(p->pid, SIGKILL);
                int st = 0;
                ::waitpid(p->pid, &st, 0);
                p->status = 998;
            }
    }
};

inline std::vector<std::string> zklock(std::vector<std::string> opts, const std::string& path, std::vector<std::string> cmd)
{
    std::vector<std::string> argv{zklock_bin};
    argv.insert(argv.end(), opts.begin(), opts.end());
    argv.push_back(path);
    argv.emplace_back("--");
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    return argv;
}

inline std::vector<std::string> child(const std::string& id, long sleep_ms, const std::string& events,
                               const std::string& log = "", const std::string& mode = "X")
{
    std::vector<std::string> v{child_bin, "--id", id, "--sleep-ms", std::to_string(sleep_ms), "--events", events, "--mode", mode};
    if (!log.empty()) {
        v.emplace_back("--log");
        v.push_back(log);
    }
    return v;
}

// Polls until `pred()` or `limit`; returns pred's last value.
template <class Pred>
inline bool eventually(Pred pred, clock_type::duration limit)
{
    const auto deadline = clock_type::now() + limit;
    for (;;) {
        if (pred())
            return true;
        if (clock_type::now() >= deadline)
            return false;
        std::this_thread::sleep_for(20ms);
    }
}

inline bool contains(const std::string& file_name, const std::string& text)
{
    return slurp(file_name).find(text) != std::string::npos;
}

// The child's "start" line appeared: the lock is held and the command runs.
inline bool started(const std::string& events, const std::string& id)
{
    return eventually([&] { return contains(events, id + " start "); }, 20s);
}

inline int run(std::vector<std::string> argv, clock_type::duration limit, proc* out = nullptr)
{
    proc p = start(std::move(argv));
    const int rc = wait_for(p, limit);
    if (out != nullptr)
        *out = p;
    return rc;
}

inline nlohmann::json status_json(const std::string& path)
{
    proc p;
    const int rc = run({zklock_bin, "status", "--json", "-c", connect(), path}, 20s, &p);
    REQUIRE_MESSAGE(rc == 0, "zklock status failed: " << slurp(p.err));
    return nlohmann::json::parse(slurp(p.out));
}

namespace asio = boost::asio;

// Runs `body` with a zkcoro client connected to the test server (bounded: 20 s).
inline void with_zk(const std::function<asio::awaitable<void>(zkcoro::client&)>& body, zkcoro::client_config cfg = {})
{
    asio::io_context ioc;
    cfg.connect_string = connect();
    cfg.connect_timeout = 10s;
    zkcoro::client zk(ioc.get_executor(), cfg);
    bool done = false;
    std::exception_ptr error;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            co_await zk.async_connect();
            co_await body(zk);
        },
        [&](std::exception_ptr e) {
            done = true;
            error = e;
            ioc.stop();  // the client's session keeps the context busy
        });
    ioc.run_for(20s);
    zk.close();
    REQUIRE_MESSAGE(done, "the ZooKeeper operations of the test did not finish within 20 s");
    if (error)
        std::rethrow_exception(error);
}

// Creates `path` and its missing parents, persistent (the last one with `data`).
inline asio::awaitable<void> create_all(zkcoro::client& zk, std::string path, std::string data = "")
{
    std::vector<std::string> parts;
    for (std::size_t slash = path.find('/', 1); slash != std::string::npos; slash = path.find('/', slash + 1))
        parts.push_back(path.substr(0, slash));
    parts.push_back(path);
    for (std::size_t i = 0; i < parts.size(); ++i) {
        // (No temporary in the co_await expression: g++ 12 destroys a ?: temporary twice there.)
        const std::string_view d = i + 1 == parts.size() ? std::string_view(data) : std::string_view();
        std::tuple<zkcoro::error_code, zkcoro::create_result> r = co_await zk.async_create(
            parts[i], d, zkcoro::create_mode::persistent, asio::as_tuple(asio::use_awaitable));
        const zkcoro::error_code ec = std::get<0>(r);
        if (ec && ec != zkcoro::zk_errc::node_exists)
            throw boost::system::system_error(ec, "creating " + parts[i]);
    }
}

// NAME=value lines of zklock-test-child's --env-file, once it is written.
inline std::map<std::string, std::string> read_env_file(const std::string& path)
{
    std::map<std::string, std::string> vars;
    REQUIRE_MESSAGE(eventually([&] { return contains(path, "ZKLOCK_SESSION_ID="); }, 20s),
                    "the command did not write its environment to " << path);
    std::istringstream in(slurp(path));
    for (std::string line; std::getline(in, line);)
        if (auto eq = line.find('='); eq != std::string::npos)
            vars[line.substr(0, eq)] = line.substr(eq + 1);
    return vars;
}

// True while `pid` runs (a zombie or a vanished process counts as ended).
inline bool alive(pid_t pid)
{
    std::ifstream in(fmt::format("/proc/{}/stat", pid));
    std::string s;
    if (!std::getline(in, s))
        return false;
    const auto rp = s.rfind(')');
    return rp != std::string::npos && rp + 2 < s.size() && s[rp + 2] != 'Z' && s[rp + 2] != 'X';
}

// The number in a file a command wrote (e.g. `echo $$ > FILE`), once it is there.
inline pid_t read_pid(const std::string& path)
{
    REQUIRE_MESSAGE(eventually([&] { return slurp(path).find('\n') != std::string::npos; }, 20s),
                    "no pid in " << path);
    return static_cast<pid_t>(std::stol(slurp(path)));
}

}  // namespace zklock_test

#endif
