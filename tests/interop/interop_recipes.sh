#!/bin/bash
# Interop test of zkcoro::shared_mutex and zkcoro::semaphore against Apache Curator's
# InterProcessReadWriteLock and InterProcessSemaphoreV2 on one ZooKeeper.
#
#   zkcoro-with-server -- bash tests/interop/interop_recipes.sh BUILD_DIR
#
# Needs ZK_CONNECT (zkcoro-with-server sets it), BUILD_DIR/tests/interop/{zkcoro-holder,
# interval-check}, and javac/java with Debian's Curator jars (see build.sh).
#
# 1. Read-write lock: on ONE path for ~4 s, a Curator reader, a Curator writer, a zkcoro reader
#    process with two tasks and a zkcoro writer process hold ~15 ms each, all logging into one
#    file. interval-check must find no violation (a writer overlaps nobody, readers may overlap
#    readers) and every process/task must have acquired. Readers must also have overlapped at
#    least once (max_concurrency >= 2; with the checker passing only readers can be concurrent):
#    otherwise the lock would be a plain mutex. REQUIRE_READ_OVERLAP=0 only reports it.
#    Reader overlaps between a Curator and a zkcoro reader are counted and reported.
# 2. Semaphore with 3 leases: on ONE path for ~4 s, 2 Curator processes and 2 zkcoro processes
#    (two tasks each), one lease per hold, ~15 ms; interval-check --max-leases 3 must pass with
#    every process/task having acquired. The highest number of leases in use is reported.
#
# Every wait is bounded; only processes started here are ended (by PID). Exit 0 only if every
# check passed; 1 on a failed check; 2 on bad usage or setup trouble.
set -euo pipefail

