#!/usr/bin/env bash
# The Redis section of bench/run.sh (issue 14), also runnable on its own: starts a throwaway
# redis-server (no persistence) on a free loopback port, pinned to core 0, runs every Redis
# implementation's workloads against it with the clients pinned to core 1, and prints every
# RESULT line and a table with zkcoro's ratios and the issue's targets.
#
#   bash bench/run_redis.sh [--quick] [--cluster]   (bench/run.sh runs it after the ZooKeeper
#                                                    section, without --cluster; bench/run.sh
#                                                    --no-redis skips it)
#
# --cluster: then the workloads once more on a Redis Cluster of 3 masters without
# replicas (REDIS_CLUSTER_MASTERS=N for another number, 3 to 8), started on free loopback ports by
# `zkcoro-with-redis --cluster 3` (tests/support/redis_cluster.hpp, the cluster tests' own
# starter) and stopped by PID at the end; the masters pinned to core 0 as the one server is, the
# clients to core 1. No replicas: the single server has none either, and on 2 cores they would
# only take CPU from the masters (the acknowledged grants are measured on one server above). Its
# RESULT lines carry deployment=cluster3 after impl= (the single server's lines have no
# deployment field, as before); the table gets a section comparing the two, d (1000 keys, 50
# tasks) with issue 35's target of >= 2x the single server. zkcoro's a, b, c, d and redis-py's a,
# b, d (its RedisCluster) run there, not the hiredis floor, which speaks to one server.
#
# Environment: BUILD_DIR (default build-rel; created with --buildtype=release when missing).
# Implementations: redis_fenced (bench/redis_raw_bench.cpp: hiredis sending the library's own
# fenced acquire script and compare-and-delete release by EVALSHA, the floor of issue 33's
# targets; its copies of the scripts are checked against the library's first, by
# zkcoro-redis-script-check), redis_raw (the same program: hiredis SET NX PX + EVAL, issue 14's
# plain floor, kept beside it), redis_py (bench/redis_py_bench.py: redis-py's Lock, with
# /usr/bin/python3) and zkcoro_redis (run_zkcoro_redis below: $BUILD_DIR/bench/zkcoro-redis-bench,
# when it is built).
# Workloads: a uncontended acquire+release; b 100 tasks on one lock; c 4 processes on one lock
# (handoffs/s: holder changes between processes, counted from hold logs; the fewest acquisitions
# of one process shows starvation); d 1000 locks, 50 tasks.
#
# Why pinned: on this 2-core machine a request that crosses cores costs 3-4x one that stays on a
# core, and unpinned runs flip between the two (issue 14). Exit status 0 when skipped (with a
# message saying why), else the first failure's.
# The functions below run from a trap or in the exported client shell (bash -c redis_inner).
# shellcheck disable=SC2317
set -euo pipefail

quick=0
cluster=0
masters=${REDIS_CLUSTER_MASTERS:-3}
for arg in "$@"; do
    case "$arg" in
        --quick) quick=1 ;;
        --cluster) cluster=1 ;;
        -h|--help) echo "usage: bash bench/run_redis.sh [--quick] [--cluster]"; exit 0 ;;
        *) echo "bench/run_redis.sh: unknown argument '$arg'" >&2; exit 2 ;;
    esac
done

if (( cluster )) && ! [[ "$masters" =~ ^[3-8]$ ]]; then
    echo "bench/run_redis.sh: REDIS_CLUSTER_MASTERS must be 3 to 8, got '$masters'" >&2
    exit 2
fi
deployment=""  # empty: one server (RESULT lines without a deployment field); clusterN on the cluster

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${BUILD_DIR:-build-rel}
python=/usr/bin/python3  # Debian's: python3-redis is installed for it, not for a pyenv python3

skip() {
    echo "== Redis section SKIPPED: $*"
    exit 0
}

# --- what is there -----------------------------------------------------------------------------
command -v redis-server >/dev/null 2>&1 || skip "redis-server not found (install the Debian package redis-server)"
if [[ ! -f "$build/build.ninja" ]]; then
    meson setup "$build" --buildtype=release -Dbench=true
