#!/usr/bin/env bash
# Curator beside zkcoro (issue 36, curve 5): points of curves 1 and 2 of bench/scale.sh run with
# Apache Curator 5.4's InterProcessMutex (bench/curator/CuratorScale.java: one JVM, a thread per
# waiter, each with its own InterProcessMutex), on the standalone server that zkcoro-with-server
# starts on loopback, and, unless --curator-only, the same points with zkcoro-scale-bench in the
# same run, so that the ratios come from one run:
#   waiters  N threads (10, 100, 1 000; then 10 000, to find where a thread per waiter stops) on
#            one lock, each acquiring it 2 times (10 000: once), queueing again at once; the main
#            thread holds the lock while the threads enter (2000 a second, 250 for 10 000), as
#            bench/scale.sh's first process does (--gate-ms);
#   locks    50 threads on L lock paths (10, 1 000, 100 000), one at random per acquisition, 5 s.
#
#   bash bench/scale_curator.sh [--quick] [--curator-only] RESULTS_FILE
#     --quick         tiny sizes (waiters 10; locks 100 for 300 ms): a smoke test, under 30 s
#     --curator-only  no zkcoro points (bench/scale.sh has its own)
#
# Appends to RESULTS_FILE one RESULT line a point (bench/scale_merge.py): backend=curator, and
# backend=zookeeper beside=curator for zkcoro's. A point that stops (a thread not started, the
# heap, the time limit) gives a "STOP curve=... backend=curator ... reason=..." line instead.
# Requests: Curator's client counts only the operations its tracer sees, so the figure set beside
# zkcoro's is the server's: server_packets_per_acq, zk_packets_received of mntr over the measured
# span less the mntr reads (each counts one), for both backends (zkcoro: the process's whole life
# less its cleanup, one remove a lock path, and its connect and close; Curator: read by the JVM at
# the start and end of its span). server_znodes, server_watches: the peaks, sampled every 200 ms. requests_per_acq stays zkcoro's own count (Curator's: na), watch_events_per_acq likewise.
# cpu_us_per_acq is the JVM's CPU time (all its threads: JIT and GC too). The holds are checked for
# overlap and the handoffs taken by the merge, as for zkcoro (System.nanoTime is CLOCK_MONOTONIC:
# CuratorScale --check-clock checks it first).
#
# Environment: BUILD_DIR (default build-rel, as bench/scale.sh; created with --buildtype=release
# when missing), CURATOR_CLASSES (default $BUILD_DIR/bench/curator-classes).
set -euo pipefail

usage() { echo "usage: bash bench/scale_curator.sh [--quick] [--curator-only] RESULTS_FILE" >&2; exit 2; }

if [[ ${1:-} == --points ]]; then
    # Under zkcoro-with-server (ZK_CONNECT set): the points. Arguments from the outer part below.
    shift
    root=$1 out=$2 results=$3 classes=$4 bench=$5 quick=$6 zkcoro=$7
    cp=$(cat "$classes/classpath.txt")
    if (( quick )); then
        waiters="10:2:60" try="" lock_counts="100" lock_ms=300 limit=60
    else
        waiters="10:2:300 100:2:300 1000:2:600" try="10000:1:900" lock_counts="10 1000 100000" lock_ms=5000 limit=300
    fi

    # The server's counts around a zkcoro process (Curator's JVM takes its own): mntr every 200 ms
    # until SIGTERM, then "server_znodes=Z server_watches=W server_packets=P", P being
    # zk_packets_received from the first read to the last, less the reads (each counts one).
    # It writes "ready" to the fifo $1 after its first read.
    # exec: $! is python's own pid, which the SIGTERM must reach.
    sample() {
        exec python3 - "$ZK_CONNECT" "$1" <<'EOF'
import signal, socket, sys, time
stop = False
def on_term(signum, frame):
    global stop
    stop = True
signal.signal(signal.SIGTERM, on_term)
host, port = sys.argv[1].split(",")[0].rsplit(":", 1)
sent = 0  # mntr commands sent: each is one of zk_packets_received, answered or not
def mntr():
    global sent
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=5) as s:
            s.sendall(b"mntr")
            sent += 1
            data = b""
            for _ in range(10000):
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
    except OSError:  # the server resets a connection now and then
        return None
    m = dict(line.split("\t", 1) for line in data.decode(errors="replace").splitlines() if "\t" in line)
    return m if "zk_packets_received" in m else None
