#!/usr/bin/env bash
# bench/scale.sh's curves as a picture: six log-log panels. Waiters on one lock: requests (Redis:
# the server's commands), client CPU and the handoff's p50 per acquisition (one line per servers
# x processes); locks: handoffs per second, and the client's memory and the server's watches;
# processes: handoffs per second (one line per servers x locks). Needs gnuplot (gnuplot-nox).
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

# One data file per curve and series, "x y1 y2 ..." rows; the series names in <curve>.series.
awk -v w="$work" '
    /^RESULT / {
        delete f
        for (i = 2; i <= NF; ++i) { eq = index($i, "="); f[substr($i, 1, eq - 1)] = substr($i, eq + 1) }
        c = f["curve"]
        redis = f["servers"] == "redis"
        where = redis ? "Redis" : (f["servers"] == 1 ? "1 ZooKeeper" : f["servers"] " ZooKeepers")
        # Redis: the commands the server counted (the client keeps no count).
        requests = redis ? f["server_commands_per_acq"] : f["requests_per_acq"]
        if (c == "waiters") {
            s = where ", " f["processes"] " process(es)"
            row = f["waiters"] " " requests " " f["cpu_us_per_acq"] " " f["p50_us"]
        } else if (c == "locks") {
            s = where
            row = f["locks"] " " f["handoffs_per_s"] " " f["rss_kb_per_process"] " " (redis ? "NaN" : f["server_watches"]) " " f["server_znodes"]
        } else if (c == "processes") {
            s = where ", " f["locks"] " lock(s)"
            row = f["processes"] " " f["handoffs_per_s"] " " f["share_min"] " " f["share_max"]
        } else next
        file = w "/" c "-" s ".dat"
        gsub(/[ ,()]/, "_", file)
        print row > file
        if (!((c, s) in seen)) { seen[c, s] = 1; print s "\t" file > (w "/" c ".series") }
    }' "$results"
[[ -s "$work/waiters.series" ]] || { echo "bench/scale_plot.sh: no curve=waiters line in $results" >&2; exit 1; }

plots() {  # curve column [title suffix]
    local curve=$1 col=$2 suffix=${3:-} first=1 name file
    [[ -s "$work/$curve.series" ]] || { echo "1/0 notitle"; return; }
    while IFS=$'\t' read -r name file; do
        sort -n "$file" -o "$file"
        (( first )) || printf ', '
        first=0
        printf "'%s' using 1:%s with linespoints title '%s%s'" "$file" "$col" "$name" "$suffix"
    done < "$work/$curve.series"
}
gnuplot <<EOF
set terminal svg size 1200,1300 dynamic font 'sans,11'
set output '$svg'
set multiplot layout 3,2 title 'zkcoro::mutex as the work grows: a node per task (bench/scale.sh)'
set logscale xy
set grid
set key top left font ',9'
set xlabel 'waiters on one lock'
set title 'requests per acquisition (Redis: commands the server ran)'
plot $(plots waiters 2)
set title 'client CPU per acquisition, us'
plot $(plots waiters 3)
set title 'handoff p50 (a release to the next grant), us'
plot $(plots waiters 4)
set xlabel 'lock paths (50 tasks)'
set title 'acquisitions per second'
plot $(plots locks 2)
set title 'client RSS (kB) and the server watches at the peak'
plot $(plots locks 3 ': RSS kB'), $(plots locks 4 ': watches')
set xlabel 'processes (4 tasks each)'
set title 'acquisitions per second'
plot $(plots processes 2)
unset multiplot
EOF
