// zklock: run a command while holding a ZooKeeper lock; `zklock status` shows a lock's queue.
// Command line (CLI11) and dispatch. See README.md in this directory.
#include "zklock.hpp"

#include <zkcoro/client_config.hpp>
#include <zkcoro/path.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#ifndef ZKLOCK_VERSION
#define ZKLOCK_VERSION "unknown"
#endif

namespace zklock {

namespace {

constexpr std::string_view exit_codes_text = R"(EXIT STATUS
  the command's    when it ran to the end with the lock held (128+N if it died of signal N)
  64  EX_USAGE     bad options or arguments (the message names the problem)
  69  EX_UNAVAILABLE  could not connect to ZooKeeper (within 10 s, or --timeout if shorter),
                   or the session ended before the lock was held
  70  EX_SOFTWARE  the lock was lost while the command ran (the command's own status is
                   overridden; --on-lost says what was done to the command)
  75  EX_TEMPFAIL  timed out (--timeout) or the lock is held (--nonblock)
  76  EX_PROTOCOL  ZooKeeper refused an operation (e.g. no permission on LOCKPATH)
  126              the command could not be run
  127              the command was not found
  128+N            zklock got signal N (INT, TERM, HUP) before the command started
Signals INT, TERM and HUP are forwarded to the command's process group. Whenever zklock ends,
it closes its ZooKeeper session at once, so the lock is free at once.
status: 0, or 64, 69, 76 as above.)";

// Parses the command line; returns an exit code to stop with, or -1 to go on.
int parse(int argc, char** argv, options& o, bool& status)
{
    // Everything after the first "--" is the command, untouched by option parsing.
    std::vector<char*> front;
    int i = 0;
    for (; i < argc; ++i) {
        if (i > 0 && std::strcmp(argv[i], "--") == 0)
            break;
        front.push_back(argv[i]);
    }
    const bool has_separator = i < argc;
    for (++i; i < argc; ++i)
        o.command.emplace_back(argv[i]);

    if (const char* env = std::getenv("ZK_CONNECT"); env != nullptr && *env != '\0')
        o.connect = env;
    else
        o.connect = "127.0.0.1:2181";

    CLI::App app{"zklock [OPTIONS] LOCKPATH -- COMMAND [ARGS...]\n"
                 "zklock status LOCKPATH [--json] [-c HOSTS]\n\n"
                 "Runs COMMAND while holding a ZooKeeper lock (zkcoro; Curator-compatible node layouts):\n"
                 "acquires, runs COMMAND in a process group of its own, releases when it exits, and\n"
                 "exits with its status.",
                 "zklock"};
    app.set_version_flag("--version", "zklock " ZKLOCK_VERSION);
    app.footer(std::string(exit_codes_text));

    app.add_option("-c,--connect", o.connect, "ZooKeeper hosts, host:port[,host:port...][/chroot] (default: $ZK_CONNECT, else 127.0.0.1:2181)");
    double timeout = 0;
    auto* t_opt = app.add_option("-t,--timeout", timeout, "Give up after SECONDS waiting (exit 75)")
                      ->type_name("SECONDS")
                      ->check(CLI::Validator(
                          [](std::string& v) -> std::string {
                              char* end = nullptr;
                              const double d = std::strtod(v.c_str(), &end);
                              if (v.empty() || end == nullptr || *end != '\0' || !(d >= 0 && d <= 1e9))
                                  return fmt::format("needs a number of seconds >= 0, got '{}'", v);
                              return {};
                          },
                          "", "seconds"));
    auto* n_opt = app.add_flag("-n,--nonblock", o.nonblock, "Fail at once (exit 75) if the lock is held");
    n_opt->excludes(t_opt);
    bool shared = false;
    auto* s_opt = app.add_flag("-s,--shared", shared, "Take the read side of the read-write lock at LOCKPATH");
    bool write = false;
    auto* w_opt = app.add_flag("-w,--write", write,
                               "Take the write side of the read-write lock at LOCKPATH (excludes -s holders; a plain "
                               "zklock mutex does not)");
    s_opt->excludes(w_opt);
    auto* sem_opt = app.add_option("--semaphore", o.semaphore_leases, "Take one of N leases of the semaphore at LOCKPATH")
                        ->type_name("N")
                        ->check(CLI::Range(1, 1000000));
    s_opt->excludes(sem_opt);
    w_opt->excludes(sem_opt);
    app.add_option("--data", o.data, "Stored in the lock node (default: host:pid)")->type_name("TEXT");
    std::string lost = "term";
    app.add_option("--on-lost", lost, "What to do to COMMAND when the lock is lost: term (SIGTERM), kill (SIGKILL) or ignore")
        ->check(CLI::IsMember({"term", "kill", "ignore"}))
        ->capture_default_str();
    long long session_ms = 10000;
    app.add_option("--session-timeout", session_ms, "ZooKeeper session timeout in MS (the server clamps it)")
        ->type_name("MS")
        ->check(CLI::Range(100LL, 3600000LL))
        ->capture_default_str();
    app.add_flag("-v,--verbose", o.verbose, "Say what happens on stderr");
    app.add_option("--session-file", o.session_file, "(tests) write the session id and password here")->group("");
    std::string lock_path;
    app.add_option("LOCKPATH", lock_path, "The lock's path in ZooKeeper, e.g. /locks/nightly");

    auto* st = app.add_subcommand("status", "Show the queue at LOCKPATH, holder first (any recipe, Curator's nodes too)");
    std::string status_path;
    st->add_option("LOCKPATH", status_path, "The lock's path")->required();
    st->add_flag("--json", o.json, "Print JSON: {path, recipe, participants: [{node, session, data, age_s, mode?, holding?}]}");
    st->add_option("-c,--connect", o.connect, "ZooKeeper hosts (default: $ZK_CONNECT, else 127.0.0.1:2181)");
    st->add_flag("-v,--verbose", o.verbose, "Say what happens on stderr");

    try {
        app.parse(static_cast<int>(front.size()), front.data());
    } catch (const CLI::ExtrasError& e) {
        const std::string_view what = e.what();
        if (what.find("expected: -") != std::string_view::npos)
            fmt::print(stderr, "zklock: unknown option: {}\nRun with --help for more information.\n", what);
        else
            fmt::print(stderr, "zklock: {}\nzklock: the command goes after '--': zklock [OPTIONS] LOCKPATH -- COMMAND [ARGS...]\n",
                       what);
        return exit_code::usage;
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0)
            return app.exit(e);  // --help, --version
        fmt::print(stderr, "zklock: {}\nRun with --help for more information.\n", e.what());
        return exit_code::usage;
    }
    auto usage_error = [](std::string_view msg) {
        fmt::print(stderr, "zklock: {}\nRun with --help for more information.\n", msg);
        return exit_code::usage;
    };

