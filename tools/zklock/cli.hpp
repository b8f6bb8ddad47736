// zklock's command line: the help texts (the usage line, the footer with the examples and the
// exit statuses), the checks of option values that the options carry, what the parse gives
// besides `options` (cli_values), and the subcommands (cli_subcommands.cpp). zklock's own
// options and parse() itself are in main.cpp.
#ifndef ZKCORO_TOOLS_ZKLOCK_CLI_HPP
#define ZKCORO_TOOLS_ZKLOCK_CLI_HPP

#include "zklock.hpp"

#include <zkcoro/client_config.hpp>

#include <CLI/CLI.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace zklock {

inline constexpr std::string_view synopsis = R"(Usage: zklock [OPTIONS] LOCKPATH -- COMMAND [ARGS...]
       zklock [OPTIONS] run LOCKPATH -- COMMAND [ARGS...]   (the same; LOCKPATH may be status, revoke, run)
       zklock status [--json] [-c HOSTS] [--auth-file FILE] LOCKPATH
       zklock status -r [--json|--dot] [--cycles] [--older-than DURATION] [-c HOSTS] [--auth-file FILE] ROOT
       zklock revoke [-c HOSTS] [--auth-file FILE] LOCKPATH [NODE]
)";

inline constexpr std::string_view exit_codes_text = R"(EXAMPLES
  zklock -c zk1:2181,zk2:2181 -t 600 /locks/nightly -- ./nightly.sh
  zklock -n /locks/deploy -- make deploy || echo "someone else is deploying"
  zklock --semaphore 3 /locks/encoders -- ffmpeg -i in.mkv out.mp4
  ZK_AUTH=digest:deployer:secret zklock --acl creator /locks/prod -- ./deploy.sh
  zklock status --json /locks/nightly
  zklock status -r --older-than 5m /locks      (every lock under /locks held or waited for 5 min+)
  zklock status -r --cycles /locks || alert    (exit 1: sessions wait for each other)
  zklock -c redis://127.0.0.1:6379 --ttl 30 nightly -- ./nightly.sh   (a Redis lock on key "nightly")
  zklock -c redis://127.0.0.1:6379 run status -- ./report.sh   (a key named "status": after "run")
  zklock --revocable --on-revoke term /locks/batch -- ./batch.sh
  zklock revoke /locks/batch          (asks the holder of /locks/batch to let go)

The command's environment gets ZKLOCK_FENCING_TOKEN (strictly increasing per grant, for fencing
what it writes), ZKLOCK_NODE (the lock node; on Redis, the key) and ZKLOCK_SESSION_ID (0x..., the
node's owner; 0x0 on Redis).

EXIT STATUS
  the command's    when it ran to the end with the lock held (128+N if it died of signal N)
  64  EX_USAGE     bad options or arguments (the message names the problem)
  69  EX_UNAVAILABLE  could not connect to ZooKeeper (within --timeout, else 10 s; -n: 2 s),
                   a host name did not resolve, the chroot does not exist, the session
                   ended before the lock was held; on Redis: the server could not be
                   reached, Sentinel named no master that answered (redis+sentinel://), the
                   server cannot take writes for now (READONLY: a replica; OOM: maxmemory
                   reached; NOREPLICAS, LOADING, MASTERDOWN), or no replica acknowledged
                   the grant in time (WAIT)
  70  EX_SOFTWARE  the lock was lost while the command ran (the command's own status is
                   overridden; --on-lost says what was done to the command; --lost-exit-code
                   changes the 70)
  75  EX_TEMPFAIL  timed out (--timeout) or the lock is held (--nonblock); -E changes it
  76  EX_PROTOCOL  the server refused an operation (ZooKeeper: e.g. no permission on
                   LOCKPATH; Redis: an error reply such as WRONGTYPE), or the release failed
  126              the command could not be run
  127              the command was not found
  128+N            zklock got signal N (INT, TERM, HUP) before the command started
Signals INT, TERM and HUP are forwarded to the command's process tree (then SIGCONT). zklock
holds the lock until the command and every process it started have exited, then deletes its
node and closes its ZooKeeper session.
status: 0, or 64, 69, 76 as above; status -r --cycles: 1 when sessions wait for each other.
revoke: 0 when the request was written (the holder decides; a holder that is not revocable
ignores it, but its node's data, the holder data, is overwritten, as Curator's Revoker does),
75 when nobody holds LOCKPATH, or 64, 69, 76 as above.)";

// CLI11's generated usage line ("zklock [OPTIONS] [LOCKPATH] [SUBCOMMAND]") does not show the
// command after "--": ours (synopsis) replaces it.
class formatter : public CLI::Formatter {
public:
    std::string make_usage(const CLI::App* app, std::string name) const override;
};

// A number of seconds in [0, max]: the message states the limit. A positive number too small for
// a double (1e-400) is refused: strtod reads it as 0 (or a denormal), which would be taken as 0.
CLI::Validator seconds_validator(double max, std::string_view what);

// A whole number in [lo, hi]: the message says "whole number" for 1.5, "out of range" for 0.
CLI::Validator integer_validator(long lo, long hi, std::string_view what);

// "scheme:credentials", e.g. "digest:user:password". Never echoes the credentials.
bool parse_auth(std::string_view text, zkcoro::auth_info& out, std::string& why);

// What the command line gives besides `options`: values that are checked or converted once
// the parse is done, and the options and subcommands whose presence matters then.
struct cli_values {
    bool has_separator = false;  // "--" given: a command follows
    std::string env_connect;     // $ZK_CONNECT
    std::string connect;         // -c of zklock, status or revoke
    std::vector<CLI::Option*> connect_opts;
    std::string lock_path;       // zklock's LOCKPATH (before "run", or without it)
    // zklock's own (the lock's run)
    double timeout = 0;
    CLI::Option* t_opt = nullptr;
    bool shared = false;
    bool write = false;
    CLI::Option* sem_opt = nullptr;
    CLI::Option* data_opt = nullptr;
    std::string lost = "term";
    double kill_after = 5;
    long long session_ms = 10000;
    CLI::Option* session_opt = nullptr;
    std::string auth_file;
    std::string acl = "open";
    double redis_ttl_s = 10;
    CLI::Option* ttl_opt = nullptr;
    std::string on_revoke = "term";
    // the subcommands
    CLI::App* st = nullptr;
    std::string status_path;
    std::string older_than;
    CLI::Option* older_opt = nullptr;
    CLI::App* rv = nullptr;
    std::string revoke_path;
    CLI::App* rn = nullptr;
    std::string run_path;
};

// "zklock: MSG" and the pointer to --help on stderr; returns 64.
int usage_error(std::string_view msg);
// A subcommand's word where a lock was meant: "zklock -c redis://... status -- COMMAND".
std::string run_hint(const cli_values& v, std::string_view word);

// The subcommands (cli_subcommands.cpp): each one's options, and its own checks once parsed
// (-1: go on, else the exit status). "run" has no checks of its own: zklock's apply.
void add_status(CLI::App& app, options& o, cli_values& v);
int check_status(options& o, const cli_values& v);
void add_revoke(CLI::App& app, options& o, cli_values& v);
int check_revoke(const options& o, const cli_values& v);
void add_run(CLI::App& app, cli_values& v);
// A parse CLI11 refused: the message names the subcommand and what it takes.
int parse_failure(const CLI::App& app, const CLI::ParseError& e, const std::vector<char*>& front, const cli_values& v);

}  // namespace zklock

#endif
