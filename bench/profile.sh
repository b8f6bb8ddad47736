#!/usr/bin/env bash
# Client cost per cycle, counted rather than timed: instructions (valgrind --tool=callgrind,
# deterministic), allocations (heaptrack) and system calls (strace -c -f), for the kinds
#   raw                 the raw ZooKeeper C client's create + get_children + delete cycle,
#   raw_watch           the same plus an exists watch on its own node after the create (both with
#                       nodes named as zkcoro::mutex names its own, "_c_<uuid>-lock-N"): the floor
#                       of zkcoro::mutex (issue 33),
#   client              zkcoro::client doing the raw cycle,
#   mutex               zkcoro::mutex acquire + release, uncontended,
#   redis_fenced_floor  hiredis sending the Redis lock's own fenced acquire script and release
#                       script (bench/redis_raw_bench.cpp --floors fenced): redis_mutex's floor,
#   redis_mutex         zkcoro::redis_mutex acquire + release, uncontended.
# Each figure is a difference of two runs (N1 and N2 cycles) divided by N2 - N1, so start-up and
# shutdown cancel out. The zkcoro-cycle-bench run with --only zkcoro does a client cycle and a
# mutex cycle per count; the lock benchmark's uncontended workload does mutex cycles alone; the
# client figure is the difference.
#
#   bash bench/profile.sh [BUILD_DIR ...]      (default build-rel; one column per build dir)
#
# Prints a table (one column per build dir), then one machine-readable line per build and kind,
#   PROFILE kind=<raw|raw_watch|client|mutex|redis_fenced_floor|redis_mutex> instructions=N allocations=N syscalls=N
# (with " build=DIR" at the end when more than one build dir is given), then issue 33's targets
# for the counted figures of each build. Environment: N1, N2 (default 100, 600); KINDS, a
# space-separated subset of the kinds above (default all; client needs mutex). The Redis kinds
# run only when redis-server is found and every build dir has the Redis benchmarks, else the run
# says why they are left out.
#
# Needs valgrind, heaptrack and strace (Debian packages of those names). Runs against a throwaway
# ZooKeeper started by BUILD_DIR/tools/zkserver/zkcoro-with-server and, for the Redis kinds, a
# throwaway redis-server started by BUILD_DIR/tests/support/redis/zkcoro-with-redis (the first
# build dir's).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
builds=("$@")
(( ${#builds[@]} )) || builds=("$root/build-rel")
all_kinds="raw raw_watch client mutex redis_fenced_floor redis_mutex"
kinds=${KINDS:-$all_kinds}
for k in $kinds; do
    [[ " $all_kinds " == *" $k "* ]] || { echo "bench/profile.sh: unknown kind '$k' in KINDS (kinds: $all_kinds)" >&2; exit 2; }
done
if [[ " $kinds " == *" client "* && " $kinds " != *" mutex "* ]]; then
    echo "bench/profile.sh: KINDS: client is measured as (client + mutex) - mutex: name mutex too" >&2
    exit 2
fi
for b in "${builds[@]}"; do
    for exe in bench/zkcoro-cycle-bench bench/zkcoro-lock-bench tools/zkserver/zkcoro-with-server; do
        [[ -x "$b/$exe" ]] || { echo "bench/profile.sh: missing $b/$exe (ninja -C $b $exe)" >&2; exit 2; }
    done
done
for tool in valgrind heaptrack heaptrack_print strace; do
    command -v "$tool" >/dev/null || { echo "bench/profile.sh: $tool is missing" >&2; exit 2; }
done
N1=${N1:-100}
N2=${N2:-600}
[[ "$N1" =~ ^[0-9]+$ && "$N2" =~ ^[0-9]+$ ]] && (( N2 > N1 )) \
    || { echo "bench/profile.sh: N1 and N2 must be whole numbers with N2 > N1 (N1=$N1 N2=$N2)" >&2; exit 2; }

# The Redis kinds: all or none.
redis_kinds=0
if [[ " $kinds " == *" redis_"* ]]; then
    why=""
    command -v redis-server >/dev/null 2>&1 || why="redis-server not found"
    for b in "${builds[@]}"; do
        for exe in bench/zkcoro-redis-raw-bench bench/zkcoro-redis-bench tests/support/redis/zkcoro-with-redis; do
            [[ -n "$why" || -x "$b/$exe" ]] || why="missing $b/$exe (ninja -C $b $exe)"
        done
    done
    if [[ -n "$why" ]]; then
        echo "bench/profile.sh: the Redis kinds are left out: $why" >&2
        kinds=$(tr ' ' '\n' <<< "$kinds" | grep -v '^redis_' | tr '\n' ' ')
    else
        redis_kinds=1
    fi
fi

inner='
    set -euo pipefail
    N1=$1 N2=$2 kinds=$3
    shift 3
    work=$(mktemp -d "${TMPDIR:-/tmp}/zkcoro-profile.XXXXXX")
    trap "rm -rf \"$work\"" EXIT
    # cmd RUN N BUILD: the command line of one run of N cycles. RUN is a kind, or zk (client and
    # mutex cycles, from which the client kind is computed).
    cmd() {
        local run=$1 n=$2 b=$3
        case $run in
            raw|raw_watch) echo "$b/bench/zkcoro-cycle-bench --only $run --cycles $n --warmup 20 --rounds 1 --pipeline-ms 0 --time-limit 600" ;;
            zk) echo "$b/bench/zkcoro-cycle-bench --only zkcoro --cycles $n --warmup 20 --rounds 1 --pipeline-ms 0 --time-limit 600" ;;
            mutex) echo "$b/bench/zkcoro-lock-bench --workloads uncontended --cycles $n --warmup 20 --time-limit 600" ;;
            redis_fenced_floor) echo "$b/bench/zkcoro-redis-raw-bench --url $ZKCORO_TEST_REDIS --floors fenced --workloads uncontended --cycles $n --warmup 20 --time-limit 600" ;;
            redis_mutex) echo "$b/bench/zkcoro-redis-bench --url $ZKCORO_TEST_REDIS --workloads uncontended --cycles $n --warmup 20 --time-limit 600" ;;
        esac
    }
    # Each measurement fails the run when its program does (a figure of a failed run means nothing).
    instructions() {  # total instructions of every thread of one run
        local out=$work/cg.out
        rm -f "$out"*
        valgrind --tool=callgrind --callgrind-out-file="$out" $(cmd "$@") >/dev/null 2>"$work/vg.err" \
            || { echo "bench/profile.sh: under callgrind, failed: $(cmd "$@")" >&2; tail -n 5 "$work/vg.err" >&2; return 1; }
        local total=0 f
        for f in "$out"*; do
            total=$(( total + $(awk "/^summary:|^totals:/ { print \$2; exit }" "$f") ))
        done
        echo "$total"
    }
    allocations() {
        local out=$work/ht
        rm -f "$out"*
        heaptrack -o "$out" $(cmd "$@") >"$work/heaptrack.log" 2>&1 \
            || { echo "bench/profile.sh: under heaptrack, failed: $(cmd "$@")" >&2; tail -n 5 "$work/heaptrack.log" >&2; return 1; }
        heaptrack_print "$out".* 2>/dev/null | awk "/^calls to allocation functions:/ { print \$5; exit }"
    }
    syscalls() {
        strace -f -c -o "$work/st.txt" $(cmd "$@") >"$work/st.log" 2>&1 \
            || { echo "bench/profile.sh: under strace, failed: $(cmd "$@")" >&2; tail -n 5 "$work/st.log" >&2; return 1; }
        # The total line: "100.00 seconds usecs/call calls [errors] total".
        awk "\$NF == \"total\" { print \$4; exit }" "$work/st.txt"
    }
    per_cycle() {  # METRIC RUN BUILD: (value(N2) - value(N1)) / (N2 - N1)
        local a b
        a=$($1 "$2" "$N1" "$3") && b=$($1 "$2" "$N2" "$3") && [[ -n "$a" && -n "$b" ]] \
            || { echo "bench/profile.sh: no $1 figure for $2 ($3)" >&2; return 1; }
        awk -v a="$a" -v b="$b" -v n1="$N1" -v n2="$N2" "BEGIN { printf \"%.1f\", (b - a) / (n2 - n1) }"
    }
    has() { [[ " $kinds " == *" $1 "* ]]; }
    # The figures: $work/v-<build index>-<kind>-<metric>.
    bi=0
    for b in "$@"; do
        bi=$(( bi + 1 ))
        for metric in instructions allocations syscalls; do
            for kind in raw raw_watch mutex redis_fenced_floor redis_mutex; do
                has "$kind" || continue
                per_cycle "$metric" "$kind" "$b" > "$work/v-$bi-$kind-$metric"
            done
            if has client; then  # client + mutex cycles, less the mutex cycle
                v=$(per_cycle "$metric" zk "$b")
                awk -v a="$v" -v m="$(cat "$work/v-$bi-mutex-$metric")" "BEGIN { printf \"%.1f\", a - m }" \
                    > "$work/v-$bi-client-$metric"
            fi
        done
    done
    val() { cat "$work/v-$1-$2-$3"; }

    printf "%-44s" "per cycle"
    for b in "$@"; do printf " %22s" "$(basename "$(dirname "$b")")/$(basename "$b")"; done
    printf "\n"
    for metric in instructions allocations syscalls; do
        for kind in raw raw_watch client mutex redis_fenced_floor redis_mutex; do
            has "$kind" || continue
            case $kind in
                raw) what="raw C cycle" ;;
                raw_watch) what="raw C cycle + exists watch" ;;
                client) what="zkcoro::client cycle" ;;
                mutex) what="zkcoro::mutex cycle" ;;
                redis_fenced_floor) what="hiredis fenced floor" ;;
                redis_mutex) what="zkcoro::redis_mutex cycle" ;;
            esac
            line=""
            bi=0
            for b in "$@"; do
                bi=$(( bi + 1 ))
                line+=$(printf " %22s" "$(val "$bi" "$kind" "$metric")")
            done
            printf "%-44s%s\n" "$metric: $what" "$line"
        done
    done

    echo
    bi=0
    for b in "$@"; do
        bi=$(( bi + 1 ))
        suffix=""
        (( $# == 1 )) || suffix=" build=$b"
        for kind in raw raw_watch client mutex redis_fenced_floor redis_mutex; do
            has "$kind" || continue
            printf "PROFILE kind=%s instructions=%.0f allocations=%s syscalls=%s%s\n" "$kind" \
                "$(val "$bi" "$kind" instructions)" "$(val "$bi" "$kind" allocations)" "$(val "$bi" "$kind" syscalls)" \
                "$suffix"
        done
    done

    # Issue 33'"'"'s counted targets.
    echo
    bi=0
    for b in "$@"; do
        bi=$(( bi + 1 ))
        if has mutex && has raw_watch; then
            awk -v b="$b" -v mi="$(val "$bi" mutex instructions)" -v fi="$(val "$bi" raw_watch instructions)" \
                -v ma="$(val "$bi" mutex allocations)" -v fa="$(val "$bi" raw_watch allocations)" \
                -v ms="$(val "$bi" mutex syscalls)" -v fs="$(val "$bi" raw_watch syscalls)" "
                function v(ok) { return ok ? \"met\" : \"MISSED\" }
                BEGIN {
                    printf \"%s: mutex / raw_watch: instructions %.3fx (target <= 1.8x: %s), allocations %+.1f (<= +10: %s), system calls %+.1f (<= +2: %s)\n\",
                        b, (fi > 0 ? mi / fi : 0), v(fi > 0 && mi <= 1.8 * fi), ma - fa, v(ma - fa <= 10), ms - fs, v(ms - fs <= 2)
                    printf \"%s: mutex / raw_watch ratios: instructions %.3f allocations %.3f syscalls %.3f\n\", b,
                        (fi > 0 ? mi / fi : 0), (fa > 0 ? ma / fa : 0), (fs > 0 ? ms / fs : 0)
                }"
        fi
        if has redis_mutex && has redis_fenced_floor; then
            awk -v b="$b" -v mi="$(val "$bi" redis_mutex instructions)" -v fi="$(val "$bi" redis_fenced_floor instructions)" \
                -v ma="$(val "$bi" redis_mutex allocations)" -v fa="$(val "$bi" redis_fenced_floor allocations)" \
                -v ms="$(val "$bi" redis_mutex syscalls)" -v fs="$(val "$bi" redis_fenced_floor syscalls)" "
                BEGIN {
                    printf \"%s: redis_mutex / redis_fenced_floor ratios: instructions %.3f allocations %.3f syscalls %.3f (no counted target; CPU <= 1.3x is bench/run_redis.sh'"'"'s)\n\",
                        b, (fi > 0 ? mi / fi : 0), (fa > 0 ? ma / fa : 0), (fs > 0 ? ms / fs : 0)
                }"
        fi
    done
'
first=${builds[0]}
runner=("$first/tools/zkserver/zkcoro-with-server" --tick-ms 2000 --)
if (( redis_kinds )); then
    runner+=("$first/tests/support/redis/zkcoro-with-redis" --)
fi
"${runner[@]}" bash -c "$inner" inner "$N1" "$N2" "$kinds" "${builds[@]}"