    status = st->parsed();
    o.lock_path = status ? status_path : lock_path;
    if (status && has_separator)
        return usage_error("status takes no command ('--' given)");
    if (o.lock_path.empty())
        return usage_error("LOCKPATH is required");
    if (auto p = zkcoro::check_path(o.lock_path); !p.ok())
        return usage_error(fmt::format("LOCKPATH: {}", p.describe(o.lock_path)));
    if (o.lock_path == "/")
        return usage_error("LOCKPATH: the root cannot be a lock");
    if (!status) {
        if (!has_separator || o.command.empty())
            return usage_error("COMMAND is missing: zklock [OPTIONS] LOCKPATH -- COMMAND [ARGS...]");
        if (t_opt->count() > 0)
            o.timeout_s = timeout;
        if (shared)
            o.kind = recipe::read;
        else if (write)
            o.kind = recipe::write;
        else if (sem_opt->count() > 0)
            o.kind = recipe::semaphore;
        o.lost_action = lost == "kill" ? on_lost::kill : lost == "ignore" ? on_lost::ignore : on_lost::term;
        o.session_timeout = std::chrono::milliseconds(session_ms);
    }
    zkcoro::client_config cfg;
    cfg.connect_string = o.connect;
    cfg.session_timeout = o.session_timeout;
    std::string why;
    if (auto ec = zkcoro::check_config(cfg, &why))
        return usage_error(fmt::format("--connect '{}': {}", o.connect, why.empty() ? ec.message() : why));
    return -1;
}

asio::awaitable<int> status_main(zkcoro::client& zk, const options& o)
{
    auto [ec] = co_await zk.async_connect(asio::as_tuple(asio::use_awaitable));
    if (ec) {
        fmt::print(stderr, "zklock: cannot connect to ZooKeeper at {}: {}\n", o.connect, ec.message());
        co_return exit_code::unavailable;
    }
    auto q = co_await list_queue(zk, o.lock_path);
    std::string out = o.json ? render_json(q) : render_text(q);
    std::fwrite(out.data(), 1, out.size(), stdout);
    co_return 0;
}

}  // namespace

int run_status(const options& o)
{
    asio::io_context ioc;
    zkcoro::client_config cfg;
    cfg.connect_string = o.connect;
    cfg.connect_timeout = std::chrono::seconds(10);
    zkcoro::client zk(ioc.get_executor(), cfg);
    int rc = 1;
    bool done = false;
    asio::co_spawn(ioc, status_main(zk, o), [&](std::exception_ptr e, int r) {
        done = true;
        rc = r;
        if (e) {
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& x) {
                fmt::print(stderr, "zklock: status of {}: {}\n", o.lock_path, x.what());
                rc = exit_code::zk_error;
            }
        }
    });
    while (!done && ioc.run_one() > 0) {
    }
    bool closed = false;
    zk.async_close([&](zkcoro::error_code) { closed = true; });
    ioc.restart();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (!closed && ioc.run_one_until(deadline) > 0) {
    }
    std::fflush(stdout);
    if (!closed)
        std::_Exit(rc);
    return rc;
}

}  // namespace zklock

int main(int argc, char** argv)
{
    zklock::options o;
    bool status = false;
    try {
        if (int rc = zklock::parse(argc, argv, o, status); rc >= 0)
            return rc;
        return status ? zklock::run_status(o) : zklock::run_lock(o);
    } catch (const std::exception& e) {
        fmt::print(stderr, "zklock: error: {}\n", e.what());
        return zklock::exit_code::zk_error;
    }
}
