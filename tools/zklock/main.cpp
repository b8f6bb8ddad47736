// zklock: run a command while holding a ZooKeeper lock; `zklock status` shows a lock's queue;
// `zklock revoke` asks a revocable holder to let go.
// Command line (CLI11) and dispatch. See README.md in this directory.
#include "cli.hpp"
#include "zklock.hpp"

#ifdef ZKLOCK_REDIS
#include <zkcoro/redis.hpp>
#endif

#include <zkcoro/client_config.hpp>
#include <zkcoro/path.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#ifndef ZKLOCK_VERSION
#define ZKLOCK_VERSION "unknown"
#endif

namespace zklock {

namespace {

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

    std::string env_connect;
    if (const char* env = std::getenv("ZK_CONNECT"); env != nullptr && *env != '\0')
        env_connect = env;

    CLI::App app{"Runs COMMAND while holding a ZooKeeper lock (zkcoro; Curator-compatible node layouts):\n"
                 "acquires, runs COMMAND in a process group of its own, holds the lock until COMMAND\n"
                 "and every process it started have exited, releases, and exits with its status.",
                 "zklock"};
    app.formatter(std::make_shared<formatter>());
    app.set_version_flag("--version", "zklock " ZKLOCK_VERSION);
    app.footer(std::string(exit_codes_text));

    std::string connect;
    auto* c_opt = app.add_option("-c,--connect", connect,
                                 "ZooKeeper hosts, host:port[,host:port...][/chroot] (default: $ZK_CONNECT, else "
                                 "127.0.0.1:2181), or redis://[[USER]:PASSWORD@]HOST:PORT[/DB] for a Redis lock on "
                                 "the key LOCKPATH, or redis+sentinel://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT...]"
                                 "/MASTER[/DB] for the master that Sentinel names, each grant acknowledged by a "
                                 "replica (WAIT 1). Put a password in $ZK_CONNECT to keep it out of ps")
                      ->type_name("HOSTS");
    double timeout = 0;
    auto* t_opt = app.add_option("-t,--timeout", timeout, "Give up after SECONDS waiting (exit 75)")
                      ->type_name("SECONDS")
                      ->check(seconds_validator(1e9, "a number of seconds"));
    auto* n_opt = app.add_flag("-n,--nonblock", o.nonblock, "Fail at once (exit 75) if the lock is held");
    n_opt->excludes(t_opt);
    app.add_option("-E,--conflict-exit-code", o.conflict_exit_code,
                   "Exit status when timed out or the lock is held (default 75), as flock -E")
        ->type_name("N")
        ->check(integer_validator(0, 255, "an exit status"));
    bool shared = false;
    auto* s_opt = app.add_flag("-s,--shared", shared, "Take the read side of the read-write lock at LOCKPATH");
    bool write = false;
    auto* w_opt = app.add_flag("-w,--write", write,
                               "Take the write side of the read-write lock at LOCKPATH (excludes -s holders; a plain "
                               "zklock mutex does not)");
    s_opt->excludes(w_opt);
    auto* sem_opt = app.add_option("--semaphore", o.semaphore_leases, "Take one of N leases of the semaphore at LOCKPATH")
                        ->type_name("N")
                        ->check(integer_validator(1, 1000000, "a number of leases"));
    s_opt->excludes(sem_opt);
    w_opt->excludes(sem_opt);
    auto* data_opt = app.add_option("--data", o.data, "Stored in the lock node (default: host=H pid=P program=zklock label=COMMAND)")->type_name("TEXT");
    std::string lost = "term";
    app.add_option("--on-lost", lost,
                   "What to do to COMMAND's process tree when the lock is lost: term (SIGTERM, then SIGKILL "
                   "after --kill-after), kill (SIGKILL) or ignore")
        ->check(CLI::IsMember({"term", "kill", "ignore"}))
        ->capture_default_str();
    double kill_after = 5;
    app.add_option("--kill-after", kill_after,
                   "SIGKILL the command's process tree if it still runs SECONDS after the --on-lost SIGTERM "
                   "(at least 0.001; default 5). Should zklock itself die, the SIGKILL comes sooner if need be: "
                   "within a third of the session timeout (or of the Redis TTL), before the lock can be granted "
                   "again")
        ->type_name("SECONDS")
        ->check(seconds_validator(86400, "a number of seconds"));
    app.add_option("--lost-exit-code", o.lost_exit_code,
                   "Exit status when the lock was lost while COMMAND ran (default 70), so that it differs from "
                   "COMMAND's own")
        ->type_name("N")
        ->check(integer_validator(0, 255, "an exit status"));
    long long session_ms = 10000;
    auto* session_opt =
        app.add_option("--session-timeout", session_ms, "ZooKeeper session timeout in MS (the server clamps it)")
            ->type_name("MS")
            ->check(integer_validator(100, 3600000, "milliseconds"))
            ->capture_default_str();
    std::string auth_file;
    app.add_option("--auth-file", auth_file,
                   "Read credentials from FILE, one line scheme:credentials (digest:USER:PASSWORD); default: "
                   "$ZK_AUTH. Never pass them on the command line")
        ->type_name("FILE");
    std::string acl = "open";
    app.add_option("--acl", acl,
                   "ACL of the nodes zklock creates (the lock's parents included): open (anyone) or creator "
                   "(only the authenticated creator; needs credentials)")
        ->check(CLI::IsMember({"open", "creator"}))
        ->capture_default_str();
    double redis_ttl_s = 10;
    auto* ttl_opt = app.add_option("--ttl", redis_ttl_s,
                                   "With -c redis://...: the key's TTL in SECONDS, renewed every third of it while "
                                   "held (default 10)")
                        ->type_name("SECONDS")
                        ->check(seconds_validator(86400, "a number of seconds"));
    auto* rev_opt = app.add_flag("--revocable", o.revocable,
                                 "Take revocation requests (Curator's makeRevocable; `zklock revoke`, Curator's "
                                 "Revoker): the lock node then stores no data");
    rev_opt->excludes(s_opt)->excludes(w_opt)->excludes(sem_opt)->excludes(data_opt);
    std::string on_revoke = "term";
    auto* on_revoke_opt =
        app.add_option("--on-revoke", on_revoke,
                       "With --revocable, what to do when a revocation is requested: term (SIGTERM to the command's "
                       "process tree, SIGKILL after --kill-after; the lock is released when it has exited) or ignore")
            ->check(CLI::IsMember({"term", "ignore"}))
            ->capture_default_str();
    on_revoke_opt->needs(rev_opt);
    app.add_flag("-v,--verbose", o.verbose, "Say what happens on stderr");
    app.add_option("--session-file", o.session_file, "(tests) write the session id and password here")->group("");
    std::string lock_path;
    app.add_option("LOCKPATH", lock_path, "The lock's path in ZooKeeper, e.g. /locks/nightly");

