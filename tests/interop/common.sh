# shellcheck shell=bash
# Code shared by the interop tests (interop_mutex.sh, interop_recipes.sh). They run under
# `set -euo pipefail` and source this file by its path next to them:
#
#   here=$(cd "$(dirname "$0")" && pwd)
#   source "$here/common.sh"
#   interop_setup zkcoro-interop "$@"
#
# Every wait is bounded; only processes started here are ended (by PID). Messages name the
# sourcing script ($0).

# interop_setup TMP_PREFIX ARGS...: checks the usage (ARGS must be BUILD_DIR), ZK_CONNECT and the
# built programs, exiting 2 on trouble; then sets build, connect, holder, check, java_bin,
# t_start, failures, pids, started and run_id, creates the work directory tmp
# (${TMPDIR:-/tmp}/TMP_PREFIX.XXXXXX) and installs the cleanup traps.
interop_setup() {
    local prefix=$1 p
    shift
    if [ $# -ne 1 ]; then
        echo "usage: zkcoro-with-server -- bash $0 BUILD_DIR" >&2
        exit 2
    fi
    build=$(cd "$1" && pwd)
    connect=${ZK_CONNECT:-}
    if [ -z "$connect" ]; then
        echo "$0: ZK_CONNECT is not set: run me under zkcoro-with-server" >&2
        exit 2
    fi
    holder="$build/tests/interop/zkcoro-holder"
    check="$build/tests/interop/interval-check"
    java_bin=${JAVA:-java}
    for p in "$holder" "$check"; do
        if [ ! -x "$p" ]; then
            echo "$0: missing $p (build it with ninja -C $build)" >&2
            exit 2
        fi
    done

    t_start=$(date +%s%N)
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/$prefix.XXXXXX")
    started=()  # PIDs of background processes started here and not yet reaped
    trap cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM

    failures=0
    declare -gA pids=()  # NAME -> PID, filled by start_curator and start_zkcoro
    # shellcheck disable=SC2034  # used by the sourcing scripts
    run_id="$(date +%s)-$$"
}

# cleanup: the EXIT trap: ends (TERM, bounded wait) what is still running, then removes $tmp
# (kept and reported when KEEP_TMP is set). Only in the script's own shell: a job started with &
# is a forked copy of it until its exec, and one signalled in that moment runs the TERM and EXIT
# traps too (bash 5.2). The test guards the work (`if [ "$BASHPID" = "$$" ]`), never skips it
# (`[ "$BASHPID" != "$$" ] && return`): in that copy an error of bash's own ("wait_for: No record
# of process") turned the test's status false.
cleanup() {
    local pid
    if [ "$BASHPID" = "$$" ]; then
        for pid in "${started[@]}"; do
            if kill -0 "$pid" 2>/dev/null; then
                kill -TERM "$pid" 2>/dev/null || true
            fi
        done
        for pid in "${started[@]}"; do
            wait_pid "$pid" 5 >/dev/null 2>&1 || true
        done
        if [ -n "${KEEP_TMP:-}" ]; then
            echo "kept $tmp" >&2
        else
            rm -rf "$tmp"
        fi
    fi
}

forget() {  # forget PID: drop it from started[] once reaped
    local keep=() p
    for p in "${started[@]}"; do
        [ "$p" = "$1" ] || keep+=("$p")
    done
    started=("${keep[@]+"${keep[@]}"}")
}

# wait_pid PID SECONDS: waits at most SECONDS for PID to end (TERM, then KILL after it),
# reaps it and returns its exit status (124 when it had to be ended).
wait_pid() {
    local pid=$1 limit=$2 rc=0 timed_out=0
    local deadline=$(( $(date +%s%N) + limit * 1000000000 ))
    while kill -0 "$pid" 2>/dev/null; do
        if [ "$(date +%s%N)" -ge "$deadline" ]; then
            timed_out=1
            echo "$0: process $pid still running after ${limit}s: ending it" >&2
            kill -TERM "$pid" 2>/dev/null || true
            for _ in $(seq 1 30); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.1
            done
            kill -KILL "$pid" 2>/dev/null || true
            break
        fi
        sleep 0.05
    done
    wait "$pid" || rc=$?
    forget "$pid"
    [ "$timed_out" -eq 0 ] || rc=124
    return "$rc"
}

fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}
elapsed() {
    echo "$(( ($(date +%s%N) - t_start) / 1000000 )) ms"
}

# build_curator_holder: builds CuratorHolder into $tmp/java (exit 2 on failure) and sets cp.
# shellcheck disable=SC2154  # here: this directory, set by the sourcing script
build_curator_holder() {
    echo "== building CuratorHolder"
    "$here/build.sh" "$tmp/java" >"$tmp/build.log" 2>&1 || {
        cat "$tmp/build.log" >&2
        echo "$0: building CuratorHolder failed" >&2
        exit 2
    }
    cp=$(cat "$tmp/java/classpath.txt")
}

# start_curator NAME ARGS...: CuratorHolder in the background, output in $tmp/NAME.{out,err}
start_curator() {
    local name=$1
    shift
    "$java_bin" -cp "$cp" CuratorHolder --connect "$connect" "$@" \
        >"$tmp/$name.out" 2>"$tmp/$name.err" &
    pids[$name]=$!
    started+=("$!")
}
# start_zkcoro NAME ARGS...: zkcoro-holder in the background
start_zkcoro() {
    local name=$1
    shift
    "$holder" --connect "$connect" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    pids[$name]=$!
    started+=("$!")
}

# finish NAME SECONDS: waits for NAME; fails unless it exited 0 having acquired at least once.
# With finish_shows_notes=1, per-task counts and warnings (stderr) are shown too.
finish_shows_notes=0
finish() {
    local name=$1 rc=0
    wait_pid "${pids[$name]}" "$2" || rc=$?
    local acquired
    acquired=$(sed -n 's/^acquired=//p' "$tmp/$name.out" | tail -n 1)
    echo "  $name: exit $rc, acquired=${acquired:-?}"
    if [ "$finish_shows_notes" -eq 1 ]; then
        grep -E 'acquired=|warning|overlapped' "$tmp/$name.err" 2>/dev/null | sed 's/^/    /' || true
    fi
    if [ "$rc" -ne 0 ] || [ -z "$acquired" ] || [ "$acquired" -lt 1 ]; then
        fail "$name (exit $rc, acquired=${acquired:-none}); its stderr:"
        sed 's/^/    /' "$tmp/$name.err"
        return 1
    fi
    return 0
}
