#!/usr/bin/env bash
# bench/scale.sh's curves as a picture: four log-log panels (requests, bytes received, client CPU
# and the handoff's p50, each per acquisition) against the waiters on the lock, one line per
# number of servers and processes. Needs gnuplot (Debian's gnuplot-nox).
#
#   bash bench/scale_plot.sh bench/out/scale.txt bench/out/scale.svg
set -euo pipefail
if [[ $# -ne 2 ]]; then
    echo "usage: bash bench/scale_plot.sh RESULTS.txt OUT.svg" >&2
    exit 2
fi
results=$1 svg=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/zkcoro-scale-plot.XXXXXX")
trap 'rm -rf "$work"' EXIT

# One data file per series: "waiters requests bytes cpu p50" rows, sorted by waiters.
awk -v w="$work" '
    /^RESULT curve=waiters / {
        delete f
        for (i = 2; i <= NF; ++i) { eq = index($i, "="); f[substr($i, 1, eq - 1)] = substr($i, eq + 1) }
        s = "s" f["servers"] "-p" f["processes"]
        print f["waiters"], f["requests_per_acq"], f["bytes_in_per_acq"], f["cpu_us_per_acq"], f["p50_us"] > (w "/" s ".dat")
        series[s] = 1
    }
    END { for (s in series) print s > (w "/series.txt") }' "$results"
[[ -s "$work/series.txt" ]] || { echo "bench/scale_plot.sh: no curve=waiters line in $results" >&2; exit 1; }

plots() {  # column
    local col=$1 first=1 s
    for s in $(sort "$work/series.txt"); do
        sort -n "$work/$s.dat" -o "$work/$s.dat"
        (( first )) || printf ', '
        first=0
        local servers=${s%%-*} procs=${s#*-}
        printf "'%s' using 1:%s with linespoints title '%s server(s), %s process(es)'" \
            "$work/$s.dat" "$col" "${servers#s}" "${procs#p}"
    done
}
gnuplot <<EOF
set terminal svg size 1200,900 dynamic font 'sans,11'
set output '$svg'
set multiplot layout 2,2 title 'One zkcoro::mutex, N waiting tasks (a node each): cost per acquisition (bench/scale.sh)'
set logscale xy
set grid
set key top left font ',9'
set xlabel 'waiters on the lock'
set ylabel 'requests'
set title 'requests to ZooKeeper per acquisition'
plot $(plots 2)
set ylabel 'bytes'
set title 'bytes received per acquisition (the queue listings)'
plot $(plots 3)
set ylabel 'microseconds'
set title 'client CPU per acquisition'
plot $(plots 4)
set ylabel 'microseconds'
set title 'handoff p50 (a release to the next grant)'
plot $(plots 5)
unset multiplot
EOF
