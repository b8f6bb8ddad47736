#!/bin/bash
# Wait-for cycles between processes, named by one `zklock status -r --cycles` scan:
#
#   zkcoro-with-server -- bash tests/interop/deadlock_scan.sh BUILD_DIR
#
# 1. Two zkcoro processes (zkcoro-two-locks), one session each, take /a then /b and /b then /a:
#    each holds one and waits for the other. Once both waits are queued (seen by
#    `zklock status --json` on each path), one scan names the cycle: exit 1, both locks, both
#    sessions' data. --json and --dot say the same.
# 2. The same with a Curator process (CuratorTwoLocks) and a zkcoro process.
# 3. Negative controls: the same pairs taking the locks in one order: no cycle, exit 0.
# 4. `zklock status -r` text, --older-than, and its refusals of bad input.
# Every wait is bounded; only processes started here are ended, by PID. Every exit status of a
# zkcoro program is checked (a sanitizer report exits 86 in the sanitizer build: never taken for
# the cycle's exit 1 or passed over).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
source "$here/common.sh"
interop_setup zkcoro-deadlock "$@"
zklock="$build/tools/zklock/zklock"
two="$build/tests/interop/zkcoro-two-locks"
base="/zkcoro-deadlock-$run_id"
[ -x "$two" ] || { echo "$0: missing $two" >&2; exit 2; }

echo "== deadlock_scan: ZooKeeper at $connect, work dir $tmp"
build_curator_holder

# start_two NAME KIND FIRST SECOND DATA: a two-lock process (KIND zkcoro or curator). It asks
# for SECOND only after `go NAME` (a line on its stdin, a FIFO whose writer end is kept here).
declare -A go_fd=() kinds=()
start_two() {
    local name=$1 kind=$2 fd
    kinds[$name]=$kind
    mkfifo "$tmp/$name.in"
    if [ "$kind" = zkcoro ]; then
        "$two" --connect "$connect" --first "$3" --second "$4" --data "$5" --second-after-line yes \
            <"$tmp/$name.in" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    else
        "$java_bin" -cp "$cp" CuratorTwoLocks --connect "$connect" --first "$3" --second "$4" --data "$5" \
            --second-after-line yes <"$tmp/$name.in" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    fi
    pids[$name]=$!
    started+=("$!")
    exec {fd}>"$tmp/$name.in"
    go_fd[$name]=$fd
}
go() { echo go >&"${go_fd[$1]}"; }

# wait_line NAME LINE SECONDS: NAME's stdout has LINE within SECONDS.
wait_line() {
    local deadline=$(( $(date +%s) + $3 ))
    until grep -qxF "$2" "$tmp/$1.out" 2>/dev/null; do
        if [ "$(date +%s)" -ge "$deadline" ] || ! kill -0 "${pids[$1]}" 2>/dev/null; then
            fail "$1 did not print '$2' within $3 s; its stderr:"
            sed 's/^/    /' "$tmp/$1.err"
            return 1
        fi
        sleep 0.05
    done
}

# wait_nodes PATH N SECONDS: the queue at PATH has N nodes (zklock status --json).
wait_nodes() {
    local deadline=$(( $(date +%s) + $3 )) n
    while :; do
        n=$("$zklock" status --json -c "$connect" "$1" 2>/dev/null | grep -c '"node"' || true)
        [ "$n" = "$2" ] && return 0
        if [ "$(date +%s)" -ge "$deadline" ]; then
            fail "$1 has $n nodes, not $2, after $3 s"
            return 1
        fi
        sleep 0.05
    done
}

# stop NAME...: SIGTERM (the processes close their sessions), bounded wait. zkcoro-two-locks
# must exit 0 (its status on SIGTERM); the JVM's status (143) is not checked.
stop() {
    local name rc
    for name in "$@"; do
        kill -TERM "${pids[$name]}" 2>/dev/null || true
    done
    for name in "$@"; do  # EOF on stdin for one still waiting for its line
        if [ -n "${go_fd[$name]:-}" ]; then
            eval "exec ${go_fd[$name]}>&-"
            unset "go_fd[$name]"
        fi
    done
    for name in "$@"; do
        rc=0
        wait_pid "${pids[$name]}" 15 >/dev/null || rc=$?
        if [ "${kinds[$name]}" = zkcoro ] && [ "$rc" -ne 0 ]; then
            fail "$name (zkcoro-two-locks) exited $rc when stopped, not 0; its stderr:"
            sed 's/^/    /' "$tmp/$name.err"
        fi
    done
}

