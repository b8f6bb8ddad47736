#!/usr/bin/env bash
# How the cost of zkcoro's locks grows as the work grows (issue 36), on the standalone server and on
# a three-member ensemble, each started here on loopback (tools/zkserver), and on Redis. Every task has a node of
# its own (local handoff off), so that the queues in ZooKeeper are as long as the tasks are many:
#   waiters    N tasks (1 ... 10 000) in 1, 4 and 16 processes on one lock, each acquiring it R
#              times and queueing again at once; the first process holds the lock while the tasks
#              enter, so that the queue is N long when the handoffs begin;
#   locks      50 tasks on L lock paths (10 ... 100 000), one chosen at random per acquisition,
#              for a fixed time: throughput, client memory, the server's znodes and watches;
#   processes  1 ... 16 processes of 4 tasks on one lock and on 1 000 locks, for a fixed time:
#              handoffs per second and each process's share (fairness);
#   memory     (standalone only) 1 000 ... 100 000 tasks of one process waiting on one lock with
#              the library's default local handoff (one node for the process): the client's
#              memory per waiting task (bytes_per_waiting_task);
#   reads      6 clients, client i on member i mod M only, scanning a tree of 1 000 lock paths
#              (zkcoro::async_scan, as zklock status -r) for a fixed time: scans a second, and
#              the scans each member served.
# The topologies: standalone, a three-member ensemble, the ensemble with a fourth member as an
# observer (processes and reads only: the acquisition mix, and reads spread over four members),
# and Redis.
# The same on a redis-server (servers=redis: zkcoro::redis_mutex, up to 1 000 waiters: Redis keeps
# no queue, so every waiter tries again at each release), with the server's commands counted.
#
#   bash bench/scale.sh            the full curves (about 20 minutes on 2 cores)
#   bash bench/scale.sh --quick    tiny sizes: a smoke test (the test command runs it), not figures
#   --curves waiters,memory        only these curves (default: all); --topologies ensemble,observer:
#                                  only these topologies (standalone, ensemble, observer, redis)
#
# Writes bench/out/scale.txt (one RESULT line a point) and bench/out/scale.svg (log-log, gnuplot).
# Per acquisition, from the processes' own counts (bench/scale_bench.cpp):
#   requests_per_acq      requests sent to ZooKeeper (herd avoidance: flat as N grows)
#   bytes_in_per_acq      bytes received: mostly the queue listings, which grow with N
#   watch_events_per_acq  watch events received (1: only the waiter behind a release is woken)
#   cpu_us_per_acq        client CPU (user + system of every process)
#   p50_us, p99_us        handoff: a release to the next grant of the lock, across the processes
# and per point: handoffs_per_s, share_min/share_max (of the acquisitions, per process),
# rss_kb_per_process, and the server's peak znodes and watches (mntr, bench/zk_mntr.py).
# The merge (bench/scale_merge.py) checks that no two holds of one lock, in any processes,
# overlap (CLOCK_MONOTONIC is one clock for the machine), and that every acquisition was made.
#
# Environment: BUILD_DIR (default build-rel; created with --buildtype=release when missing).
set -euo pipefail

quick=0
for arg in "$@"; do
    case "$arg" in
        --quick) quick=1 ;;
        -h|--help) sed -n '2,41p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        --curves=*) only_curves=${arg#*=} ;;
        --topologies=*) only_topologies=${arg#*=} ;;
        *) echo "bench/scale.sh: unknown argument '$arg' (usage: bash bench/scale.sh [--quick]" \
                "[--curves=LIST] [--topologies=LIST])" >&2; exit 2 ;;
    esac
