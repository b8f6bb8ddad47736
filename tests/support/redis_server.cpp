#include "redis_server.hpp"

#include "zk_server.hpp"  // free_loopback_port, prepare_child_after_fork

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>

namespace zktest {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

timeval to_timeval(std::chrono::milliseconds ms)
{
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
    return tv;
}

struct context_deleter {
    void operator()(redisContext* c) const noexcept { redisFree(c); }
};
struct reply_deleter {
    void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using context_ptr = std::unique_ptr<redisContext, context_deleter>;
using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;

context_ptr connect_sync(std::uint16_t port, std::chrono::milliseconds timeout)
{
    context_ptr c(redisConnectWithTimeout("127.0.0.1", port, to_timeval(timeout)));
    if (!c)
        throw std::runtime_error("zktest: redisConnectWithTimeout: out of memory");
    if (c->err)
        throw std::runtime_error(fmt::format("zktest: connect to 127.0.0.1:{}: {}", port, c->errstr));
    if (redisSetTimeout(c.get(), to_timeval(timeout)) != REDIS_OK)
        throw std::runtime_error(fmt::format("zktest: redisSetTimeout on 127.0.0.1:{} failed", port));
    return c;
}

reply_ptr run_argv(redisContext* c, std::uint16_t port, const std::vector<std::string>& args)
{
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const auto& a : args) {
        argv.push_back(a.data());
        lens.push_back(a.size());
    }
    reply_ptr r(static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data())));
    if (!r)
        throw std::runtime_error(fmt::format("zktest: {} on 127.0.0.1:{}: {}", args.empty() ? "?" : args[0], port,
                                             c->err ? c->errstr : "no reply"));
    if (r->type == REDIS_REPLY_ERROR)
        throw std::runtime_error(fmt::format("zktest: {} on 127.0.0.1:{}: error reply: {}",
                                             args.empty() ? "?" : args[0], port, std::string_view(r->str, r->len)));
    return r;
}

void append_reply(std::string& out, const redisReply* r)
{
    switch (r->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
        out.append(r->str, r->len);
        break;
    case REDIS_REPLY_INTEGER:
        out += std::to_string(r->integer);
        break;
    case REDIS_REPLY_NIL:
        out += "(nil)";
        break;
    case REDIS_REPLY_ARRAY:
        for (std::size_t i = 0; i < r->elements; ++i) {
            if (i > 0)
                out += '\n';
            append_reply(out, r->element[i]);
        }
        break;
    default:
        out += "(unknown reply type)";
        break;
    }
}

std::string tail_of_file(const std::string& path, std::size_t lines)
{
    std::ifstream in(path);
    if (!in)
        return fmt::format("(cannot read {})", path);
    std::deque<std::string> last;
    std::string line;
    while (std::getline(in, line)) {
        last.push_back(std::move(line));
        if (last.size() > lines)
            last.pop_front();
    }
    std::string out;
    for (const auto& l : last)
        out += l + '\n';
    return out;
}

std::string make_temp_dir()
{
    const char* tmp = std::getenv("TMPDIR");
    std::string base = (tmp != nullptr && *tmp != '\0') ? tmp : "/tmp";
    std::string templ = base + "/zkredis-XXXXXX";
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr)
        throw std::runtime_error(fmt::format("zktest: mkdtemp({}) failed: {}", templ, std::strerror(errno)));
    return buf.data();
}

void remove_tree(const std::string& dir) noexcept
{
    std::error_code ec;
    fs::remove_all(dir, ec);
}

[[noreturn]] void exec_child(char** argv, const char* log, pid_t parent, int max_fd) noexcept
{
    prepare_child_after_fork(parent);
    // Own process group: a terminal's Ctrl-C goes to the test, which decides how the server ends.
    ::setpgid(0, 0);
    int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    int out = ::open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (in < 0 || out < 0)
        ::_exit(126);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(out, 2);
    // The test's sockets must not leak into the server (Asio does not set CLOEXEC).
    if (::close_range(3, ~0U, 0) != 0)
        for (int fd = 3; fd < max_fd; ++fd)
            ::close(fd);
    ::execv(argv[0], argv);
    static const char msg[] = "zktest: execv(redis-server) failed\n";
    [[maybe_unused]] auto n = ::write(2, msg, sizeof msg - 1);
    ::_exit(127);
}

}  // namespace