    auto* st = app.add_subcommand("status", "Show the queue at LOCKPATH, holder first (any recipe, Curator's nodes too)");
    std::string status_path;
    st->add_option("LOCKPATH", status_path, "The lock's path")->required();
    st->add_flag("--json", o.json,
                 "Print JSON: {path, recipe, participants: [{node, session, data, age_s, mode?, holding?, recipe?}], "
                 "notes}");
    auto* st_c_opt = st->add_option("-c,--connect", connect, "ZooKeeper hosts (default: $ZK_CONNECT, else 127.0.0.1:2181)")
                         ->type_name("HOSTS");
    st->add_option("--auth-file", auth_file, "Read credentials from FILE (default: $ZK_AUTH)")->type_name("FILE");
    st->add_flag("-v,--verbose", o.verbose, "Say what happens on stderr");
    st->add_flag("-r,--recursive", o.recursive, "Every lock under LOCKPATH, of any recipe, and wait-for cycles");
    st->add_flag("--cycles", o.cycles, "(with -r) Only the wait-for cycles between sessions; exit 1 if any");
    st->add_flag("--dot", o.dot, "(with -r) Print the wait-for graph between sessions for Graphviz");
    std::string older_than;
    auto* older_opt = st->add_option("--older-than", older_than,
                                     "(with -r) Only holds and waits at least this old: 30s, 5m, 1h, 250ms")
                          ->type_name("DURATION");

    auto* rv = app.add_subcommand("revoke", "Ask the holder of LOCKPATH (or NODE) to let go: writes \"__REVOKE__\" into "
                                            "its node (Curator's Revoker). Only a revocable holder reacts; a holder "
                                            "that is not revocable keeps the lock, its holder data overwritten");
    std::string revoke_path;
    rv->add_option("LOCKPATH", revoke_path, "The lock's path")->required();
    rv->add_option("NODE", o.revoke_node, "The node to ask, a name under LOCKPATH or a full path (default: the holder)");
    auto* rv_c_opt = rv->add_option("-c,--connect", connect, "ZooKeeper hosts (default: $ZK_CONNECT, else 127.0.0.1:2181)")
                         ->type_name("HOSTS");
    rv->add_option("--auth-file", auth_file, "Read credentials from FILE (default: $ZK_AUTH)")->type_name("FILE");
    rv->add_flag("-v,--verbose", o.verbose, "Say what happens on stderr");

