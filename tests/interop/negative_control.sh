#!/bin/sh
# Negative and positive controls for the interop interval checker.
#
#   INTERVAL_CHECK=build/tests/interop/interval-check tests/interop/negative_control.sh 127.0.0.1:2181 OUTDIR
#
# 1. negative: two CuratorHolder mutex processes on *different* paths for ~3 s (hold 20 ms).
#    Nothing excludes them, so interval-check must report overlaps: exit 1 AND at least one
#    "VIOLATION: ... overlaps ..." line (it also exits 1 for "no holds recorded" or "expected id
#    never acquired", which would prove nothing about overlaps): the checker can fail.
# 2. positive: two CuratorHolder mutex processes on the *same* path. interval-check must pass
#    (exit 0) with both ids having acquired.
# In both, each holder must exit 0 AND print acquired=N with N >= 1 (CuratorHolder exits 0 with
# acquired=0 when it never got the lock).
# OUTDIR receives the logs; CuratorHolder is built there by build.sh unless
# OUTDIR/classpath.txt already exists. Exit 0 when both expectations hold, 1 otherwise,
# 2 on bad usage or when a holder fails.
set -u

if [ $# -ne 2 ]; then
    echo "usage: INTERVAL_CHECK=/path/to/interval-check $0 HOST:PORT OUTDIR" >&2
    exit 2
fi
connect=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
check=${INTERVAL_CHECK:-}
duration_ms=${DURATION_MS:-3000}
hold_ms=${HOLD_MS:-20}
java_bin=${JAVA:-java}

if [ -z "$check" ] || [ ! -x "$check" ]; then
    echo "$0: set INTERVAL_CHECK to the interval-check program (got '${check}')" >&2
    exit 2
fi
mkdir -p "$out" || exit 2
if [ ! -r "$out/classpath.txt" ]; then
    "$here/build.sh" "$out" >&2 || exit 2
fi
cp=$(cat "$out/classpath.txt")
run_id="$(date +%s)-$$"
base="/zkcoro-interop/control-$run_id"
rm -f "$out"/neg-*.log "$out"/pos-*.log

# run_pair PREFIX PATH_A PATH_B: two holders in parallel; fails if either fails or acquires nothing.
run_pair() {
    prefix=$1
    "$java_bin" -cp "$cp" CuratorHolder --connect "$connect" --path "$2" --recipe mutex \
        --duration-ms "$duration_ms" --hold-ms "$hold_ms" --log "$out/$prefix-a.log" --id "$prefix-a" \
        > "$out/$prefix-a.out" 2> "$out/$prefix-a.err" &
    pid_a=$!
    "$java_bin" -cp "$cp" CuratorHolder --connect "$connect" --path "$3" --recipe mutex \
        --duration-ms "$duration_ms" --hold-ms "$hold_ms" --log "$out/$prefix-b.log" --id "$prefix-b" \
        > "$out/$prefix-b.out" 2> "$out/$prefix-b.err" &
    pid_b=$!
    rc=0
    wait "$pid_a" || rc=$?
    wait "$pid_b" || rc=$?
    for h in a b; do
        echo "$prefix-$h: $(cat "$out/$prefix-$h.out" 2>/dev/null)"
    done
    if [ "$rc" -ne 0 ]; then
        echo "$0: a CuratorHolder failed (rc=$rc); see $out/$prefix-*.err" >&2
        cat "$out/$prefix-a.err" "$out/$prefix-b.err" >&2
        return 1
    fi
    for h in a b; do
        n=$(sed -n 's/^acquired=//p' "$out/$prefix-$h.out" | tail -n 1)
        case $n in
            ''|*[!0-9]*|0)
                echo "$0: $prefix-$h never acquired (acquired=${n:-none}); its stderr:" >&2
                cat "$out/$prefix-$h.err" >&2
                return 1 ;;
        esac
    done
    return 0
}

status=0

echo "== negative control: different paths, overlaps expected"
run_pair neg "$base/neg-a" "$base/neg-b" || exit 2
"$check" --max-print 3 --expect-ids neg-a,neg-b "$out/neg-a.log" "$out/neg-b.log" >"$out/neg.check" 2>&1
rc=$?
cat "$out/neg.check"
if [ "$rc" -eq 1 ] && grep -q '^VIOLATION: .* overlaps ' "$out/neg.check"; then
    echo "negative control: PASS (interval-check detected overlaps)"
else
    echo "negative control: FAIL (interval-check exit $rc and no overlap line; expected exit 1 with overlaps)"
    status=1
fi

echo "== positive control: same path, no overlap expected"
run_pair pos "$base/pos" "$base/pos" || exit 2
"$check" --expect-ids pos-a,pos-b "$out/pos-a.log" "$out/pos-b.log"
rc=$?
if [ "$rc" -eq 0 ]; then
    echo "positive control: PASS"
else
    echo "positive control: FAIL (interval-check exit $rc, expected 0)"
    status=1
fi

exit "$status"