std::string find_redis_server()
{
    if (const char* p = std::getenv("ZKTEST_REDIS_SERVER"); p != nullptr && *p != '\0')
        return ::access(p, X_OK) == 0 ? p : "";
    if (const char* path = std::getenv("PATH"); path != nullptr) {
        std::string_view rest(path);
        while (!rest.empty()) {
            auto colon = rest.find(':');
            std::string dir(rest.substr(0, colon));
            rest = colon == std::string_view::npos ? std::string_view{} : rest.substr(colon + 1);
            if (dir.empty())
                continue;
            fs::path p = fs::path(dir) / "redis-server";
            if (::access(p.c_str(), X_OK) == 0)
                return p.string();
        }
    }
    return ::access("/usr/bin/redis-server", X_OK) == 0 ? "/usr/bin/redis-server" : "";
}

std::string redis_command(std::uint16_t port, const std::vector<std::string>& args, const std::string& password,
                          std::chrono::milliseconds timeout)
{
    auto c = connect_sync(port, timeout);
    if (!password.empty())
        run_argv(c.get(), port, {"AUTH", password});
    auto r = run_argv(c.get(), port, args);
    std::string out;
    append_reply(out, r.get());
    return out;
}

bool redis_ping(std::uint16_t port, const std::string& password, std::chrono::milliseconds timeout)
{
    try {
        return redis_command(port, {"PING"}, password, timeout) == "PONG";
    } catch (const std::exception&) {
        return false;
    }
}

// ---------------------------------------------------------------------------------------------

redis_server::redis_server(redis_options opts) : opts_(std::move(opts))
{
    program_ = find_redis_server();
    if (program_.empty())
        throw std::runtime_error(
            "zktest: redis-server not found (install the Debian package redis-server, or set ZKTEST_REDIS_SERVER)");
    dir_ = make_temp_dir();
    port_ = free_loopback_port();
    try {
        start();
        wait_ready();
    } catch (...) {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            reap();
        }
        remove_tree(dir_);
        throw;
    }
}

redis_server::~redis_server()
{
    try {
        stop();
    } catch (...) {
    }
    remove_tree(dir_);
}

std::string redis_server::log_path() const { return (fs::path(dir_) / "redis.log").string(); }

std::string redis_server::url() const
{
    if (opts_.password.empty())
        return fmt::format("redis://127.0.0.1:{}", port_);
    return fmt::format("redis://{}@127.0.0.1:{}", opts_.password, port_);
}

void redis_server::start()
{
    if (pid_ > 0)
        return;
    // Everything the child needs is prepared here: after fork() in a multithreaded process only
    // async-signal-safe calls are allowed.
    std::vector<std::string> args{program_};
    if (!opts_.config_text.empty()) {
        // Written once, before the first fork: a sentinel rewrites it, and a restart keeps its state.
        const auto conf = (fs::path(dir_) / "redis.conf").string();
        if (!fs::exists(conf)) {
            std::ofstream f(conf);
            f << opts_.config_text << '\n';
            if (!f)
                throw std::runtime_error(fmt::format("zktest: cannot write {}", conf));
        }
        args.push_back(conf);
    }
    const std::vector<std::string> common{"--port", std::to_string(port_), "--bind", "127.0.0.1", "--dir", dir_,
                                          "--daemonize", "no", "--save", ""};
    args.insert(args.end(), common.begin(), common.end());
    if (opts_.persist == redis_options::persistence::aof) {
        for (const char* a : {"--appendonly", "yes", "--appendfsync", "always"})
            args.emplace_back(a);
    } else {
        for (const char* a : {"--appendonly", "no"})
            args.emplace_back(a);
    }
    if (!opts_.password.empty()) {
        args.emplace_back("--requirepass");
        args.push_back(opts_.password);
    }
    for (const auto& a : opts_.extra_args)
        args.push_back(a);
    std::vector<char*> argv;
    for (auto& a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string log = log_path();
    const pid_t parent = ::getpid();
    rlimit rl{};
    int max_fd = 4096;
    if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        max_fd = static_cast<int>(std::min<rlim_t>(rl.rlim_cur, 1 << 20));

    pid_t pid = ::fork();
    if (pid < 0)
        throw std::runtime_error(fmt::format("zktest: fork: {}", std::strerror(errno)));
    if (pid == 0)
        exec_child(argv.data(), log.c_str(), parent, max_fd);
    pid_ = pid;
}

// Polls PING every 20 ms (short probes: a connection made before the server listens is refused
// at once) until PONG, the process exits, or the start timeout passes.
void redis_server::wait_ready()
{
    const auto deadline = steady::now() + opts_.start_timeout;
    for (;;) {
        if (has_exited())
            throw std::runtime_error(
                failure_report(fmt::format("zktest: redis-server on port {} exited during start-up", port_)));
        if (redis_ping(port_, opts_.password, 300ms))
            return;
        if (steady::now() >= deadline)
            throw std::runtime_error(failure_report(fmt::format("zktest: redis-server on port {} did not answer PING "
                                                                "within {} s",
                                                                port_, opts_.start_timeout.count())));
        std::this_thread::sleep_for(20ms);
    }
}

bool redis_server::has_exited() const
{
    if (pid_ <= 0)
        return true;
    siginfo_t info{};
    int r = ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT);
    if (r != 0)
        return errno == ECHILD;
    return info.si_pid == pid_;
}