fi
# The Redis targets exist only when Meson found hiredis (-Dredis=auto|enabled). (The list is read
# once: `ninja ... | grep -q` would fail under pipefail when grep stops reading early.)
all_targets=$(ninja -C "$build" -t targets all 2>/dev/null) || all_targets=""
has_target() { grep -qx "$1: .*" <<< "$all_targets"; }
has_target bench/zkcoro-redis-raw-bench \
    || skip "$build has no Redis targets (hiredis missing: install libhiredis-dev, or -Dredis=disabled)"
targets=(bench/zkcoro-redis-raw-bench tests/support/redis/zkcoro-with-redis)
for t in tests/interop/interval-check bench/zkcoro-redis-bench bench/zkcoro-redis-script-check; do
    if has_target "$t"; then targets+=("$t"); fi
done
ninja -C "$build" "${targets[@]}"

with_redis=$build/tests/support/redis/zkcoro-with-redis
raw_bench=$build/bench/zkcoro-redis-raw-bench
check=$build/tests/interop/interval-check
for exe in "$with_redis" "$raw_bench"; do
    [[ -x "$exe" ]] || { echo "bench/run_redis.sh: $exe was not built" >&2; exit 1; }
done
# The fenced floor is a floor of the same work only with the library's scripts.
script_check=$build/bench/zkcoro-redis-script-check
if [[ -x "$script_check" ]]; then
    "$script_check" || { echo "bench/run_redis.sh: the fenced floor's scripts are not the library's" >&2; exit 1; }
else
    echo "bench/run_redis.sh: $script_check not built: the fenced floor's scripts are not checked" >&2
fi
have_py=1
"$python" -c 'import redis' 2>/dev/null || {
    have_py=0
    echo "bench/run_redis.sh: redis-py missing ($python -c 'import redis' failed: install python3-redis): its rows are skipped" >&2
}

# Server on core 0, clients on core 1; unpinned (and said so) where that is impossible.
pin_server=()
pin_client=()
if command -v taskset >/dev/null 2>&1 && (( $(nproc) >= 2 )); then
    pin_server=(taskset -c 0)
    pin_client=(taskset -c 1)
    pinning="server on core 0, clients on core 1"
else
    pinning="NOT pinned (taskset missing or fewer than 2 cores): figures flip between same-core and cross-core"
fi

if (( quick )); then
    raw_args=(--cycles 200 --warmup 20 --pipeline-ms 200 --duration-ms 200 --time-limit 60)
    py_args=(--cycles 100 --warmup 10 --tasks 10 --per-task 2 --duration-ms 300 --keys 100 --many-tasks 10
             --time-limit 120)
    zk_args=(--cycles 200 --warmup 20 --tasks 10 --per-task 2 --duration-ms 300 --keys 100 --many-tasks 10
             --time-limit 120)
    cross_ms=500
    cross_margin_ms=300  # c's processes start together this far ahead (a late one: figures only)
else
    raw_args=()
    py_args=()
    zk_args=()
    cross_ms=5000
    cross_margin_ms=2000
fi

out=$(mktemp -d "${TMPDIR:-/tmp}/zkcoro-redis-bench.XXXXXX")
runner_pid=""
# On any exit: end the runner (zkcoro-with-redis: it forwards TERM to the clients, then stops the
# server by its PID and reaps it) if it still runs, then remove the work directory.
finish_up() {
    if [[ -n "$runner_pid" ]] && kill -0 "$runner_pid" 2>/dev/null; then
        kill -TERM "$runner_pid" 2>/dev/null || true
        for _ in $(seq 1 100); do  # bounded: 10 s
            kill -0 "$runner_pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$runner_pid" 2>/dev/null || true
    fi
    rm -rf "$out"
}
trap finish_up EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

