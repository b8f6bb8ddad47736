#!/usr/bin/env bash
# Builds the benchmarks, starts a throwaway ZooKeeper server, runs zkcoro-cycle-bench and then
# zkcoro-lock-bench against it, and prints a summary table of their RESULT lines.
#
#   bash bench/run.sh            full run
#   bash bench/run.sh --quick    tiny counts (CI smoke test)
#
# Environment: BUILD_DIR (default build-rel; created with --buildtype=release when missing).
set -euo pipefail

usage() {
    echo "usage: bash bench/run.sh [--quick]" >&2
}

quick=0
for arg in "$@"; do
    case "$arg" in
        --quick) quick=1 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "bench/run.sh: unknown argument '$arg'" >&2; usage; exit 2 ;;
    esac
done

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${BUILD_DIR:-build-rel}

# --- build -------------------------------------------------------------------------------------
bash scripts/install-deps.sh
if [[ ! -f "$build/build.ninja" ]]; then
    meson setup "$build" --buildtype=release -Dbench=true
fi
ninja -C "$build" bench/zkcoro-cycle-bench bench/zkcoro-lock-bench tests/support/zkcoro-with-server

with_server=$build/tests/support/zkcoro-with-server
cycle_bench=$build/bench/zkcoro-cycle-bench
lock_bench=$build/bench/zkcoro-lock-bench
for exe in "$with_server" "$cycle_bench" "$lock_bench"; do
    [[ -x "$exe" ]] || { echo "bench/run.sh: $exe was not built (are tests enabled in $build?)" >&2; exit 1; }
done

if (( quick )); then
    cycle_args=(--cycles 50 --warmup 10 --rounds 2 --time-limit 60)
    lock_args=(--cycles 50 --tasks 10 --per-task 2 --time-limit 60)
else
    cycle_args=()
    lock_args=()
fi

# --- run both against one server ---------------------------------------------------------------
out=$(mktemp -d "${TMPDIR:-/tmp}/zkcoro-bench.XXXXXX")
trap 'rm -rf "$out"' EXIT

# The inner script runs under zkcoro-with-server, which sets ZK_CONNECT; it runs the lock bench
# even when the cycle bench failed, and exits non-zero if either did.
inner='
    cycle=$1 lock=$2 out=$3 ncycle=$4
    shift 4
    cycle_args=("${@:1:ncycle}")
    lock_args=("${@:ncycle+1}")
    rc=0
    echo "== zkcoro-cycle-bench ${cycle_args[*]} (server $ZK_CONNECT)"
    "$cycle" "${cycle_args[@]}" | tee "$out/cycle.txt" || rc=$?
    echo
    echo "== zkcoro-lock-bench ${lock_args[*]} (server $ZK_CONNECT)"
    "$lock" "${lock_args[@]}" | tee "$out/lock.txt" || { r=$?; (( rc )) || rc=$r; }
    exit $rc
'
status=0
"$with_server" -- bash -o pipefail -c "$inner" inner \
    "$cycle_bench" "$lock_bench" "$out" "${#cycle_args[@]}" "${cycle_args[@]}" "${lock_args[@]}" || status=$?

# --- summary ---------------------------------------------------------------------------------
echo
echo "== summary ($( (( quick )) && echo quick || echo full ) run, $build)"
cat "$out"/cycle.txt "$out"/lock.txt 2>/dev/null | grep '^RESULT ' | awk '
    {
        delete f
        for (i = 2; i <= NF; ++i) {
            eq = index($i, "=")
            if (eq > 0) f[substr($i, 1, eq - 1)] = substr($i, eq + 1)
        }
        rows[++n] = sprintf("%-18s %-8s %12.1f %10.1f %10.1f", f["workload"], f["impl"], f["ops_per_s"], f["p50_us"], f["p99_us"])
        if (f["workload"] == "cycle" && f["impl"] == "raw") raw_p50 = f["p50_us"]
        if (f["workload"] == "uncontended" && f["impl"] == "zkcoro") unc_p50 = f["p50_us"]
    }
    END {
        printf "%-18s %-8s %12s %10s %10s\n", "workload", "impl", "ops/s", "p50 us", "p99 us"
        for (i = 1; i <= n; ++i) print rows[i]
        if (raw_p50 > 0 && unc_p50 != "")
            printf "\nzkcoro uncontended acquire+release p50 / raw sequential cycle p50: %.1f / %.1f = %.3f\n", unc_p50, raw_p50, unc_p50 / raw_p50
        else
            print "\nratio unavailable: a RESULT line is missing"
        print "(cycle: create+get_children+delete, ops/s = cycles/s; uncontended: acquire+release cycles/s;"
        print " demo*: acquisitions/s, p50/p99 = wait from acquire() to the grant)"
    }'
if (( status != 0 )); then
    echo "bench/run.sh: a benchmark failed (exit status $status)" >&2
fi
exit "$status"
