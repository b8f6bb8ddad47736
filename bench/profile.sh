#!/usr/bin/env bash
# Client cost per cycle, counted rather than timed: instructions (valgrind --tool=callgrind,
# deterministic), allocations (heaptrack) and system calls (strace -c -f), for
#   raw     the raw ZooKeeper C client's create + get_children + delete cycle,
#   client  zkcoro::client doing the same cycle,
#   mutex   zkcoro::mutex acquire + release, uncontended.
# Each figure is a difference of two runs (N1 and N2 cycles) divided by N2 - N1, so start-up and
# shutdown cancel out. The zkcoro-cycle-bench run with --only zkcoro does a client cycle and a
# mutex cycle per count; the lock benchmark's uncontended workload does mutex cycles alone; the
# client figure is the difference.
#
#   bash bench/profile.sh [BUILD_DIR ...]      (default build-rel; one column per build dir)
#
# Needs valgrind, heaptrack and strace (Debian packages of those names). Runs against a throwaway
# ZooKeeper started by BUILD_DIR/tools/zkserver/zkcoro-with-server (the first build dir's).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
builds=("$@")
(( ${#builds[@]} )) || builds=("$root/build-rel")
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

inner='
    set -euo pipefail
    N1=$1 N2=$2
    shift 2
    work=$(mktemp -d "${TMPDIR:-/tmp}/zkcoro-profile.XXXXXX")
    trap "rm -rf \"$work\"" EXIT
    # cmd KIND N BUILD: the command line of one run of N cycles.
    cmd() {
        local kind=$1 n=$2 b=$3
        case $kind in
            raw) echo "$b/bench/zkcoro-cycle-bench --only raw --cycles $n --warmup 20 --rounds 1 --pipeline-ms 0 --time-limit 600" ;;
            zk) echo "$b/bench/zkcoro-cycle-bench --only zkcoro --cycles $n --warmup 20 --rounds 1 --pipeline-ms 0 --time-limit 600" ;;
            mutex) echo "$b/bench/zkcoro-lock-bench --workloads uncontended --cycles $n --warmup 20 --time-limit 600" ;;
        esac
    }
    instructions() {  # total instructions of every thread of one run
        local out=$work/cg.out
        rm -f "$out"*
        valgrind --tool=callgrind --callgrind-out-file="$out" $(cmd "$@") >/dev/null 2>"$work/vg.err"
        local total=0 f
        for f in "$out"*; do
            total=$(( total + $(awk "/^summary:|^totals:/ { print \$2; exit }" "$f") ))
        done
        echo "$total"
    }
    allocations() {
        local out=$work/ht
        rm -f "$out"*
        heaptrack -o "$out" $(cmd "$@") >/dev/null 2>&1
        heaptrack_print "$out".* 2>/dev/null | awk "/^calls to allocation functions:/ { print \$5; exit }"
    }
    syscalls() {
        strace -f -c -o "$work/st.txt" $(cmd "$@") >/dev/null 2>&1
        # The total line: "100.00 seconds usecs/call calls [errors] total".
        awk "\$NF == \"total\" { print \$4; exit }" "$work/st.txt"
    }
    per_cycle() {  # METRIC KIND BUILD: (value(N2) - value(N1)) / (N2 - N1)
        local a b
        a=$($1 "$2" "$N1" "$3")
        b=$($1 "$2" "$N2" "$3")
        awk -v a="$a" -v b="$b" -v n1="$N1" -v n2="$N2" "BEGIN { printf \"%.1f\", (b - a) / (n2 - n1) }"
    }
    printf "%-28s" "per cycle"
    for b in "$@"; do printf " %22s" "$(basename "$(dirname "$b")")/$(basename "$b")"; done
    printf "\n"
    for metric in instructions allocations syscalls; do
        for kind in raw mutex zk; do
            line=""
            bi=0
            for b in "$@"; do
                bi=$(( bi + 1 ))
                v=$(per_cycle "$metric" "$kind" "$b")
                if [[ $kind == mutex ]]; then
                    echo "$v" > "$work/mutex-$metric-$bi"
                fi
                if [[ $kind == zk ]]; then  # client + mutex cycles, less the mutex cycle
                    v=$(awk -v a="$v" -v m="$(cat "$work/mutex-$metric-$bi")" "BEGIN { printf \"%.1f\", a - m }")
                fi
                line+=$(printf " %22s" "$v")
            done
            case $kind in raw) what="raw C cycle" ;; zk) what="zkcoro::client cycle" ;; mutex) what="zkcoro::mutex cycle" ;; esac
            printf "%-28s%s\n" "$metric: $what" "$line"
        done
    done
'
"${builds[0]}/tools/zkserver/zkcoro-with-server" --tick-ms 2000 -- bash -c "$inner" inner "$N1" "$N2" "${builds[@]}"