if [ $# -ne 1 ]; then
    echo "usage: zkcoro-with-server -- bash $0 BUILD_DIR" >&2
    exit 2
fi
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
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
duration_ms=${DURATION_MS:-4000}
hold_ms=${HOLD_MS:-15}
leases=${LEASES:-3}
require_read_overlap=${REQUIRE_READ_OVERLAP:-1}

t_start=$(date +%s%N)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zkcoro-interop-recipes.XXXXXX")
started=()  # PIDs of background processes started here and not yet reaped

cleanup() {
    local pid
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
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

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

failures=0
fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}
elapsed() {
    echo "$(( ($(date +%s%N) - t_start) / 1000000 )) ms"
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
# Per-task counts and warnings (stderr) are shown too.
finish() {
    local name=$1 rc=0
    wait_pid "${pids[$name]}" "$2" || rc=$?
    local acquired
    acquired=$(sed -n 's/^acquired=//p' "$tmp/$name.out" | tail -n 1)
    echo "  $name: exit $rc, acquired=${acquired:-?}"
    grep -E 'acquired=|warning|overlapped' "$tmp/$name.err" 2>/dev/null | sed 's/^/    /' || true
    if [ "$rc" -ne 0 ] || [ -z "$acquired" ] || [ "$acquired" -lt 1 ]; then
        fail "$name (exit $rc, acquired=${acquired:-none}); its stderr:"
        sed 's/^/    /' "$tmp/$name.err"
        return 1
    fi
    return 0
}
# run_check OUTFILE ARGS...: interval-check ARGS into OUTFILE (shown indented); its exit status.
run_check() {
    local out=$1 rc=0
    shift
    "$check" --max-print 10 "$@" >"$out" 2>&1 || rc=$?
    sed 's/^/  /' "$out"
    return "$rc"
}
# reader_overlaps LOG: "<pairs> <cross>": R holds overlapping in time (positive length), and
# how many of those pairs join a Curator reader (id cur-*) with a zkcoro one (id zk-*).
reader_overlaps() {
    awk '$2 == "R" { print $3, $4, $1 }' "$1" | sort -n -k1,1 | awk '
        {
            for (i = 1; i <= n; ++i) {
                if (ex[i] > $1) {
                    ++pairs
                    if ((id[i] ~ /^cur-/ && $3 ~ /^zk-/) || (id[i] ~ /^zk-/ && $3 ~ /^cur-/)) ++cross
                }
            }
            # keep only holds that may still overlap a later one (sorted by enter)
            m = 0
            for (i = 1; i <= n; ++i) if (ex[i] > $1) { ++m; ex[m] = ex[i]; id[m] = id[i] }
            n = m + 1; ex[n] = $2; id[n] = $3
        }
        END { printf "%d %d\n", pairs, cross }'
}

declare -A pids
run_id="$(date +%s)-$$"
base="/zkcoro-interop/recipes-$run_id"
limit=$(( duration_ms / 1000 + 60 ))

echo "== interop_recipes: ZooKeeper at $connect, work dir $tmp"
echo "== building CuratorHolder"
"$here/build.sh" "$tmp/java" >"$tmp/build.log" 2>&1 || {
    cat "$tmp/build.log" >&2
    echo "$0: building CuratorHolder failed" >&2
    exit 2
}
cp=$(cat "$tmp/java/classpath.txt")

# ---------------------------------------------------------------------------------------------
echo "== 1. read-write lock on $base/rw: Curator reader + writer, zkcoro reader (2 tasks) + writer," \
     "${duration_ms} ms, hold ${hold_ms} ms"
log1="$tmp/rw.log"
: >"$log1"
common=(--path "$base/rw" --duration-ms "$duration_ms" --hold-ms "$hold_ms" --log "$log1")
start_curator cur-r "${common[@]}" --recipe read --id cur-r
start_curator cur-w "${common[@]}" --recipe write --id cur-w
start_zkcoro zk-r "${common[@]}" --recipe read --id zk-r --tasks 2
start_zkcoro zk-w "${common[@]}" --recipe write --id zk-w
rw_ok=1
for n in cur-r cur-w zk-r zk-w; do
    finish "$n" "$limit" || rw_ok=0
done
if ! run_check "$tmp/rw.check" --expect-ids cur-r,cur-w,zk-r.1,zk-r.2,zk-w "$log1"; then
    fail "read-write: interval-check reported violations or missing ids"
    rw_ok=0
fi
max_conc=$(sed -n 's/^holds=[0-9]* max_concurrency=\([0-9]*\).*/\1/p' "$tmp/rw.check")
read -r r_pairs r_cross < <(reader_overlaps "$log1")
echo "  reader overlaps: ${r_pairs} pair(s), ${r_cross} of them Curator+zkcoro; max concurrency ${max_conc:-?}"
if [ "${max_conc:-0}" -lt 2 ] || [ "$r_pairs" -lt 1 ]; then
    if [ "$require_read_overlap" = 1 ]; then
        fail "read-write: readers never overlapped (max_concurrency=${max_conc:-?}): the read side behaved like a mutex"
        rw_ok=0
    else
        echo "  NOTE: readers never overlapped (not required: REQUIRE_READ_OVERLAP=$require_read_overlap)"
    fi
fi
if [ "$rw_ok" -eq 1 ]; then
    echo "PASS: read-write: writers exclusive, readers shared, every process and task acquired ($(elapsed))"
fi

# ---------------------------------------------------------------------------------------------
echo "== 2. semaphore ($leases leases) on $base/sem: 2 Curator + 2 zkcoro processes (4 zkcoro tasks)," \
     "${duration_ms} ms, hold ${hold_ms} ms"
log2="$tmp/sem.log"
: >"$log2"
common=(--path "$base/sem" --recipe semaphore --leases "$leases" --duration-ms "$duration_ms"
        --hold-ms "$hold_ms" --log "$log2")
start_curator cur-s1 "${common[@]}" --id cur-s1
start_curator cur-s2 "${common[@]}" --id cur-s2
start_zkcoro zk-s1 "${common[@]}" --id zk-s1 --tasks 2
start_zkcoro zk-s2 "${common[@]}" --id zk-s2 --tasks 2
sem_ok=1
for n in cur-s1 cur-s2 zk-s1 zk-s2; do
    finish "$n" "$limit" || sem_ok=0
done
if ! run_check "$tmp/sem.check" --max-leases "$leases" \
        --expect-ids cur-s1,cur-s2,zk-s1.1,zk-s1.2,zk-s2.1,zk-s2.2 "$log2"; then
    fail "semaphore: interval-check reported more than $leases leases at once or missing ids"
    sem_ok=0
fi
max_conc=$(sed -n 's/^holds=[0-9]* max_concurrency=\([0-9]*\).*/\1/p' "$tmp/sem.check")
echo "  most leases in use at once: ${max_conc:-?} of $leases"
if [ "$sem_ok" -eq 1 ]; then
    echo "PASS: semaphore: at most $leases leases at once, every process and task acquired ($(elapsed))"
fi

echo "== interop_recipes: $failures failure(s) in $(elapsed)"
[ "$failures" -eq 0 ]
