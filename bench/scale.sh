#!/usr/bin/env bash
# How the cost of one lock grows with its queue (issue 36, curve 1): N waiting tasks, spread over P
# processes, on one zkcoro::mutex, every task with a node of its own (local handoff off), each
# acquiring the lock R times and queueing again at once. On the standalone server and on a
# three-member ensemble, each started here on loopback (tools/zkserver).
#
#   bash bench/scale.sh            the full curve: 1 ... 10 000 waiters in 1, 4 and 16 processes
#   bash bench/scale.sh --quick    tiny sizes: a smoke test (the test command runs it), not figures
#
# Writes bench/out/scale.txt (one RESULT line a point) and bench/out/scale.svg (log-log, gnuplot).
# Per acquisition, from the processes' own counts (bench/scale_bench.cpp):
#   requests_per_acq      requests sent to ZooKeeper (herd avoidance: flat as N grows)
#   bytes_in_per_acq      bytes received: mostly the queue listings, which grow with N
#   watch_events_per_acq  watch events received (1: only the waiter behind a release is woken)
#   cpu_us_per_acq        client CPU (user + system of every process)
#   p50_us, p99_us        handoff: a release to the next grant, across the processes
# The merge checks that no two holds, in any processes, overlap (CLOCK_MONOTONIC is one clock for
# the machine), and that every acquisition was made.
#
# Environment: BUILD_DIR (default build-rel; created with --buildtype=release when missing).
set -euo pipefail

quick=0
for arg in "$@"; do
    case "$arg" in
        --quick) quick=1 ;;
        -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench/scale.sh: unknown argument '$arg' (usage: bash bench/scale.sh [--quick])" >&2; exit 2 ;;
    esac
done

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${BUILD_DIR:-build-rel}
if [[ ! -f "$build/build.ninja" ]]; then
    bash scripts/install-deps.sh
    meson setup "$build" --buildtype=release -Dbench=true
fi
ninja -C "$build" bench/zkcoro-scale-bench tools/zkserver/zkcoro-with-server
bench=$build/bench/zkcoro-scale-bench
with_server=$build/tools/zkserver/zkcoro-with-server

if (( quick )); then
    sizes="1 10 40" procs="1 2" topologies="standalone" rounds=2
else
    sizes="1 10 100 1000 10000" procs="1 4 16" topologies="standalone ensemble" rounds=2
fi

out=$(mktemp -d "${TMPDIR:-/tmp}/zkcoro-scale.XXXXXX")
trap 'rm -rf "$out"' EXIT
mkdir -p bench/out
results=bench/out/scale.txt
: > "$results.tmp"

# One point: P processes with N/P tasks each, started together; their PART lines and hold files
# merged into one RESULT line (appended to $results.tmp by the merge).
inner='
    set -euo pipefail
    bench=$1 out=$2 sizes=$3 procs=$4 rounds=$5 servers=$6 results=$7 root=$8
    for n in $sizes; do
        for p in $procs; do
            (( p <= n )) || continue
            per=$(( n / p ))
            # The largest queues are drained in one round: two would send N x N x 2 names.
            r=$rounds
            (( n < 10000 )) || r=1
            start=$(( $(date +%s%3N) + 1500 + 50 * p ))
            dir=$out/s$servers-n$n-p$p
            mkdir -p "$dir"
            pids=()
            for i in $(seq 1 "$p"); do
                "$bench" --path "/zkcoro-scale/n$n-p$p" --tasks "$per" --rounds "$r" --start-at-ms "$start" \
                    --id "p$i" --events "$dir/holds-$i.txt" --time-limit 900 > "$dir/part-$i.txt" &
                pids+=($!)
            done
            rc=0
            for pid in "${pids[@]}"; do wait "$pid" || rc=$?; done
            if (( rc )); then
                echo "bench/scale.sh: a process of the point waiters=$n processes=$p failed (exit $rc)" >&2
                cat "$dir"/part-*.txt >&2
                exit "$rc"
            fi
            python3 "$root/bench/scale_merge.py" "$dir" "servers=$servers processes=$p waiters=$n rounds=$r" \
                | tee -a "$results"
        done
    done
'
for topo in $topologies; do
    if [[ $topo == ensemble ]]; then args=(--ensemble --members 3); servers=3; else args=(); servers=1; fi
    echo "== $topo: waiters $sizes in processes $procs"
    "$with_server" "${args[@]}" -- bash -c "$inner" inner "$bench" "$out" "$sizes" "$procs" "$rounds" \
        "$servers" "$results.tmp" "$root"
done
mv "$results.tmp" "$results"
echo "== $results ($( (( quick )) && echo "quick run: a smoke test, not figures" || echo "full run"), $build)"

if command -v gnuplot >/dev/null; then
    bash bench/scale_plot.sh "$results" bench/out/scale.svg
    echo "== bench/out/scale.svg"
else
    echo "bench/scale.sh: gnuplot is missing (apt-get install gnuplot-nox): no bench/out/scale.svg" >&2
fi