first = None
for _ in range(50):
    first = mntr()
    if first is not None:
        break
if first is None:
    sys.exit("scale_curator: mntr failed 50 times")
first_sent = sent
with open(sys.argv[2], "w") as ready:
    ready.write("ready\n")
znodes, watches, last, last_sent, after_stop = 0, 0, first, first_sent, 0
for _ in range(100000):  # 200 ms apart: at most about 5.5 hours
    m = mntr()
    if m is not None:
        last, last_sent = m, sent
        znodes = max(znodes, int(m.get("zk_znode_count", 0)))
        watches = max(watches, int(m.get("zk_watch_count", 0)))
    if stop:
        # The last read must come after the stop: up to 50 tries.
        after_stop += 1
        if m is not None:
            break
        if after_stop >= 50:
            sys.exit("scale_curator: mntr failed 50 times after the point")
    else:
        time.sleep(0.2)
packets = int(last["zk_packets_received"]) - int(first["zk_packets_received"]) - (last_sent - first_sent)
print(f"server_znodes={znodes} server_watches={watches} server_packets={packets}")
EOF
    }
    key() {  # key FILE NAME: the value of NAME= on the PART line of FILE
        sed -n "s/^PART .* $2=\([^ ]*\).*/\1/p" "$1" | head -n 1
    }

    # point BACKEND CURVE N ROUNDS LOCKS DURATION_MS TIME_LIMIT LABELS
    point() {
        local backend=$1 curve=$2 n=$3 r=$4 locks=$5 ms=$6 limit=$7 labels=$8
        local entry=2000 gate=0 dir sampler rc=0 extra cleanup name znodes watches packets
        (( n < 10000 )) || entry=250
        [[ $curve != waiters ]] || gate=$(( n * 1000 / entry + 1500 ))
        dir=$out/$backend-$curve-$n-$locks
        mkdir -p "$dir"
        name=/zkcoro-scale/$backend-$curve-$locks-1-$n
        if [[ $backend == curator ]]; then
            java -cp "$cp" CuratorScale --path "$name" --tasks "$n" --rounds "$r" --locks "$locks" \
                --duration-ms "$ms" --entry-per-s "$entry" --gate-ms "$gate" --id curator \
                --events "$dir/holds-1.txt" --time-limit "$limit" > "$dir/part-1.txt" 2> "$dir/stderr.txt" || rc=$?
        else
            mkfifo "$dir/ready"
            sample "$dir/ready" > "$dir/server.txt" &
            sampler=$!
            # Opened read-write, the fifo does not block the open: the read alone waits, at most 30 s.
            exec 3<> "$dir/ready"
            read -r -t 30 -u 3 _ || { echo "bench/scale_curator.sh: the mntr sampler did not start" >&2; exit 1; }
            exec 3<&-
            "$bench" --gate-ms "$gate" --path "$name" --tasks "$n" --rounds "$r" --locks "$locks" \
                --duration-ms "$ms" --entry-per-s "$entry" --id p1 --events "$dir/holds-1.txt" \
                --time-limit "$limit" > "$dir/part-1.txt" 2> "$dir/stderr.txt" || rc=$?
            kill -TERM "$sampler" 2>/dev/null || true
            wait "$sampler" || true
        fi
        if (( rc )); then
            if [[ $backend == curator ]] && grep -q '^STOP ' "$dir/part-1.txt"; then
                echo "STOP curve=$curve backend=curator $labels $(sed -n 's/^STOP //p' "$dir/part-1.txt" | head -n 1)" \
                    | tee -a "$results"
                return 0
            fi
            echo "bench/scale_curator.sh: the $backend point $curve $labels failed (exit $rc)" >&2
            cat "$dir/part-1.txt" "$dir/stderr.txt" >&2
            exit "$rc"
        fi
        if [[ $backend == curator ]]; then
            (( $(key "$dir/part-1.txt" server_packets) >= 0 )) || { echo "bench/scale_curator.sh: no mntr count" >&2; exit 1; }
            extra="server_znodes=$(key "$dir/part-1.txt" server_znodes) server_watches=$(key "$dir/part-1.txt" server_watches)"
            extra+=" server_packets=$(key "$dir/part-1.txt" server_packets) jvm_threads=$(key "$dir/part-1.txt" threads)"
            extra+=" rss_kb_entered=$(key "$dir/part-1.txt" rss_kb_entered) gate_late_ms=$(key "$dir/part-1.txt" gate_late_ms)"
            labels="backend=curator $labels"
        else
            # Less what lies outside the span of the process's own count: its cleanup (a remove a
            # lock path, and the parent with --locks > 1), its connect and close, and one more
            # request that its count leaves out (measured: the server counted the client's count
            # + cleanup + 3 at 1, 20 and 50 acquisitions).
            cleanup=1
            (( locks == 1 )) || cleanup=$(( locks + 1 ))
            read -r znodes watches packets < "$dir/server.txt"
            extra="$znodes $watches server_packets=$(( ${packets#server_packets=} - cleanup - 3 ))"
            extra+=" rss_kb_entered=$(key "$dir/part-1.txt" rss_kb_entered)"
            labels="$labels beside=curator"
        fi
        python3 "$root/bench/scale_merge.py" "$curve" "$dir" "$labels" "$extra" | tee -a "$results"
    }

    backends=curator
    (( ! zkcoro )) || backends="curator zkcoro"
    waiters_points() {
        local spec n r limit_n b
        for spec in "$@"; do
            IFS=: read -r n r limit_n <<< "$spec"
            for b in $backends; do
                point "$b" waiters "$n" "$r" 1 0 "$limit_n" "servers=1 processes=1 waiters=$n rounds=$r"
            done
        done
    }
    # The 10 000 waiters last: in the first full run the server (256 MB heap) died during zkcoro's,
    # after Curator's, and the points after it were lost.
    # shellcheck disable=SC2086  # lists of points: split on purpose
    waiters_points $waiters
    for l in $lock_counts; do
        for b in $backends; do
            point "$b" locks 50 1 "$l" "$lock_ms" "$limit" "servers=1 processes=1 tasks=50 locks=$l"
        done
    done
    # shellcheck disable=SC2086
    waiters_points $try
    exit 0
