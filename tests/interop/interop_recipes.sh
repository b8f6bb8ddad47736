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
#    every process/task having acquired. At least 2 leases must have been in use at once
#    (max_concurrency >= 2): otherwise the semaphore would be a plain mutex.
#
# Every wait is bounded; only processes started here are ended (by PID). Exit 0 only if every
# check passed; 1 on a failed check; 2 on bad usage or setup trouble.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
source "$here/common.sh"
interop_setup zkcoro-interop-recipes "$@"
duration_ms=${DURATION_MS:-4000}
hold_ms=${HOLD_MS:-15}
leases=${LEASES:-3}
require_read_overlap=${REQUIRE_READ_OVERLAP:-1}
finish_shows_notes=1  # finish shows the holders' per-task counts and warnings

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

base="/zkcoro-interop/recipes-$run_id"
limit=$(( duration_ms / 1000 + 60 ))

echo "== interop_recipes: ZooKeeper at $connect, work dir $tmp"
build_curator_holder

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
if [ -z "$max_conc" ] || [ "$max_conc" -lt 2 ]; then
    fail "semaphore: never 2 leases in use at once (max_concurrency=${max_conc:-?}): it behaved like a mutex"
    sem_ok=0
fi
if [ "$sem_ok" -eq 1 ]; then
    echo "PASS: semaphore: at most $leases leases at once, at least 2 shared, every process and task acquired ($(elapsed))"
fi

echo "== interop_recipes: $failures failure(s) in $(elapsed)"
[ "$failures" -eq 0 ]