    // "run LOCKPATH": the lock's run spelled out, so that a Redis key (or a relative name) called
    // status, revoke or run is a LOCKPATH, not a subcommand. zklock's options go before or after
    // "run" (they fall through to zklock's own).
    auto* rn = app.add_subcommand("run", "Run COMMAND holding the lock at LOCKPATH, as without \"run\"; LOCKPATH may then "
                                         "be status, revoke or run (a Redis key of that name)");
    rn->fallthrough();
    std::string run_path;
    rn->add_option("LOCKPATH", run_path, "The lock's path, or the Redis key")->required();

    auto usage_error = [](std::string_view msg) {
        fmt::print(stderr, "zklock: {}\nRun with --help for more information.\n", msg);
        return exit_code::usage;
    };
    const bool status_word = front.size() > 1 && std::string_view(front[1]) == "status";
    // A subcommand's word where a lock was meant: "zklock -c redis://... status -- COMMAND".
    auto run_hint = [has_separator](std::string_view word) {
        return has_separator ? fmt::format("; to run a command holding a lock or Redis key named '{}': zklock [OPTIONS] "
                                           "run {} -- COMMAND",
                                           word, word)
                             : std::string();
    };
    try {
        app.parse(static_cast<int>(front.size()), front.data());
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0)
            return app.exit(e);  // --help, --version
        const std::string what = escape(e.what());
        if (rv->parsed() || (front.size() > 1 && std::string_view(front[1]) == "revoke"))
            return usage_error(fmt::format("revoke: {} (revoke takes LOCKPATH [NODE] and -c HOSTS, --auth-file FILE, -v){}",
                                           what, run_hint("revoke")));
        if (st->parsed() || status_word)
            return usage_error(fmt::format("status: {} (status takes LOCKPATH and --json, -r, --cycles, --dot, --older-than D, -c HOSTS, --auth-file "
                                           "FILE, -v){}",
                                           what, run_hint("status")));
        if (rn->parsed())
            return usage_error(fmt::format("run: {} (zklock [OPTIONS] run LOCKPATH -- COMMAND [ARGS...])", what));
        if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr && what.find("expected: -") != std::string::npos)
            return usage_error(fmt::format("unknown option: {}", what.substr(what.find("expected: ") + 10)));
        if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
            fmt::print(stderr, "zklock: {}\nzklock: the command goes after '--': zklock [OPTIONS] LOCKPATH -- COMMAND [ARGS...]\n",
                       what);
            return exit_code::usage;
        }
        return usage_error(what);
    }

    status = st->parsed();
    o.revoke = rv->parsed();
    o.lock_path = status ? status_path : o.revoke ? revoke_path : rn->parsed() ? run_path : lock_path;
    if (rn->parsed() && !lock_path.empty())
        return usage_error(fmt::format("LOCKPATH given twice ('{}' before run, '{}' after it): zklock [OPTIONS] run "
                                       "LOCKPATH -- COMMAND",
                                       escape(lock_path), escape(run_path)));
    if (c_opt->count() > 0 || st_c_opt->count() > 0 || rv_c_opt->count() > 0) {
        o.connect = connect;
        o.connect_origin = "--connect";
    } else if (!env_connect.empty()) {
        o.connect = env_connect;
        o.connect_origin = "$ZK_CONNECT";
    } else {
        o.connect = "127.0.0.1:2181";
        o.connect_origin = "the default connect string";
    }
    if (status && has_separator)
        return usage_error("status takes no command ('--' given)" + run_hint("status"));
    if (status && !o.recursive && (o.cycles || o.dot || older_opt->count() > 0))
        return usage_error("status: --cycles, --dot and --older-than go with -r");
    if (status && o.dot && o.json)
        return usage_error("status: --dot and --json exclude each other");
    if (older_opt->count() > 0) {
        o.older_than_s = parse_duration(older_than);
        // A positive number that a double cannot hold (1e-400s), or whose unit makes it 0
        // (1e-320ms), is not 0: say so rather than list every hold.
        char* end = nullptr;
        errno = 0;
        const double number = std::strtod(older_than.c_str(), &end);
        const bool range = errno == ERANGE;
        if (end != older_than.c_str() && ((range && number >= 0 && number < 1) || (number > 0 && o.older_than_s == 0.0)))
            return usage_error(fmt::format("status: --older-than '{}': too small to tell from 0 (give 0, or e.g. "
                                           "250ms)",
                                           escape(older_than)));
        if (end != older_than.c_str() && range && number > 1)
            return usage_error(fmt::format("status: --older-than '{}': too large (e.g. 30s, 5m, 1h, 7d)",
                                           escape(older_than)));
        if (!o.older_than_s)
            return usage_error(fmt::format("status: --older-than '{}': not a duration (e.g. 30s, 5m, 1h, 250ms)",
                                           escape(older_than)));
    }
    if (o.revoke && has_separator)
        return usage_error("revoke takes no command ('--' given)" + run_hint("revoke"));
    if (o.revoke && !o.revoke_node.empty() && o.revoke_node.front() == '/') {
        if (auto p = zkcoro::check_path(o.revoke_node); !p.ok())
            return usage_error(fmt::format("NODE: {}", escape(p.describe(o.revoke_node))));
    } else if (o.revoke && !o.revoke_node.empty() && o.revoke_node.find('/') != std::string::npos) {
        return usage_error(fmt::format("NODE '{}': a node name under LOCKPATH (no '/') or a full path",
                                       escape(o.revoke_node)));
    }
    if (o.lock_path.empty())
        return usage_error("LOCKPATH is required");
    // The command gets the lock node's path in ZKLOCK_NODE, and Linux refuses to exec with an
    // environment string over 128 KiB (E2BIG): refuse such a LOCKPATH before anything is done.
    if (constexpr std::size_t max_path = 128 * 1024 - 256; o.lock_path.size() > max_path)
        return usage_error(fmt::format("LOCKPATH is {} bytes long; at most {}: the command gets the lock node's "
                                       "path in ZKLOCK_NODE, and Linux limits one environment string to 128 KiB",
                                       o.lock_path.size(), max_path));
    if (!status && !o.revoke && kill_after < 0.001)
        return usage_error(fmt::format("--kill-after {}: at least 0.001 seconds (1 ms); to leave the command "
                                       "running after a loss, use --on-lost ignore",
                                       kill_after));
    if (!is_redis_url(o.connect) && o.connect.find("://") != std::string::npos) {
        // A URL of another scheme (rediss+sentinel://, sentinel://, ...): say what -c takes,
        // rather than read it as ZooKeeper hosts with a chroot.
#ifdef ZKLOCK_REDIS
        constexpr std::string_view zk_form = "or a ZooKeeper connect string HOST:PORT[,HOST:PORT...][/CHROOT]";
        zkcoro::error_code ec;
        std::string why;
        zkcoro::parse_redis_url(o.connect, ec, &why);
        return usage_error(fmt::format("{}: {}; {}", o.connect_origin, escape(why), zk_form));
#else
        return usage_error(fmt::format("{} '{}': not a ZooKeeper connect string: -c takes HOST:PORT[,HOST:PORT...][/CHROOT] "
                                       "(this zklock was built without Redis support)",
                                       o.connect_origin, shown_connect(o.connect)));
#endif
    }
    if (is_redis_url(o.connect)) {
#ifdef ZKLOCK_REDIS
        // A Redis lock: LOCKPATH is the key; one recipe (a mutex), no credentials file (the
        // password is in the URL), no queue to list.
        if (status)
            return usage_error("status lists a ZooKeeper lock's queue; a Redis lock keeps none (use redis-cli GET KEY)");
        if (o.revoke || o.revocable)
            return usage_error("revocation is a ZooKeeper (Curator) protocol; a Redis lock has none");
        if (shared || write || sem_opt->count() > 0)
            return usage_error("--shared, --write and --semaphore are ZooKeeper recipes; on Redis zklock takes a mutex");
        if (!auth_file.empty() || acl != "open")
            return usage_error("--auth-file and --acl are for ZooKeeper; give a Redis password in the URL "
                               "(redis://PASSWORD@HOST:PORT)");
        // No use on Redis: the key's value is its holder's random token (the compare-and-delete
        // checks it), and the TTL plays the session's part.
        if (data_opt->count() > 0)
            return usage_error("--data is stored in a ZooKeeper lock node; a Redis lock's value is its holder's "
                               "random token (the release compares it), so it stores no data");
        if (session_opt->count() > 0)
            return usage_error("--session-timeout is ZooKeeper's; on Redis the key's TTL plays its part: use --ttl "
                               "SECONDS");
        if (!has_separator || o.command.empty())
            return usage_error("COMMAND is missing: zklock -c redis://HOST:PORT [OPTIONS] KEY -- COMMAND [ARGS...]");
        if (redis_ttl_s < 0.1 || redis_ttl_s > 86400)
            return usage_error(fmt::format("--ttl {}: must be from 0.1 to 86400 seconds", redis_ttl_s));
        if (t_opt->count() > 0)
            o.timeout_s = timeout;
        o.lost_action = lost == "kill" ? on_lost::kill : lost == "ignore" ? on_lost::ignore : on_lost::term;
        o.kill_after = std::chrono::milliseconds(static_cast<long long>(kill_after * 1000.0));
        o.redis_ttl = std::chrono::milliseconds(static_cast<long long>(redis_ttl_s * 1000.0));
        zkcoro::error_code ec;
        std::string why;
        zkcoro::parse_redis_url(o.connect, ec, &why);
        if (ec)
            return usage_error(fmt::format("{}: {}", o.connect_origin, escape(why)));
        return -1;
#else
        return usage_error("this zklock was built without Redis support (hiredis: libhiredis-dev)");
#endif
    }
    if (ttl_opt->count() > 0)
        return usage_error("--ttl is for a Redis lock (-c redis://...)");
    if (auto p = zkcoro::check_path(o.lock_path); !p.ok())
        return usage_error(fmt::format("LOCKPATH: {}", escape(p.describe(o.lock_path))));
    if (o.lock_path == "/" && !(status && o.recursive))  // status -r / scans the whole tree
        return usage_error("LOCKPATH: the root cannot be a lock (status -r / lists every lock in the tree)");

    // Credentials: --auth-file, else $ZK_AUTH; never on the command line (ps shows it).
    if (!auth_file.empty()) {
        std::FILE* f = std::fopen(auth_file.c_str(), "r");
        if (f == nullptr)
            return usage_error(fmt::format("--auth-file {}: {}", escape(auth_file), std::strerror(errno)));
        std::string text;
        char buf[4096];
        for (int k = 0; k < 16; ++k) {  // at most 64 KiB
            const std::size_t n = std::fread(buf, 1, sizeof buf, f);
            text.append(buf, n);
            if (n < sizeof buf)
                break;
        }
        std::fclose(f);
        zkcoro::auth_info a;
        std::string why;
        if (!parse_auth(text, a, why))
            return usage_error(fmt::format("--auth-file {}: {}", escape(auth_file), why));
        o.auth.push_back(std::move(a));
        o.auth_origin = fmt::format("--auth-file {}", escape(auth_file));
    } else if (const char* env = std::getenv("ZK_AUTH"); env != nullptr && *env != '\0') {
        zkcoro::auth_info a;
        std::string why;
        if (!parse_auth(env, a, why))
            return usage_error(fmt::format("$ZK_AUTH: {}", why));
        o.auth.push_back(std::move(a));
        o.auth_origin = "$ZK_AUTH";
    }
    if (!status && !o.revoke) {
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
        o.revoke_term = on_revoke == "term";
        o.kill_after = std::chrono::milliseconds(static_cast<long long>(kill_after * 1000.0));
        o.session_timeout = std::chrono::milliseconds(session_ms);
        if (acl == "creator") {
            if (o.auth.empty())
                return usage_error("--acl creator needs credentials (--auth-file FILE or ZK_AUTH): without them the "
                                   "nodes would belong to nobody");
            o.acl = acl_kind::creator;
        }
    }
    zkcoro::client_config cfg;
    cfg.connect_string = o.connect;
    cfg.session_timeout = o.session_timeout;
    std::string why;
    if (auto ec = zkcoro::check_config(cfg, &why)) {
        // The reason may quote a host entry: where the string has user info ("USER:PW@HOST"),
        // say what is wrong without quoting it.
        if (shown_connect(o.connect) != escape(o.connect))
            why = "a ZooKeeper connect string has no user or password ('@'): give credentials in --auth-file FILE or "
                  "$ZK_AUTH, or a Redis password in a redis:// URL";
        return usage_error(fmt::format("{} '{}': {}", o.connect_origin, shown_connect(o.connect),
                                       escape(why.empty() ? ec.message() : why)));
    }
    return -1;
}

}  // namespace

}  // namespace zklock

int main(int argc, char** argv)
{
    zklock::options o;
    bool status = false;
    try {
        if (int rc = zklock::parse(argc, argv, o, status); rc >= 0)
            return rc;
        return status ? zklock::run_status(o) : o.revoke ? zklock::run_revoke(o) : zklock::run_lock(o);
    } catch (const std::exception& e) {
        fmt::print(stderr, "zklock: error: {}\n", e.what());
        return zklock::exit_code::refused;
    }
}