fi

quick=0 zkcoro=1 results=
for arg in "$@"; do
    case "$arg" in
        --quick) quick=1 ;;
        --curator-only) zkcoro=0 ;;
        -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "bench/scale_curator.sh: unknown option '$arg'" >&2; usage ;;
        *) [[ -z $results ]] || usage; results=$arg ;;
    esac
done
[[ -n $results ]] || usage
results=$(realpath -m "$results")

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck source=bench/build_dir.sh
. bench/build_dir.sh
ninja -C "$build" bench/zkcoro-scale-bench tools/zkserver/zkcoro-with-server >/dev/null
classes=${CURATOR_CLASSES:-$build/bench/curator-classes}
sh bench/curator/build.sh "$classes" >/dev/null
cp=$(cat "$classes/classpath.txt")
# The holds' clock: System.nanoTime must be CLOCK_MONOTONIC, as zkcoro's steady_clock.
java -cp "$cp" CuratorScale --check-clock | tee /dev/stderr | grep -q 'nanotime_is_monotonic=yes' || {
    echo "bench/scale_curator.sh: System.nanoTime is not CLOCK_MONOTONIC here: the handoffs cannot be measured" >&2
    exit 1
}

out=$(mktemp -d "${TMPDIR:-/tmp}/zkcoro-scale-curator.XXXXXX")
trap 'rm -rf "$out"' EXIT
mkdir -p "$(dirname "$results")"
echo "== Curator beside zkcoro (standalone server): $( (( quick )) && echo "quick: a smoke test, not figures" || echo "full run")"
"$build/tools/zkserver/zkcoro-with-server" -- bash "$root/bench/scale_curator.sh" --points \
    "$root" "$out" "$results" "$classes" "$build/bench/zkcoro-scale-bench" "$quick" "$zkcoro"
echo "== appended to $results"