void redis_server::reap()
{
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
}

void redis_server::stop()
{
    if (pid_ <= 0)
        return;
    ::kill(pid_, SIGTERM);
    // A stopped process only acts on SIGTERM once continued.
    ::kill(pid_, SIGCONT);
    const auto deadline = steady::now() + opts_.stop_timeout;
    while (!has_exited() && steady::now() < deadline)
        std::this_thread::sleep_for(5ms);
    if (!has_exited())
        ::kill(pid_, SIGKILL);
    reap();
}

void redis_server::kill9()
{
    if (pid_ <= 0)
        return;
    ::kill(pid_, SIGKILL);
    reap();
}

void redis_server::restart()
{
    stop();
    start();
    wait_ready();
}

void redis_server::pause()
{
    if (pid_ <= 0)
        throw std::logic_error("zktest: pause() on a stopped redis-server");
    ::kill(pid_, SIGSTOP);
}

void redis_server::resume()
{
    if (pid_ <= 0)
        throw std::logic_error("zktest: resume() on a stopped redis-server");
    ::kill(pid_, SIGCONT);
}

std::string redis_server::failure_report(const std::string& what) const
{
    return fmt::format("{}\n--- last 30 lines of {} ---\n{}", what, log_path(), tail_of_file(log_path(), 30));
}

std::string redis_server::command(const std::vector<std::string>& args, std::chrono::milliseconds timeout) const
{
    return redis_command(port_, args, opts_.password, timeout);
}

std::map<std::string, std::string> redis_server::info(const std::string& section) const
{
    std::map<std::string, std::string> fields;
    std::istringstream in(command({"INFO", section}));
    std::string line;
    while (std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r')
            line.pop_back();
        if (line.empty() || line[0] == '#')
            continue;
        auto colon = line.find(':');
        if (colon == std::string::npos)
            continue;
        fields[line.substr(0, colon)] = line.substr(colon + 1);
    }
    return fields;
}

std::int64_t redis_server::total_commands_processed() const
{
    auto fields = info("stats");
    auto it = fields.find("total_commands_processed");
    if (it == fields.end())
        throw std::runtime_error("zktest: INFO stats has no total_commands_processed");
    return std::stoll(it->second);
}

std::int64_t redis_server::command_calls(const std::string& name) const
{
    // Lines like "cmdstat_set:calls=3,usec=12,usec_per_call=4.00,rejected_calls=0,failed_calls=0".
    auto fields = info("commandstats");
    auto it = fields.find("cmdstat_" + name);
    if (it == fields.end())
        return 0;
    const std::string& v = it->second;
    auto pos = v.find("calls=");
    if (pos == std::string::npos)
        throw std::runtime_error(fmt::format("zktest: cannot read calls from cmdstat_{}:{}", name, v));
    return std::stoll(v.substr(pos + 6));
}

}  // namespace zktest
