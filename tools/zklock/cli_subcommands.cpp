// zklock's subcommands on the command line: status, revoke and run, each one's options beside
// the checks that follow the parse (cli.hpp). zklock's own options are in main.cpp.
#include "cli.hpp"

#include <zkcoro/path.hpp>

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace zklock {

// `zklock status`.
void add_status(CLI::App& app, options& o, cli_values& v)
{
    auto* st = v.st =
        app.add_subcommand("status", "Show the queue at LOCKPATH, holder first (any recipe, Curator's nodes too; on "
                                     "Redis the keys of the lock named LOCKPATH)");
    st->add_option("LOCKPATH", v.status_path, "The lock's path")->required();
    st->add_flag("--json", o.json,
                 "Print JSON: {path, recipe, participants: [{node, session, data, age_s, mode?, holding?, recipe?}], "
                 "notes}");
    v.connect_opts.push_back(
        st->add_option("-c,--connect", v.connect,
                       "ZooKeeper hosts (default: $ZK_CONNECT, else 127.0.0.1:2181), or a redis://, "
                       "redis+sentinel:// or redis+cluster:// URL")
            ->type_name("HOSTS"));
    st->add_option("--auth-file", v.auth_file, "Read credentials from FILE (default: $ZK_AUTH)")->type_name("FILE");
    st->add_flag("-v,--verbose", o.verbose, "Say what happens on stderr");
    st->add_flag("-r,--recursive", o.recursive, "Every lock under LOCKPATH, of any recipe, and wait-for cycles");
    st->add_flag("--cycles", o.cycles, "(with -r) Only the wait-for cycles between sessions; exit 1 if any");
    st->add_flag("--dot", o.dot, "(with -r) Print the wait-for graph between sessions for Graphviz");
    v.older_opt = st->add_option("--older-than", v.older_than,
                                 "(with -r) Only holds and waits at least this old: 30s, 5m, 1h, 250ms")
                      ->type_name("DURATION");
}

int check_status(options& o, const cli_values& v)
{
    if (v.has_separator)
        return usage_error("status takes no command ('--' given)" + run_hint(v, "status"));
    if (!o.recursive && (o.cycles || o.dot || v.older_opt->count() > 0))
        return usage_error("status: --cycles, --dot and --older-than go with -r");
    if (o.dot && o.json)
        return usage_error("status: --dot and --json exclude each other");
    if (v.older_opt->count() > 0) {
        const std::string& older_than = v.older_than;
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
    return -1;
}

// `zklock revoke`.
void add_revoke(CLI::App& app, options& o, cli_values& v)
{
    auto* rv = v.rv = app.add_subcommand("revoke", "Ask the holder of LOCKPATH (or NODE) to let go: writes \"__REVOKE__\" into "
                                                   "its node (Curator's Revoker). Only a revocable holder reacts; a holder "
                                                   "that is not revocable keeps the lock, its holder data overwritten");
    rv->add_option("LOCKPATH", v.revoke_path, "The lock's path")->required();
    rv->add_option("NODE", o.revoke_node, "The node to ask, a name under LOCKPATH or a full path (default: the holder)");
    v.connect_opts.push_back(
        rv->add_option("-c,--connect", v.connect, "ZooKeeper hosts (default: $ZK_CONNECT, else 127.0.0.1:2181)")
            ->type_name("HOSTS"));
    rv->add_option("--auth-file", v.auth_file, "Read credentials from FILE (default: $ZK_AUTH)")->type_name("FILE");
    rv->add_flag("-v,--verbose", o.verbose, "Say what happens on stderr");
}

int check_revoke(const options& o, const cli_values& v)
{
    if (v.has_separator)
        return usage_error("revoke takes no command ('--' given)" + run_hint(v, "revoke"));
    if (!o.revoke_node.empty() && o.revoke_node.front() == '/') {
        if (auto p = zkcoro::check_path(o.revoke_node); !p.ok())
            return usage_error(fmt::format("NODE: {}", escape(p.describe(o.revoke_node))));
    } else if (!o.revoke_node.empty() && o.revoke_node.find('/') != std::string::npos) {
        return usage_error(fmt::format("NODE '{}': a node name under LOCKPATH (no '/') or a full path",
                                       escape(o.revoke_node)));
    }
    return -1;
}

// "run LOCKPATH": the lock's run spelled out, so that a Redis key (or a relative name) called
// status, revoke or run is a LOCKPATH, not a subcommand. zklock's options go before or after
// "run" (they fall through to zklock's own).
void add_run(CLI::App& app, cli_values& v)
{
    v.rn = app.add_subcommand("run", "Run COMMAND holding the lock at LOCKPATH, as without \"run\"; LOCKPATH may then "
                                     "be status, revoke or run (a Redis key of that name)");
    v.rn->fallthrough();
    v.rn->add_option("LOCKPATH", v.run_path, "The lock's path, or the Redis key")->required();
}

int parse_failure(const CLI::App& app, const CLI::ParseError& e, const std::vector<char*>& front, const cli_values& v)
{
    if (e.get_exit_code() == 0)
        return app.exit(e);  // --help, --version
    const std::string what = escape(e.what());
    if (v.rv->parsed() || (front.size() > 1 && std::string_view(front[1]) == "revoke"))
        return usage_error(fmt::format("revoke: {} (revoke takes LOCKPATH [NODE] and -c HOSTS, --auth-file FILE, -v){}",
                                       what, run_hint(v, "revoke")));
    if (v.st->parsed() || (front.size() > 1 && std::string_view(front[1]) == "status"))
        return usage_error(fmt::format("status: {} (status takes LOCKPATH and --json, -r, --cycles, --dot, --older-than D, -c HOSTS, --auth-file "
                                       "FILE, -v){}",
                                       what, run_hint(v, "status")));
    if (v.rn->parsed())
        return usage_error(fmt::format("run: {} (zklock [OPTIONS] run LOCKPATH -- COMMAND [ARGS...])", what));
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr && what.find("expected: -") != std::string::npos)
        return usage_error(fmt::format("unknown option: {}", what.substr(what.find("expected: ") + 10)));
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
        tell("zklock: {}\nzklock: the command goes after '--': zklock [OPTIONS] LOCKPATH -- COMMAND [ARGS...]\n",
                   what);
        return exit_code::usage;
    }
    return usage_error(what);
}

}  // namespace zklock