write_args() {  # one argument per line (an empty array gives an empty file)
    local f=$1
    shift
    : > "$f"
    if (( $# )); then printf '%s\n' "$@" > "$f"; fi
}
write_args "$out/raw.args" "${raw_args[@]}"
write_args "$out/py.args" "${py_args[@]}"
write_args "$out/zk.args" "${zk_args[@]}"

# --- the runs (under zkcoro-with-redis, which sets ZKCORO_TEST_REDIS) -----------------------------
# These functions run in the pinned client shell (exported to it). Every step runs even when an
# earlier one failed; the exit status is the first failure's.

# redis_cross IMPL CMD...: workload c: 4 processes of CMD on one key, started together; each
# writes its holds to $out/cross-IMPL/pN.log. The holds must not overlap (interval-check), and
# the RESULT line comes from redis_py_bench.py --summarize, the same count for every IMPL.
redis_cross() {
    local impl=$1
    shift
    local dir=$out/cross-$impl start pids=() i r=0
    mkdir -p "$dir"
    start=$(( $(date +%s%3N) + cross_margin_ms ))
    for i in 1 2 3 4; do
        "$@" --url "$ZKCORO_TEST_REDIS" --key "zkbench:cross:$$:$impl" --id "p$i" --log "$dir/p$i.log" \
            --start-at-ms "$start" --duration-ms "$cross_ms" > "$dir/p$i.out" &
        pids+=($!)
    done
    for i in "${!pids[@]}"; do
        wait "${pids[$i]}" || { local e=$?; (( r )) || r=$e; }
    done
    cat "$dir"/p?.out
    (( r == 0 )) || { echo "redis_cross $impl: a process failed (status $r)" >&2; return "$r"; }
    if [[ -x "$check" ]]; then
        # No --expect-ids: a lock without a queue (redis-py's) may starve a process for a while.
        "$check" --max-print 5 "$dir"/p?.log | sed 's/^/  /' \
            || { echo "redis_cross $impl: interval-check found overlapping holds (or none at all)" >&2; return 1; }
    fi
    "$python" bench/redis_py_bench.py --summarize "$impl" "$dir"/p?.log
}

# ===== zkcoro's Redis lock: the place where it plugs in =========================================
# Runs $build/bench/zkcoro-redis-bench when it is built, like the others:
#   zkcoro-redis-bench --url URL [--cycles N --warmup N --tasks T --per-task K --duration-ms MS
#                      --keys K --many-tasks T --time-limit S] --workloads uncontended,demo,many_locks
#     prints RESULT impl=zkcoro_redis workload=uncontended|demo|many_locks ops_per_s=... p50_us=...
#     p99_us=... (the format of the other benchmarks; demo: 100 tasks on one lock, counter check)
#   zkcoro-redis-bench --workloads cross_process --url URL --key KEY --id ID --log FILE
#                      --start-at-ms EPOCH_MS --duration-ms MS
#     one process of workload c: from EPOCH_MS (wall clock) for MS, acquire, log
#     "<id> X <enter_ns> <exit_ns>" (CLOCK_MONOTONIC ns: std::chrono::steady_clock), release.
run_zkcoro_redis() {
    local zk=$build/bench/zkcoro-redis-bench zk_args
    if [[ ! -x "$zk" ]]; then
        echo "== zkcoro's Redis lock: $zk not built yet: its rows are empty"
        return 0
    fi
    mapfile -t zk_args < "$out/zk.args"
    local rc=0
    echo "== zkcoro-redis-bench ${zk_args[*]}"
    "$zk" --url "$ZKCORO_TEST_REDIS" --workloads uncontended,demo,many_locks "${zk_args[@]}" \
        | tag_results | tee "$out/zkcoro.txt" || rc=$?
    echo "== cross_process: 4 zkcoro processes, ${cross_ms} ms"
    redis_cross zkcoro_redis "$zk" --workloads cross_process | tag_results | tee "$out/cross-zkcoro.txt" \
        || { (( rc )) || rc=$?; }
    return "$rc"
}

# Adds deployment=$deployment after impl= in RESULT lines (none when $deployment is empty).
tag_results() {
    if [[ -n "$deployment" ]]; then
        sed -E "s/^(RESULT impl=[^ ]+)/\1 deployment=$deployment/"
    else
        cat
    fi
}

# --cluster: zkcoro's a, b, c, d on the cluster (ZKCORO_TEST_REDIS a redis+cluster:// URL), its
# files in $out/cluster.
cluster_inner() {
    set -u
    mkdir -p "$out/cluster"
    cp "$out"/*.args "$out/cluster/"  # the same counts as on the one server (--quick's too)
    out=$out/cluster
    deployment=cluster$masters
    echo "== on the cluster: $ZKCORO_TEST_REDIS (pids $ZKCORO_TEST_REDIS_PIDS, $pinning)"
    local rc=0
    if (( have_py )); then
        local py_args
        mapfile -t py_args < "$out/py.args"
        echo "== redis_py_bench.py ${py_args[*]} (RedisCluster)"
        "$python" bench/redis_py_bench.py --url "$ZKCORO_TEST_REDIS" --workloads uncontended,demo,many_locks \
            "${py_args[@]}" | tag_results | tee "$out/py.txt" || rc=$?
    fi
    echo
    run_zkcoro_redis || { (( rc )) || rc=$?; }
    return "$rc"
}
# =================================================================================================

redis_inner() {
    set -u
    local rc=0
    note() { local r=$1; (( rc )) || rc=$r; }
    mapfile -t raw_args < "$out/raw.args"
    mapfile -t py_args < "$out/py.args"
    echo "== zkcoro-redis-raw-bench ${raw_args[*]} (server $ZKCORO_TEST_REDIS, $pinning)"
    "$raw_bench" --url "$ZKCORO_TEST_REDIS" "${raw_args[@]}" | tee "$out/raw.txt" || note $?
    if (( have_py )); then
        echo
        echo "== redis_py_bench.py ${py_args[*]}"
        "$python" bench/redis_py_bench.py --url "$ZKCORO_TEST_REDIS" --workloads uncontended,demo,many_locks \
            "${py_args[@]}" | tee "$out/py.txt" || note $?
        echo
        echo "== cross_process: 4 redis-py processes, ${cross_ms} ms"
        redis_cross redis_py "$python" bench/redis_py_bench.py --participant | tee "$out/cross-py.txt" || note $?
    fi
    echo
    run_zkcoro_redis || note $?
    return "$rc"
}

export out build python raw_bench check cross_ms cross_margin_ms have_py pinning deployment masters
export -f redis_inner redis_cross run_zkcoro_redis tag_results cluster_inner

status=0
# In the background, so that the traps run at once on a signal; waited for by PID.
"${pin_server[@]}" "$with_redis" -- "${pin_client[@]}" bash -o pipefail -c redis_inner &
runner_pid=$!
wait "$runner_pid" || status=$?
runner_pid=""

# --- replica acknowledgement (issue 22): workload a on a server with one replica, without and with
# WAIT 1 after each grant (redis_options::replica_acks); the same pinning.
zk_bench=$build/bench/zkcoro-redis-bench
if [[ -x "$zk_bench" ]]; then
    mapfile -t zk_ack_args < "$out/zk.args"
    for acks in 0 1; do
        echo
        echo "== zkcoro-redis-bench --workloads uncontended --replica-acks $acks (one replica)"
        "${pin_server[@]}" "$with_redis" --replicas 1 -- "${pin_client[@]}" "$zk_bench" --workloads uncontended \
            --replica-acks "$acks" "${zk_ack_args[@]}" | sed "s/impl=zkcoro_redis /impl=zkcoro_redis_replica /" \
            | tee -a "$out/ack.txt" || { (( status )) || status=$?; }
    done
fi

# --- the same on a Redis Cluster (--cluster) -----------------------------------------------------
if (( cluster )); then
    echo
    if [[ -x "$zk_bench" ]]; then
        echo "== Redis Cluster: $masters masters, no replicas (zkcoro-with-redis --cluster $masters)"
        "${pin_server[@]}" "$with_redis" --cluster "$masters" -- "${pin_client[@]}" bash -o pipefail -c cluster_inner &
        runner_pid=$!
        wait "$runner_pid" || { r=$?; (( status )) || status=$r; }
        runner_pid=""
    else
        echo "== Redis Cluster: $zk_bench not built: no cluster rows"
    fi
fi

# --- the table -----------------------------------------------------------------------------------
echo
echo "== Redis: all RESULT lines ($( (( quick )) && echo "quick run: smoke test only, not figures" || echo "full run"), $build, $pinning)"
cat "$out"/raw.txt "$out"/py.txt "$out"/cross-py.txt "$out"/zkcoro.txt "$out"/cross-zkcoro.txt "$out"/ack.txt \
    "$out"/cluster/py.txt "$out"/cluster/zkcoro.txt "$out"/cluster/cross-zkcoro.txt 2>/dev/null \
    | grep '^RESULT ' | tee "$out/results.txt" || true

echo
awk -v quick="$quick" -v dep="cluster$masters" '
    {
        impl = ""; w = ""; d = ""
        for (i = 2; i <= NF; ++i) {
            eq = index($i, "=")
            k = substr($i, 1, eq - 1); v = substr($i, eq + 1)
            if (k == "impl") impl = v
            else if (k == "deployment") d = v
            else if (k == "workload") w = v
            else f[k] = v
        }
        if (d != "") impl = impl "@" d  # a cluster line: its own row key, beside the one server'"'"'s
        for (k in f) r[impl, w, k] = f[k]
        delete f
        have[impl, w] = 1
    }
    function val(impl, w, k) { return ((impl, w) in have) ? r[impl, w, k] + 0 : -1 }
    function cell(x, fmt) { return x < 0 ? "-" : sprintf(fmt, x) }
    function ratio(a, b) { return (a < 0 || b <= 0) ? -1 : a / b }
    function row(what, unit, raw, zk, py, target, ok) {
        printf "%-32s %-10s %11s %11s %11s %8s %8s  %-24s %s\n", what, unit, cell(raw, "%.1f"), cell(zk, "%.1f"),
               cell(py, "%.1f"), cell(ratio(zk, raw), "%.3f"), cell(ratio(zk, py), "%.3f"), target, ok
    }
    function verdict(x, op, limit) {
        if (x < 0) return "n/a"
        if (op == "<=") return x <= limit ? "met" : "MISSED"
        return x >= limit ? "met" : "MISSED"
    }
    END {
        printf "%-32s %-10s %11s %11s %11s %8s %8s  %-24s %s\n", "workload", "figure", "floor", "zkcoro",
               "redis-py", "zk/floor", "zk/py", "target", ""
        # Issue 33: the targets are against the fenced floor; the plain one is shown for reference.
        fl = val("redis_fenced", "uncontended", "p50_us"); zk = val("zkcoro_redis", "uncontended", "p50_us")
        row("a uncontended, fenced floor", "p50 us", fl, zk, val("redis_py", "uncontended", "p50_us"),
            "<= 1.1x fenced", verdict(ratio(zk, fl), "<=", 1.1))
        row("a   same", "p99 us", val("redis_fenced", "uncontended", "p99_us"), val("zkcoro_redis", "uncontended", "p99_us"),
            val("redis_py", "uncontended", "p99_us"), "", "")
        fl = val("redis_fenced", "uncontended", "cpu_us_per_op"); zk = val("zkcoro_redis", "uncontended", "cpu_us_per_op")
        row("a   client CPU per cycle", "us", fl, zk, val("redis_py", "uncontended", "cpu_us_per_op"),
            "<= 1.3x fenced", verdict(ratio(zk, fl), "<=", 1.3))
        row("a   vs plain SET NX PX floor", "p50 us", val("redis_raw", "uncontended", "p50_us"),
            val("zkcoro_redis", "uncontended", "p50_us"), -1, "(no target)", "")
        row("a   same, CPU per cycle", "us", val("redis_raw", "uncontended", "cpu_us_per_op"),
            val("zkcoro_redis", "uncontended", "cpu_us_per_op"), -1, "", "")
        row("a   1 replica, no WAIT", "p50 us", -1, val("zkcoro_redis_replica", "uncontended", "p50_us"), -1, "", "")
        row("a   1 replica, WAIT 1 (acked)", "p50 us", -1, val("zkcoro_redis_ack1", "uncontended", "p50_us"), -1,
            "(the cost of the ack)", "")
        zk = val("zkcoro_redis", "demo", "ops_per_s"); py = val("redis_py", "demo", "ops_per_s")
        row("b 100 tasks, one lock", "acq/s", -1, zk, py, ">= 50x redis-py", verdict(ratio(zk, py), ">=", 50))
        row("c 4 processes, one lock", "handoff/s", -1, val("zkcoro_redis", "cross_process", "ops_per_s"),
            val("redis_py", "cross_process", "ops_per_s"), "(no target)", "")
        row("c   all acquisitions", "acq/s", -1, val("zkcoro_redis", "cross_process", "acquisitions_per_s"),
            val("redis_py", "cross_process", "acquisitions_per_s"), "", "")
        row("c   fewest by one process", "acq", -1, val("zkcoro_redis", "cross_process", "min_per_process"),
            val("redis_py", "cross_process", "min_per_process"), "(starvation)", "")
        fl = val("redis_fenced", "cycle_pipelined", "ops_per_s"); zk = val("zkcoro_redis", "many_locks", "ops_per_s")
        row("d 1000 locks, 50 tasks", "cycles/s", fl, zk, val("redis_py", "many_locks", "ops_per_s"),
            ">= 0.8x fenced pipelined", verdict(ratio(zk, fl), ">=", 0.8))
        row("d   vs plain floor pipelined", "cycles/s", val("redis_raw", "cycle_pipelined", "ops_per_s"), zk, -1,
            "(no target)", "")
        row("  fenced: pipelined, 64 keys", "cycles/s", val("redis_fenced", "cycle_pipelined", "ops_per_s"), -1, -1,
            "", "")
        row("  plain: pipelined, 64 keys", "cycles/s", val("redis_raw", "cycle_pipelined", "ops_per_s"), -1, -1, "", "")
        row("  plain: 1000 keys, 50 in flight", "cycles/s", val("redis_raw", "many_locks", "ops_per_s"), -1, -1, "",
            "")
        print ""
        print "floor: the fenced floor (issue 33), hiredis sending the library'"'"'s acquire script (fencing counter"
        print "max(counter + 1, TIME)) and compare-and-delete release by EVALSHA, one at a time (a) or pipelined (d: 64 keys)."
        print "plain floor (issue 14): SET NX PX + EVAL compare-and-delete; zk/floor is then against it."
        print "Counted per-cycle figures (instructions, allocations, system calls): bash bench/profile.sh."
        print "c counts holder changes between the 4 processes (from their hold logs, checked for overlap)."
        print "redis-py waits by polling (sleep 0.1 s between tries). Ratios come from this one run."
        zc = "zkcoro_redis@" dep
        if ((zc, "uncontended") in have || (zc, "many_locks") in have) {
            print ""
            printf "%-32s %-10s %11s %11s %8s  %-24s %s\n", "zkcoro (redis-py: said)", "figure", "1 server", dep, "ratio",
                   "target", ""
            crow("a uncontended", "p50 us", "uncontended", "p50_us", "", "")
            crow("a   client CPU per cycle", "us", "uncontended", "cpu_us_per_op", "", "")
            crow("b 100 tasks, one lock", "acq/s", "demo", "ops_per_s", "", "")
            crow("c 4 processes, one lock", "handoff/s", "cross_process", "ops_per_s", "", "")
            crow("d 1000 locks, 50 tasks", "cycles/s", "many_locks", "ops_per_s", ">= 2x 1 server", 2)
            crow("d   client CPU per cycle", "us", "many_locks", "cpu_us_per_op", "", "")
            crow("d   p99", "us", "many_locks", "p99_us", "", "")
            crow("d   redis-py (RedisCluster)", "cycles/s", "many_locks", "ops_per_s", "", "", "redis_py")
            crow("a   redis-py, p50", "p50 us", "uncontended", "p50_us", "", "", "redis_py")
            print "ratio: " dep " / 1 server, from this one run; the masters share core 0 as the one server does."
        }
        if (quick) print "QUICK RUN: tiny counts, a smoke test. Verdicts mean nothing here."
    }
    function crow(what, unit, w, k, target, limit, impl,    a, b, q) {
        if (impl == "") impl = "zkcoro_redis"
        a = val(impl, w, k); b = val(impl "@" dep, w, k); q = ratio(b, a)
        printf "%-32s %-10s %11s %11s %8s  %-24s %s\n", what, unit, cell(a, "%.1f"), cell(b, "%.1f"), cell(q, "%.3f"),
               target, limit == "" ? "" : verdict(q, ">=", limit)
    }' "$out/results.txt"

if (( status != 0 )); then
    echo "bench/run_redis.sh: a Redis benchmark failed (exit status $status)" >&2
fi
exit "$status"
