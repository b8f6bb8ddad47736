#!/usr/bin/env bash
# The comparison as a picture: one panel per workload, bars for raw C, zkcoro and Curator, and
# the latency distribution of workload a for the three. Called by bench/run.sh.
#
#   bash bench/plot.sh DIR TITLE OUT.svg      (OUT.png: a PNG instead, with pngcairo)
#
# DIR holds results.txt (bench/run.sh's RESULT lines) and samples-<impl>-<workload>.txt (one
# latency in us a line, written when ZKCORO_BENCH_SAMPLES is set). Needs gnuplot (Debian's
# gnuplot-nox). A figure missing from results.txt is left out of its panel.
set -euo pipefail

if [[ $# -ne 3 ]]; then
    echo "usage: bash bench/plot.sh DIR TITLE OUT.svg" >&2
    exit 2
fi
dir=$1 title=$2 svg=$3
results=$dir/results.txt
[[ -f "$results" ]] || { echo "bench/plot.sh: no $results" >&2; exit 1; }
command -v gnuplot >/dev/null || { echo "bench/plot.sh: gnuplot is missing (apt-get install gnuplot-nox)" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/zkcoro-plot.XXXXXX")
trap 'rm -rf "$work"' EXIT

# One data file per panel: "label raw zkcoro curator" rows, "-" for a missing figure.
awk -v w="$work" '
    {
        impl = ""; wl = ""
        for (i = 2; i <= NF; ++i) {
            eq = index($i, "=")
            k = substr($i, 1, eq - 1); v = substr($i, eq + 1)
            if (k == "impl") impl = v
            else if (k == "workload") wl = v
            else f[k] = v
        }
        # A workload measured twice: keep the faster run, as the table does.
        if (((impl, wl) in have) && f["ops_per_s"] + 0 <= r[impl, wl, "ops_per_s"] + 0) { for (k in f) delete f[k]; next }
        for (k in f) { r[impl, wl, k] = f[k]; delete f[k] }
        have[impl, wl] = 1
    }
    function fig(impl, wl, k, scale) { return ((impl, wl) in have) ? sprintf("%.3f", r[impl, wl, k] / scale) : "-" }
    function line(file, label, raw, zk, cur) { printf "\"%s\" %s %s %s\n", label, raw, zk, cur > (w "/" file) }
    END {
        a = (("zkcoro", "uncontended_interleaved") in have) ? "uncontended_interleaved" : "uncontended"
        line("a_lat.dat", "p50", fig("raw", "cycle", "p50_us", 1), fig("zkcoro", a, "p50_us", 1), fig("curator", "uncontended", "p50_us", 1))
        line("a_lat.dat", "p99", fig("raw", "cycle", "p99_us", 1), fig("zkcoro", a, "p99_us", 1), fig("curator", "uncontended", "p99_us", 1))
        line("a_lat.dat", "p50, linger", "-", fig("zkcoro", "uncontended_linger", "p50_us", 1), "-")
        line("a_cpu.dat", "CPU per cycle", fig("raw", "cycle", "cpu_us_per_op", 1), fig("zkcoro", a, "cpu_us_per_op", 1),
             fig("curator", "uncontended", "cpu_us_per_op", 1))
        line("b.dat", "one lock object", "-", fig("zkcoro", "demo", "ops_per_s", 1000), fig("curator", "demo_shared", "ops_per_s", 1000))
        line("b.dat", "object per task", "-", fig("zkcoro", "demo_per_task", "ops_per_s", 1000),
             fig("curator", "demo_per_thread", "ops_per_s", 1000))
        line("c.dat", "4 processes", "-", fig("zkcoro", "cross_process", "ops_per_s", 1), fig("curator", "cross_process", "ops_per_s", 1))
        line("c.dat", "zkcoro linger 10 ms", "-", fig("zkcoro_linger", "cross_process", "ops_per_s", 1), "-")
        line("d.dat", "1000 locks", fig("raw", "cycle_pipelined", "ops_per_s", 1000), fig("zkcoro", "many_locks", "ops_per_s", 1000),
             fig("curator", "many_locks", "ops_per_s", 1000))
        line("e.dat", "reads", "-", fig("zkcoro", "rw_read", "ops_per_s", 1000), fig("curator", "rw_read", "ops_per_s", 1000))
        line("e.dat", "writes", "-", fig("zkcoro", "rw_write", "ops_per_s", 1000), fig("curator", "rw_write", "ops_per_s", 1000))
        line("mix.dat", "zkcoro 1", "-", fig("mix", "zkcoro1", "share", 0.01), "-")
        line("mix.dat", "zkcoro 2", "-", fig("mix", "zkcoro2", "share", 0.01), "-")
        line("mix.dat", "Curator", "-", "-", fig("mix", "curator", "share", 0.01))
        line("mixw.dat", "zkcoro 1", "-", fig("mix", "zkcoro1", "p99_us", 1000), "-")
        line("mixw.dat", "zkcoro 2", "-", fig("mix", "zkcoro2", "p99_us", 1000), "-")
        line("mixw.dat", "Curator", "-", "-", fig("mix", "curator", "p99_us", 1000))
    }' "$results"

# A panel with no figure at all (e.g. Curator not run) would stop gnuplot: give it a zero bar.
for f in "$work"/*.dat; do
    awk '{ for (i = NF - 2; i <= NF; ++i) if ($i != "-") found = 1 } END { exit !found }' "$f" \
        || echo '"(not measured)" - 0 -' >> "$f"
done

# The distribution of workload a: sorted latencies against their percentile.
cdf() {
    local src=$1 dst=$2
    : > "$dst"
    [[ -s "$src" ]] || return 0
    # At most about 500 points a curve (every k-th sample, and the last): the picture stays small.
    sort -g "$src" | awk '{ v[NR] = $1 } END {
        k = int(NR / 500) + 1
        for (i = 1; i <= NR; ++i) if (i % k == 0 || i == NR) printf "%s %.4f\n", v[i], 100 * i / NR }' > "$dst"
}
cdf "$dir/samples-raw-cycle.txt" "$work/cdf_raw.dat"
if [[ -s "$dir/samples-zkcoro-uncontended_interleaved.txt" ]]; then
    cdf "$dir/samples-zkcoro-uncontended_interleaved.txt" "$work/cdf_zk.dat"
else
    cdf "$dir/samples-zkcoro-uncontended.txt" "$work/cdf_zk.dat"
fi
cdf "$dir/samples-curator-uncontended.txt" "$work/cdf_cur.dat"
cdf "$dir/samples-zkcoro-uncontended_linger.txt" "$work/cdf_linger.dat"

# A data file with no data makes gnuplot fail its plot: give such a curve one invisible point.
for f in cdf_raw cdf_zk cdf_cur cdf_linger; do
    [[ -s "$work/$f.dat" ]] || echo "NaN NaN" > "$work/$f.dat"
done

mkdir -p "$(dirname "$svg")"
terminal='svg size 1500,1100 dynamic noenhanced font "sans,11" background "white"'
[[ $svg == *.png ]] && terminal='pngcairo size 1500,1100 noenhanced font "sans,10" background "white"'
# gnuplot warns of every column a panel has no figure in (raw C in most): not worth showing.
gnuplot 2> >(grep -v -e "Skipping data file with no valid points" -e "empty y range" -e '^ *$' >&2) <<EOF
set terminal $terminal
set output "$svg"
set datafile missing "-"
set style data histogram
set style histogram cluster gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set key top left font ",9"
set grid ytics
set yrange [0:*]
set linetype 1 lc rgb "#7f7f7f"
set linetype 2 lc rgb "#1f77b4"
set linetype 3 lc rgb "#d62728"
set linetype 4 lc rgb "#2ca02c"
set multiplot layout 3,3 title "$title" font ",13"

set title "a. uncontended acquire+release (us, lower is better)"
plot "$work/a_lat.dat" using 2:xtic(1) title "raw C" lt 1, "" using 3 title "zkcoro" lt 2, "" using 4 title "Curator" lt 3

set title "a. client CPU per cycle (us, lower is better)"
plot "$work/a_cpu.dat" using 2:xtic(1) title "raw C" lt 1, "" using 3 title "zkcoro" lt 2, "" using 4 title "Curator" lt 3

set title "a. latency distribution (percentile vs us)"
set style data lines
set logscale x
set xrange [*:*]
set yrange [0:100]
set key bottom right
set xlabel "us per acquire+release (log)"
plot "$work/cdf_raw.dat" using 1:2 title "raw C" lt 1 lw 2, \
     "$work/cdf_zk.dat" using 1:2 title "zkcoro" lt 2 lw 2, \
     "$work/cdf_cur.dat" using 1:2 title "Curator" lt 3 lw 2, \
     "$work/cdf_linger.dat" using 1:2 title "zkcoro, linger 10 ms" lt 4 lw 2
unset logscale x
unset xlabel
set style data histogram
set yrange [0:*]
set key top left

set title "b. 100 tasks on one lock (thousand acquisitions/s)"
plot "$work/b.dat" using 2:xtic(1) title "raw C" lt 1, "" using 3 title "zkcoro" lt 2, "" using 4 title "Curator" lt 3

set title "c. 4 processes on one lock (handoffs/s)"
plot "$work/c.dat" using 2:xtic(1) title "raw C" lt 1, "" using 3 title "zkcoro" lt 2, "" using 4 title "Curator" lt 3

set title "d. 1000 locks, 50 tasks (thousand cycles/s; raw: 64 in flight)"
plot "$work/d.dat" using 2:xtic(1) title "raw C" lt 1, "" using 3 title "zkcoro" lt 2, "" using 4 title "Curator" lt 3

set title "e. 8 readers + 2 writers (thousand/s)"
plot "$work/e.dat" using 2:xtic(1) title "raw C" lt 1, "" using 3 title "zkcoro" lt 2, "" using 4 title "Curator" lt 3

set title "mix: 2 zkcoro processes x 4 tasks + Curator, 5 ms holds: share of holds (%)"
plot "$work/mix.dat" using 2:xtic(1) title "raw C" lt 1, "" using 3 title "zkcoro" lt 2, "" using 4 title "Curator" lt 3

set title "mix: p99 wait for the lock (ms)"
plot "$work/mixw.dat" using 2:xtic(1) title "raw C" lt 1, "" using 3 title "zkcoro" lt 2, "" using 4 title "Curator" lt 3

unset multiplot
EOF