# pair CASE KIND1 KIND2 CROSSED: two processes on $base/CASE/{a,b}; crossed: opposite orders.
pair() {
    local c=$1 k1=$2 k2=$3 crossed=$4 root="$base/$1" rc=0
    local p1="$c-1" p2="$c-2"
    echo "== $c: $k1 and $k2, $([ "$crossed" = 1 ] && echo "opposite orders" || echo "one order")"
    start_two "$p1" "$k1" "$root/a" "$root/b" "$p1 data"
    wait_line "$p1" "holding $root/a" 30 || { stop "$p1"; return 0; }
    if [ "$crossed" = 1 ]; then
        start_two "$p2" "$k2" "$root/b" "$root/a" "$p2 data"
        wait_line "$p2" "holding $root/b" 30 || { stop "$p1" "$p2"; return 0; }
        go "$p1"
        go "$p2"
        wait_nodes "$root/a" 2 20 && wait_nodes "$root/b" 2 20 || { stop "$p1" "$p2"; return 0; }
    else
        go "$p1"
        wait_line "$p1" "holding $root/b" 30 || { stop "$p1"; return 0; }
        start_two "$p2" "$k2" "$root/a" "$root/b" "$p2 data"
        wait_nodes "$root/a" 2 20 || { stop "$p1" "$p2"; return 0; }
    fi
    "$zklock" status -r --cycles -c "$connect" "$root" >"$tmp/$c.cycles" 2>"$tmp/$c.cycles.err" || rc=$?
    if [ "$crossed" = 1 ]; then
        if [ "$rc" = 1 ] && grep -q "^deadlock candidate: sessions .*'$p1 data'.*'$p2 data'\|^deadlock candidate: sessions .*'$p2 data'.*'$p1 data'" "$tmp/$c.cycles" &&
            grep -q " on $root/a\$" "$tmp/$c.cycles" && grep -q " on $root/b\$" "$tmp/$c.cycles"; then
            echo "PASS: $c: one scan names the cycle ($(elapsed))"
            sed 's/^/    /' "$tmp/$c.cycles"
        else
            fail "$c: expected exit 1 and a cycle naming $root/a, $root/b and both data; exit $rc, output:"
            sed 's/^/    /' "$tmp/$c.cycles" "$tmp/$c.cycles.err"
        fi
        rc=0
        "$zklock" status -r --json -c "$connect" "$root" >"$tmp/$c.json" 2>"$tmp/$c.json.err" || rc=$?
        if [ "$rc" != 0 ]; then  # without --cycles a cycle is no error
            fail "$c: status -r --json exited $rc, not 0:"; sed 's/^/    /' "$tmp/$c.json.err"
        elif python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); c=j["cycles"]; sys.exit(0 if len(c)==1 and len(c[0]["sessions"])==2 and sorted(e["lock"] for e in c[0]["edges"])==[sys.argv[2]+"/a",sys.argv[2]+"/b"] else 1)' "$tmp/$c.json" "$root"; then
            echo "PASS: $c: --json has the cycle"
        else
            fail "$c: --json lacks the cycle:"; sed 's/^/    /' "$tmp/$c.json"
        fi
        rc=0
        "$zklock" status -r --dot -c "$connect" "$root" >"$tmp/$c.dot" 2>"$tmp/$c.dot.err" || rc=$?
        if [ "$rc" != 0 ]; then
            fail "$c: status -r --dot exited $rc, not 0:"; sed 's/^/    /' "$tmp/$c.dot.err"
        elif grep -q '^digraph waits_for' "$tmp/$c.dot" && [ "$(grep -c 'color=red' "$tmp/$c.dot")" = 2 ]; then
            echo "PASS: $c: --dot has both edges of the cycle in red"
        else
            fail "$c: --dot:"; sed 's/^/    /' "$tmp/$c.dot"
        fi
    else
        if [ "$rc" = 0 ] && grep -q '^no wait-for cycle' "$tmp/$c.cycles"; then
            echo "PASS: $c: no cycle, exit 0 (negative control)"
        else
            fail "$c: expected no cycle and exit 0; exit $rc, output:"
            sed 's/^/    /' "$tmp/$c.cycles" "$tmp/$c.cycles.err"
        fi
    fi
    stop "$p1" "$p2"
}

pair zz-crossed zkcoro zkcoro 1
pair cz-crossed curator zkcoro 1
pair zz-ordered zkcoro zkcoro 0
pair cz-ordered curator zkcoro 0

echo "== status -r: the text listing, --older-than, bad input"
root="$base/listing"
start_two lst zkcoro "$root/x/m" "$root/x/m2" "lst data"
go lst
wait_line lst "holding $root/x/m2" 30 || true
"$zklock" status -r -c "$connect" "$base" >"$tmp/list.txt" 2>&1 || fail "status -r exited $?"
if grep -q "^$root/x/m (mutex): 1 holder, 0 waiters\$" "$tmp/list.txt" &&
    grep -q "^  holds .*data 'lst data'" "$tmp/list.txt"; then
    echo "PASS: status -r lists $root/x/m with its holder and data"
else
    fail "status -r listing:"; sed 's/^/    /' "$tmp/list.txt"
fi
out=$("$zklock" status -r --older-than 1h -c "$connect" "$root")
[ "$out" = "no lock nodes" ] && echo "PASS: --older-than 1h shows nothing" || fail "--older-than 1h: '$out'"
"$zklock" status -r --older-than 0s -c "$connect" "$root" | grep -q "^$root/x/m (mutex)" &&
    echo "PASS: --older-than 0s shows the lock" || fail "--older-than 0s lost the lock"
stop lst
for bad in "-r --older-than 5x" "-r --older-than=-1s" "--cycles" "--dot --json -r"; do
    rc=0
    # shellcheck disable=SC2086
    "$zklock" status $bad -c "$connect" "$root" >/dev/null 2>"$tmp/bad.err" || rc=$?
    [ "$rc" = 64 ] && echo "PASS: status $bad: usage error ($(head -1 "$tmp/bad.err"))" || fail "status $bad: exit $rc"
done
rc=0
"$zklock" status -r -c "$connect" "$base/missing" >/dev/null 2>"$tmp/missing.err" || rc=$?
[ "$rc" = 76 ] && grep -q "no node\|not exist\|NoNode" "$tmp/missing.err" &&
    echo "PASS: a missing root: exit 76 ($(cat "$tmp/missing.err"))" || { fail "missing root: exit $rc"; cat "$tmp/missing.err"; }

if [ "$failures" -ne 0 ]; then
    echo "deadlock_scan: $failures failure(s)"
    exit 1
fi
echo "deadlock_scan: all passed ($(elapsed))"