done
# keep LIST ALLOWED KIND: the words of LIST (comma-separated), each checked to be in ALLOWED.
keep() {
    local w out=
    for w in ${1//,/ }; do
        [[ " $2 " == *" $w "* ]] || { echo "bench/scale.sh: unknown $3 '$w' (one of: $2)" >&2; exit 2; }
        out+="$w "
    done
    [[ -n $out ]] || { echo "bench/scale.sh: no $3 given" >&2; exit 2; }
    echo "${out% }"
}
curves="waiters locks processes memory reads"
[[ -z ${only_curves+x} ]] || curves=$(keep "$only_curves" "$curves" curve)

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck source=bench/build_dir.sh
. bench/build_dir.sh
ninja -C "$build" bench/zkcoro-scale-bench bench/zkcoro-scan-bench tools/zkserver/zkcoro-with-server
bench=$build/bench/zkcoro-scale-bench
scan=$build/bench/zkcoro-scan-bench
with_server=$build/tools/zkserver/zkcoro-with-server

if (( quick )); then
    # Each kind of point once or twice, each start 300 ms away: about 25 s with the servers' starts.
    sizes="1 40" procs="1 2" topologies="standalone redis" rounds=2 lead_ms=300
    lock_counts="100" lock_ms=400 proc_counts="2" proc_ms=400 memory_sizes="1000" read_ms=300
else
    sizes="1 10 100 1000 10000" procs="1 4 16" topologies="standalone ensemble observer redis" rounds=2
    lock_counts="10 100 1000 10000 100000" lock_ms=5000 proc_counts="1 2 4 8 16" proc_ms=5000
    memory_sizes="1000 10000 100000" read_ms=5000 lead_ms=1500
fi
[[ -z ${only_topologies+x} ]] || topologies=$(keep "$only_topologies" "standalone ensemble observer redis" topology)
with_redis=$build/tests/support/redis/zkcoro-with-redis
if [[ $topologies == *redis* ]] && ! { ninja -C "$build" tests/support/redis/zkcoro-with-redis >/dev/null 2>&1 &&
                                      [[ -x $with_redis ]] && command -v redis-cli >/dev/null; }; then
    echo "bench/scale.sh: no Redis curves: zkcoro-with-redis or redis-cli is missing (-Dredis, redis-server)" >&2
    topologies=${topologies/redis/}
fi

out=$(mktemp -d "${TMPDIR:-/tmp}/zkcoro-scale.XXXXXX")
trap 'rm -rf "$out"' EXIT
mkdir -p bench/out
results=bench/out/scale.txt
: > "$results.tmp"

# Runs under zkcoro-with-server, which sets ZK_CONNECT. One point: P processes started together,
# the server sampled meanwhile; their PART lines, hold files and the server's peaks merged into one
# RESULT line, appended to the results.
inner='
    set -euo pipefail
    bench=$1 out=$2 results=$3 root=$4 servers=$5
    sizes=$6 procs=$7 rounds=$8 lock_counts=$9 lock_ms=${10} proc_counts=${11} proc_ms=${12}
    memory_sizes=${13} scan=${14} read_ms=${15} lead_ms=${16} curves=${17}
    [[ " $curves " == *" waiters "* ]] || sizes=
    [[ " $curves " == *" locks "* ]] || lock_counts=
    [[ " $curves " == *" processes "* ]] || proc_counts=
    [[ " $curves " == *" memory "* ]] || memory_sizes=
    extra=()  # more options for every process of a point
    # Redis (servers=redis): the same tasks on zkcoro::redis_mutex; the server counts the commands.
    redis_commands() {
        local hostport=${ZKCORO_TEST_REDIS#redis://}
        hostport=${hostport##*@}
        redis-cli -h "${hostport%:*}" -p "${hostport##*:}" INFO stats | tr -d "\r" \
            | sed -n "s/^total_commands_processed://p"
    }
    point() {  # curve processes tasks-per-process locks rounds duration-ms labels
        local curve=$1 p=$2 per=$3 locks=$4 r=$5 ms=$6 labels=$7
        local start dir i pid rc=0 sampler= pids=() backend=() before=0 entry=2000
        # Tasks enter 2000 a second over all processes; 250 into a queue of 10 000: 2000 had the
        # server (the harness gives it a 256 MB heap) stop answering with 4 processes.
        (( p * per < 10000 )) || entry=250
        [[ $curve != memory ]] || entry=1000000  # they wait in the process: the server sees one node
        dir=$out/s$servers-$curve-$(echo "$labels" | tr " =" "_-")
        mkdir -p "$dir"
        start=$(( $(date +%s%3N) + lead_ms + 50 * p ))  # every process up before it
        if [[ $servers == redis ]]; then
            backend=(--redis "$ZKCORO_TEST_REDIS")
            before=$(redis_commands)
        else
            python3 "$root/bench/zk_mntr.py" "$ZK_CONNECT" > "$dir/server.txt" &
            sampler=$!
        fi
        for i in $(seq 1 "$p"); do
            # The queue of the waiters fills first: the first process holds the lock while every task enters.
            local gate=0
            [[ $curve != waiters || $i != 1 ]] || gate=$(( p * per * 1000 / entry + 1500 ))
            [[ $curve != memory ]] || gate=$(( per / 10 + 1500 ))
            "$bench" "${backend[@]}" "${extra[@]}" --gate-ms "$gate" --path "/zkcoro-scale/$curve-$locks-$p-$per" --tasks "$per" --rounds "$r" \
                --locks "$locks" --duration-ms "$ms" --entry-per-s $(( entry / p )) --start-at-ms "$start" --id "p$i" \
                --events "$dir/holds-$i.txt" --time-limit 900 > "$dir/part-$i.txt" &
            pids+=($!)
        done
        for pid in "${pids[@]}"; do wait "$pid" || rc=$?; done
        if [[ -n $sampler ]]; then
            kill -TERM "$sampler" 2>/dev/null || true
            wait "$sampler" || true
        else  # less the two INFO queries
            echo "server_commands=$(( $(redis_commands) - before - 1 ))" > "$dir/server.txt"
        fi
        if (( rc )); then
            echo "bench/scale.sh: a process of the point $curve $labels failed (exit $rc)" >&2
            cat "$dir"/part-*.txt >&2
            exit "$rc"
        fi
        python3 "$root/bench/scale_merge.py" "$curve" "$dir" "servers=$servers $labels" "$(cat "$dir/server.txt")" \
            | tee -a "$results"
    }
    if [[ $servers == 3+1obs ]]; then  # the observer topology: the acquisition mix and the reads
        lock_counts= sizes= memory_sizes=
        proc_counts=$(echo "$proc_counts" | tr " " "\n" | grep -xE "1|4|16" | tr "\n" " ")
    fi
    [[ $servers == 1 ]] || memory_sizes=
    for n in $sizes; do
        for p in $procs; do
            (( p <= n )) || continue
            # Redis keeps no queue: every waiter tries again at each release, N x N commands.
            [[ $servers != redis ]] || (( n <= 1000 )) || continue
            # The largest queue is drained in one round: two would send twice 10 000 x 10 000 names.
            r=$rounds
            (( n < 10000 )) || r=1
            point waiters "$p" $(( n / p )) 1 "$r" 0 "processes=$p waiters=$n rounds=$r"
        done
    done
    for l in $lock_counts; do
        point locks 1 50 "$l" 1 "$lock_ms" "processes=1 tasks=50 locks=$l"
    done
    for locks in 1 1000; do
        for p in $proc_counts; do
            point processes "$p" 4 "$locks" 1 "$proc_ms" "processes=$p tasks=$(( 4 * p )) locks=$locks"
        done
    done
    extra=(--local-handoff)
    for n in $memory_sizes; do
        point memory 1 "$n" 1 1 0 "processes=1 waiters=$n local_handoff=1"
    done
    extra=()
    if [[ $servers != redis && " $curves " == *" reads "* ]]; then
        "$scan" --locks 1000 --in-flight 8 --readers 6 --duration-ms "$read_ms" > "$out/reads-$servers.txt" || {
            echo "bench/scale.sh: the reads point failed" >&2; cat "$out/reads-$servers.txt" >&2; exit 1; }
        sed -n "s/^RESULT curve=reads /RESULT curve=reads backend=zookeeper servers=$servers /p" "$out/reads-$servers.txt" \
            | tee -a "$results"
    fi
'
for topo in $topologies; do
    case $topo in
        ensemble) runner=("$with_server" --ensemble --members 3); servers=3 ;;
        observer) runner=("$with_server" --members 4 --observers 1); servers=3+1obs ;;
        redis) runner=("$with_redis"); servers=redis ;;
        *) runner=("$with_server"); servers=1 ;;
    esac
    echo "== $topo: curves $curves (waiters $sizes in processes $procs; locks $lock_counts; processes $proc_counts; memory $memory_sizes)"
    "${runner[@]}" -- bash -c "$inner" inner "$bench" "$out" "$results.tmp" "$root" "$servers" \
        "$sizes" "$procs" "$rounds" "$lock_counts" "$lock_ms" "$proc_counts" "$proc_ms" \
        "$memory_sizes" "$scan" "$read_ms" "$lead_ms" "$curves"
done
mv "$results.tmp" "$results"
echo "== $results ($( (( quick )) && echo "quick run: a smoke test, not figures" || echo "full run"), $build)"

if command -v gnuplot >/dev/null; then
    bash bench/scale_plot.sh "$results" bench/out/scale.svg
    echo "== bench/out/scale.svg"
else
    echo "bench/scale.sh: gnuplot is missing (apt-get install gnuplot-nox): no bench/out/scale.svg" >&2
fi
