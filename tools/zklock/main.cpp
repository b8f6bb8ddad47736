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

#include <algorithm>
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

// zklock's own options: the lock's run.
void add_lock_options(CLI::App& app, options& o, cli_values& v)
{
    v.connect_opts.push_back(
        app.add_option("-c,--connect", v.connect,
                       "ZooKeeper hosts, host:port[,host:port...][/chroot] (default: $ZK_CONNECT, else "
                       "127.0.0.1:2181), or redis://[[USER]:PASSWORD@]HOST:PORT[/DB] for a Redis lock on "
                       "the key LOCKPATH, or redis+sentinel://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT...]"
                       "/MASTER[/DB] for the master that Sentinel names, each grant acknowledged by a "
                       "replica (WAIT 1), or redis+cluster://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT...] for a "
                       "Redis Cluster (the key gets its name as hash tag: {LOCKPATH}). Put a password in "
                       "$ZK_CONNECT to keep it out of ps")
            ->type_name("HOSTS"));
    v.t_opt = app.add_option("-t,--timeout", v.timeout, "Give up after SECONDS waiting (exit 75)")
                  ->type_name("SECONDS")
                  ->check(seconds_validator(1e9, "a number of seconds"));
    auto* n_opt = app.add_flag("-n,--nonblock", o.nonblock, "Fail at once (exit 75) if the lock is held");
    n_opt->excludes(v.t_opt);
    app.add_option("-E,--conflict-exit-code", o.conflict_exit_code,
                   "Exit status when timed out or the lock is held (default 75), as flock -E")
        ->type_name("N")
        ->check(integer_validator(0, 255, "an exit status"));
    auto* s_opt = app.add_flag("-s,--shared", v.shared, "Take the read side of the read-write lock at LOCKPATH (on Redis: "
                                                         "zkcoro::redis_shared_mutex)");
    auto* w_opt = app.add_flag("-w,--write", v.write,
                               "Take the write side of the read-write lock at LOCKPATH (excludes -s holders; a plain "
                               "zklock mutex does not)");
    s_opt->excludes(w_opt);
    v.sem_opt = app.add_option("--semaphore", o.semaphore_leases, "Take one of N leases of the semaphore at LOCKPATH (on Redis: "
                                                                         "zkcoro::redis_semaphore; every holder must give the same N)")
                    ->type_name("N")
                    ->check(integer_validator(1, 1000000, "a number of leases"));
    s_opt->excludes(v.sem_opt);
    w_opt->excludes(v.sem_opt);
    v.data_opt = app.add_option("--data", o.data, "Stored in the lock node (default: host=H pid=P program=zklock label=COMMAND)")->type_name("TEXT");
    app.add_option("--on-lost", v.lost,
                   "What to do to COMMAND's process tree when the lock is lost: term (SIGTERM, then SIGKILL "
                   "after --kill-after), kill (SIGKILL) or ignore")
        ->check(CLI::IsMember({"term", "kill", "ignore"}))
        ->capture_default_str();
    app.add_option("--kill-after", v.kill_after,
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
    v.session_opt =
        app.add_option("--session-timeout", v.session_ms, "ZooKeeper session timeout in MS (the server clamps it)")
            ->type_name("MS")
            ->check(integer_validator(100, 3600000, "milliseconds"))
            ->capture_default_str();
    app.add_option("--auth-file", v.auth_file,
                   "Read credentials from FILE, one line scheme:credentials (digest:USER:PASSWORD); default: "
                   "$ZK_AUTH. Never pass them on the command line")
        ->type_name("FILE");
    app.add_option("--acl", v.acl,
                   "ACL of the nodes zklock creates (the lock's parents included): open (anyone) or creator "
                   "(only the authenticated creator; needs credentials)")
        ->check(CLI::IsMember({"open", "creator"}))
        ->capture_default_str();
    v.ttl_opt = app.add_option("--ttl", v.redis_ttl_s,
                               "With -c redis://...: the key's TTL in SECONDS, renewed every third of it while "
                               "held (default 10)")
                    ->type_name("SECONDS")
                    ->check(seconds_validator(86400, "a number of seconds"));
    app.add_flag("--fair", o.redis_fair,
                 "With -c redis://...: the fair lock, waiters granted in arrival order across processes (a "
                 "ZooKeeper lock always is); a mutex only, not with -s, -w or --semaphore");
    auto* rev_opt = app.add_flag("--revocable", o.revocable,
                                 "Take revocation requests (Curator's makeRevocable; `zklock revoke`, Curator's "
                                 "Revoker): the lock node then stores no data");
    rev_opt->excludes(s_opt)->excludes(w_opt)->excludes(v.sem_opt)->excludes(v.data_opt);
    auto* on_revoke_opt =
        app.add_option("--on-revoke", v.on_revoke,
                       "With --revocable, what to do when a revocation is requested: term (SIGTERM to the command's "
                       "process tree, SIGKILL after --kill-after; the lock is released when it has exited) or ignore")
            ->check(CLI::IsMember({"term", "ignore"}))
            ->capture_default_str();
    on_revoke_opt->needs(rev_opt);
    app.add_flag("-v,--verbose", o.verbose, "Say what happens on stderr");
    app.add_option("--session-file", o.session_file, "(tests) write the session id and password here")->group("");
    app.add_option("LOCKPATH", v.lock_path, "The lock's path in ZooKeeper, e.g. /locks/nightly");
}

// The lock's run on Redis: LOCKPATH is the key; a mutex, the fair lock (--fair), a read-write
// lock's side (-s, -w) or a semaphore's lease (--semaphore N); no credentials file (the password
// is in the URL), no revocation. `status` reads the key's state (redis_status.cpp).
int finish_redis_run(options& o, const cli_values& v, bool status)
{
#ifdef ZKLOCK_REDIS
    if (status && (o.recursive || o.cycles || o.dot || v.older_opt->count() > 0))
        return usage_error("status: -r, --cycles, --dot and --older-than walk a ZooKeeper tree; on Redis status "
                           "shows one key: zklock -c redis://HOST:PORT status [--json] KEY");
    if (o.revoke || o.revocable)
        return usage_error("revocation is a ZooKeeper (Curator) protocol; a Redis lock has none");
    if (o.redis_fair && (v.shared || v.write || v.sem_opt->count() > 0))
        return usage_error(fmt::format("--fair and {}: --fair takes the fair mutex; the read-write lock and the "
                                       "semaphore are recipes of their own (the semaphore's waiters are served in "
                                       "arrival order already)",
                                       v.shared ? "--shared" : v.write ? "--write" : "--semaphore"));
    if (!v.auth_file.empty() || v.acl != "open")
        return usage_error("--auth-file and --acl are for ZooKeeper; give a Redis password in the URL "
                           "(redis://PASSWORD@HOST:PORT)");
    // No use on Redis: the key's value is its holder's random token (the compare-and-delete
    // checks it), and the TTL plays the session's part.
    if (v.data_opt->count() > 0)
        return usage_error("--data is stored in a ZooKeeper lock node; a Redis lock's value is its holder's "
                           "random token (the release compares it), so it stores no data");
    if (v.session_opt->count() > 0)
        return usage_error("--session-timeout is ZooKeeper's; on Redis the key's TTL plays its part: use --ttl "
                           "SECONDS");
    zkcoro::error_code ec;
    std::string why;
    if (status) {
        zkcoro::parse_redis_url(o.connect, ec, &why);
        if (ec)
            return usage_error(fmt::format("{}: {}", o.connect_origin, escape(why)));
        // status finds the recipe from the keys; the run's choices say nothing to it.
        if (v.shared || v.write || v.sem_opt->count() > 0 || o.redis_fair || v.ttl_opt->count() > 0)
            return usage_error("status reads the key's state whatever its recipe: -s, -w, --semaphore, --fair and "
                               "--ttl are for a run (zklock -c redis://HOST:PORT status [--json] KEY)");
        return -1;
    }
    if (!v.has_separator || o.command.empty())
        return usage_error("COMMAND is missing: zklock -c redis://HOST:PORT [OPTIONS] KEY -- COMMAND [ARGS...]");
    if (v.redis_ttl_s < 0.1 || v.redis_ttl_s > 86400)
        return usage_error(fmt::format("--ttl {}: must be from 0.1 to 86400 seconds", v.redis_ttl_s));
    if (v.t_opt->count() > 0)
        o.timeout_s = v.timeout;
    o.kind = v.shared ? recipe::read : v.write ? recipe::write : v.sem_opt->count() > 0 ? recipe::semaphore : recipe::mutex;
    o.lost_action = v.lost == "kill" ? on_lost::kill : v.lost == "ignore" ? on_lost::ignore : on_lost::term;
    o.kill_after = std::chrono::milliseconds(static_cast<long long>(v.kill_after * 1000.0));
    o.redis_ttl = std::chrono::milliseconds(static_cast<long long>(v.redis_ttl_s * 1000.0));
    zkcoro::parse_redis_url(o.connect, ec, &why);
    if (ec)
        return usage_error(fmt::format("{}: {}", o.connect_origin, escape(why)));
    return -1;
#else
    (void)o, (void)v, (void)status;
    return usage_error("this zklock was built without Redis support (hiredis: libhiredis-dev)");
#endif
}

// The lock's run on ZooKeeper, once LOCKPATH and the credentials are read.
int finish_zookeeper_run(options& o, const cli_values& v)
{
    if (!v.has_separator || o.command.empty())
        return usage_error("COMMAND is missing: zklock [OPTIONS] LOCKPATH -- COMMAND [ARGS...]");
    if (v.t_opt->count() > 0)
        o.timeout_s = v.timeout;
    if (v.shared)
        o.kind = recipe::read;
    else if (v.write)
        o.kind = recipe::write;
    else if (v.sem_opt->count() > 0)
        o.kind = recipe::semaphore;
    o.lost_action = v.lost == "kill" ? on_lost::kill : v.lost == "ignore" ? on_lost::ignore : on_lost::term;
    o.revoke_term = v.on_revoke == "term";
    o.kill_after = std::chrono::milliseconds(static_cast<long long>(v.kill_after * 1000.0));
    o.session_timeout = std::chrono::milliseconds(v.session_ms);
    if (v.acl == "creator") {
        if (o.auth.empty())
            return usage_error("--acl creator needs credentials (--auth-file FILE or ZK_AUTH): without them the "
                               "nodes would belong to nobody");
        o.acl = acl_kind::creator;
    }
    return -1;
}

// -c of any subcommand, else $ZK_CONNECT, else the default.
void choose_connect(options& o, const cli_values& v)
{
    const bool given = std::any_of(v.connect_opts.begin(), v.connect_opts.end(), [](const CLI::Option* c) { return c->count() > 0; });
    if (given) {
        o.connect = v.connect;
        o.connect_origin = "--connect";
    } else if (!v.env_connect.empty()) {
        o.connect = v.env_connect;
        o.connect_origin = "$ZK_CONNECT";
    } else {
        o.connect = "127.0.0.1:2181";
        o.connect_origin = "the default connect string";
    }
}

// Checks that hold whatever the subcommand: LOCKPATH given and not too long, --kill-after.
int check_lock_path(const options& o, const cli_values& v, bool status)
{
    if (o.lock_path.empty())
        return usage_error("LOCKPATH is required");
    // The command gets the lock node's path in ZKLOCK_NODE, and Linux refuses to exec with an
    // environment string over 128 KiB (E2BIG): refuse such a LOCKPATH before anything is done.
    if (constexpr std::size_t max_path = 128 * 1024 - 256; o.lock_path.size() > max_path)
        return usage_error(fmt::format("LOCKPATH is {} bytes long; at most {}: the command gets the lock node's "
                                       "path in ZKLOCK_NODE, and Linux limits one environment string to 128 KiB",
                                       o.lock_path.size(), max_path));
    if (!status && !o.revoke && v.kill_after < 0.001)
        return usage_error(fmt::format("--kill-after {}: at least 0.001 seconds (1 ms); to leave the command "
                                       "running after a loss, use --on-lost ignore",
                                       v.kill_after));
    return -1;
}

// A URL of another scheme (rediss+sentinel://, sentinel://, ...): say what -c takes, rather
// than read it as ZooKeeper hosts with a chroot.
int refuse_other_url(const options& o)
{
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

// Credentials: --auth-file, else $ZK_AUTH; never on the command line (ps shows it).
int read_credentials(options& o, const cli_values& v)
{
    const std::string& auth_file = v.auth_file;
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
    return -1;
}

// The ZooKeeper connect string and session timeout, as the client will check them.
int check_zookeeper_config(const options& o)
{
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

// Parses the command line; returns an exit code to stop with, or -1 to go on. The checks run in
// this order (the first that fails is reported): the parse, the subcommand's own, LOCKPATH, the
// backend's (Redis, or ZooKeeper's path, credentials and run), the connect string.
int parse(int argc, char** argv, options& o, bool& status)
{
    cli_values v;
    // Everything after the first "--" is the command, untouched by option parsing.
    std::vector<char*> front;
    int i = 0;
    for (; i < argc; ++i) {
        if (i > 0 && std::strcmp(argv[i], "--") == 0)
            break;
        front.push_back(argv[i]);
    }
    v.has_separator = i < argc;
    for (++i; i < argc; ++i)
        o.command.emplace_back(argv[i]);
    if (const char* env = std::getenv("ZK_CONNECT"); env != nullptr && *env != '\0')
        v.env_connect = env;

    CLI::App app{"Runs COMMAND while holding a ZooKeeper lock (zkcoro; Curator-compatible node layouts):\n"
                 "acquires, runs COMMAND in a process group of its own, holds the lock until COMMAND\n"
                 "and every process it started have exited, releases, and exits with its status.",
                 "zklock"};
    app.formatter(std::make_shared<formatter>());
    app.set_version_flag("--version", "zklock " ZKLOCK_VERSION);
    app.footer(std::string(exit_codes_text));
    add_lock_options(app, o, v);
    add_status(app, o, v);
    add_revoke(app, o, v);
    add_run(app, v);
    try {
        app.parse(static_cast<int>(front.size()), front.data());
    } catch (const CLI::ParseError& e) {
        return parse_failure(app, e, front, v);
    }

    status = v.st->parsed();
    o.revoke = v.rv->parsed();
    o.lock_path = status ? v.status_path : o.revoke ? v.revoke_path : v.rn->parsed() ? v.run_path : v.lock_path;
    if (v.rn->parsed() && !v.lock_path.empty())
        return usage_error(fmt::format("LOCKPATH given twice ('{}' before run, '{}' after it): zklock [OPTIONS] run "
                                       "LOCKPATH -- COMMAND",
                                       escape(v.lock_path), escape(v.run_path)));
    choose_connect(o, v);
    if (int rc = status ? check_status(o, v) : -1; rc >= 0)
        return rc;
    if (int rc = o.revoke ? check_revoke(o, v) : -1; rc >= 0)
        return rc;
    if (int rc = check_lock_path(o, v, status); rc >= 0)
        return rc;
    if (!is_redis_url(o.connect) && o.connect.find("://") != std::string::npos)
        return refuse_other_url(o);
    if (is_redis_url(o.connect))
        return finish_redis_run(o, v, status);
    if (v.ttl_opt->count() > 0)
        return usage_error("--ttl is for a Redis lock (-c redis://...)");
    if (auto p = zkcoro::check_path(o.lock_path); !p.ok())
        return usage_error(fmt::format("LOCKPATH: {}", escape(p.describe(o.lock_path))));
    if (o.lock_path == "/" && !(status && o.recursive))  // status -r / scans the whole tree
        return usage_error("LOCKPATH: the root cannot be a lock (status -r / lists every lock in the tree)");
    if (int rc = read_credentials(o, v); rc >= 0)
        return rc;
    if (!status && !o.revoke)
        if (int rc = finish_zookeeper_run(o, v); rc >= 0)
            return rc;
    return check_zookeeper_config(o);
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
        zklock::tell("zklock: error: {}\n", e.what());
        return zklock::exit_code::refused;
    }
}
