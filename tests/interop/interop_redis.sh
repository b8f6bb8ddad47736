#!/bin/bash
# Interop test of the Redis lock: redis-py's Lock (Debian python3-redis) and, when given, zkcoro's
# Redis holder on one key of a throwaway redis-server.
#
#   bash tests/interop/interop_redis.sh BUILD_DIR
#   ZKCORO_REDIS_HOLDER=BUILD_DIR/tests/interop/zkcoro-redis-holder bash tests/interop/interop_redis.sh BUILD_DIR
#
# Starts its own server through BUILD_DIR/tests/support/redis/zkcoro-with-redis (unless
# ZKCORO_TEST_REDIS is set already) and needs BUILD_DIR/tests/interop/interval-check.
# Without redis-server or redis-py (/usr/bin/python3 -c 'import redis') it fails (exit 1): a test
# run must not quietly lose this test. With ZKCORO_ALLOW_SKIPS=1 it skips instead (exit 77).
#
# 1. One key: two redis-py holders (tests/interop/redis_py_holder.py) and, when
#    $ZKCORO_REDIS_HOLDER is set, zkcoro's holder, called with the same arguments:
#      --url URL --key KEY --holds N --hold-ms M --id ID --log FILE
#    (each hold logged as "<id> X <enter_ns> <exit_ns>", CLOCK_MONOTONIC ns; exit 0 after all N
#    holds, and "acquired=<count>" as the last line of stdout, as common.sh's finish reads it).
#    interval-check must find no overlap, and every holder must have held.
# 2. Negative control: two holders on TWO different keys (redis-py and, when given, zkcoro's;
#    else two redis-py), logs checked together: interval-check MUST report overlaps, which shows
#    the check can fail (and, with zkcoro's holder, that both write one clock).
# 3. With zkcoro's holder: (a) the handoff latency from a redis-py release (no PUBLISH) to
#    zkcoro's entry: its median below 150 ms, every one below 1 s; (b) the share and the longest wait of zkcoro
#    beside a redis-py holder that re-acquires at once (reported, as Redis keeps no queue; but
#    zkcoro must have held at least once).
# Every exit status of zkcoro's holder is checked: 0, or 1 at its time limit ("time limit
# reached"); not a lost lock, an error, or a sanitizer report (86 in the sanitizer build).
#
# Every wait is bounded; only processes started here are ended (by PID). Exit 0 only if every
# check passed; 1 on a failed check; 2 on bad usage or setup trouble.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
source "$here/common.sh"  # wait_pid, finish, fail, elapsed, cleanup

if [ $# -ne 1 ]; then
    echo "usage: bash $0 BUILD_DIR" >&2
    exit 2
fi
build=$(cd "$1" && pwd)
python=/usr/bin/python3
# cannot_run REASON: exit 1 (FAIL), or 77 (SKIP) when the caller allowed skips.
cannot_run() {
    if [ "${ZKCORO_ALLOW_SKIPS:-0}" = 1 ]; then
        echo "SKIP (ZKCORO_ALLOW_SKIPS=1): $*"
        exit 77
    fi
    echo "FAIL: $* (set ZKCORO_ALLOW_SKIPS=1 to skip this test instead)"
    exit 1
}
if ! command -v redis-server >/dev/null 2>&1; then
    cannot_run "redis-server not found (install the Debian package redis-server)"
fi
if ! "$python" -c 'import redis' 2>/dev/null; then
    cannot_run "redis-py missing: $python -c 'import redis' failed (install the Debian package python3-redis)"
fi
with_redis="$build/tests/support/redis/zkcoro-with-redis"
check="$build/tests/interop/interval-check"
for p in "$with_redis" "$check"; do
    if [ ! -x "$p" ]; then
        echo "$0: missing $p (build it with ninja -C $build)" >&2
        exit 2
    fi
done
zk_holder=${ZKCORO_REDIS_HOLDER:-}
if [ -n "$zk_holder" ] && [ ! -x "$zk_holder" ]; then
    echo "$0: ZKCORO_REDIS_HOLDER=$zk_holder is not an executable" >&2
    exit 2
fi
# The server: started here, under zkcoro-with-redis, which sets ZKCORO_TEST_REDIS and stops it
# by its PID when this script ends.
if [ -z "${ZKCORO_TEST_REDIS:-}" ]; then
    exec "$with_redis" -- bash "$0" "$@"
fi
url=$ZKCORO_TEST_REDIS

holds=${HOLDS:-40}
hold_ms=${HOLD_MS:-10}
# redis-py retries every 0.1 s by default; a shorter sleep makes it contend at every release.
py_sleep=${PY_SLEEP:-0.005}

# shellcheck disable=SC2034  # t_start and pids are read by common.sh (elapsed, finish)
t_start=$(date +%s%N)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zkcoro-interop-redis.XXXXXX")
started=()  # PIDs of background processes started here and not yet reaped
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
failures=0
declare -A pids=()
run_id="$(date +%s)-$$"

# shellcheck disable=SC2034  # pids: read by common.sh's finish
# start_py NAME ARGS...: redis_py_holder.py in the background, output in $tmp/NAME.{out,err}
start_py() {
    local name=$1
    shift
    "$python" "$here/redis_py_holder.py" --url "$url" --sleep "$py_sleep" --time-limit 120 "$@" \
        >"$tmp/$name.out" 2>"$tmp/$name.err" &
    pids[$name]=$!
    started+=("$!")
}
# holder_ended RC ERR: zkcoro's holder ended as it may (exit RC, stderr in the file ERR): after
# all its holds (0) or at its time limit (1, saying so); not 1 for a lost lock, 2 (an error),
# 3 (its watchdog) or 86 (a sanitizer report).
holder_ended() {
    [ "$1" -eq 0 ] || { [ "$1" -eq 1 ] && grep -q 'time limit reached after' "$2"; }
}
# start_zk NAME ARGS...: zkcoro's Redis holder in the background
# shellcheck disable=SC2034  # pids: read by common.sh's finish
start_zk() {
    local name=$1
    shift
    "$zk_holder" --url "$url" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    pids[$name]=$!
    started+=("$!")
}

echo "== interop_redis: $url, work dir $tmp, $holds holds of $hold_ms ms per holder"
if [ -z "$zk_holder" ]; then
    echo "   zkcoro's holder: SKIPPED (set ZKCORO_REDIS_HOLDER to its executable): redis-py only"
fi

# ---------------------------------------------------------------------------------------------
key="zkcoro-interop:$run_id:shared"
echo "== 1. one key ($key): 2 redis-py holders${zk_holder:+ and the zkcoro holder}"
names=(rp-a rp-b)
for n in rp-a rp-b; do
    start_py "$n" --key "$key" --holds "$holds" --hold-ms "$hold_ms" --id "$n" --log "$tmp/$n.log"
done
if [ -n "$zk_holder" ]; then
    start_zk zk-a --key "$key" --holds "$holds" --hold-ms "$hold_ms" --id zk-a --log "$tmp/zk-a.log"
    names+=(zk-a)
fi
one_key_ok=1
for n in "${names[@]}"; do
    finish "$n" 150 || one_key_ok=0
done
logs=()
for n in "${names[@]}"; do logs+=("$tmp/$n.log"); done
ids=$(IFS=,; echo "${names[*]}")
if "$check" --max-print 10 --expect-ids "$ids" "${logs[@]}" | sed 's/^/  /'; then
    [ "$one_key_ok" -eq 0 ] || echo "PASS: one key: no overlap, every holder held ($(elapsed))"
else
    fail "one key: interval-check reported overlaps or a holder that never held"
fi

# ---------------------------------------------------------------------------------------------
echo "== 2. negative control: two holders on two different keys, overlaps expected"
# 2 s of holds each, started together: they run side by side even when one starts slowly.
neg_holds=${NEG_HOLDS:-100}
neg_hold_ms=${NEG_HOLD_MS:-20}
start_py neg-a --key "zkcoro-interop:$run_id:neg-a" --holds "$neg_holds" --hold-ms "$neg_hold_ms" --id neg-a \
    --log "$tmp/neg-a.log"
if [ -n "$zk_holder" ]; then
    start_zk neg-b --key "zkcoro-interop:$run_id:neg-b" --holds "$neg_holds" --hold-ms "$neg_hold_ms" --id neg-b \
        --log "$tmp/neg-b.log"
else
    start_py neg-b --key "zkcoro-interop:$run_id:neg-b" --holds "$neg_holds" --hold-ms "$neg_hold_ms" --id neg-b \
        --log "$tmp/neg-b.log"
fi
neg_ok=1
for n in neg-a neg-b; do
    finish "$n" 150 || neg_ok=0
done
if [ "$neg_ok" -eq 1 ]; then
    rc=0
    "$check" --max-print 3 --expect-ids neg-a,neg-b "$tmp/neg-a.log" "$tmp/neg-b.log" >"$tmp/neg.check" 2>&1 || rc=$?
    sed 's/^/  /' "$tmp/neg.check"
    if [ "$rc" -eq 1 ] && grep -q 'overlap' "$tmp/neg.check"; then
        echo "PASS: negative control: interval-check detected the overlaps ($(elapsed))"
    else
        fail "negative control: interval-check exit $rc on two keys, expected 1 with overlaps"
    fi
fi

# ---------------------------------------------------------------------------------------------
if [ -n "$zk_holder" ]; then
    # 3. zkcoro's holder beside redis-py holders, which publish nothing on release: zkcoro's
    #    waiter polls on a bounded backoff (5-50 ms). (a) both pause 50 ms after each release:
    #    the handoff latency (zkcoro's entry minus the redis-py exit before it): its median must
    #    stay under 150 ms (a backoff that grew past its 50 ms would break it) and every handoff
    #    under 1 s (a waiter that stopped polling would wait out its deadline). The slow ones are
    #    listed, not counted: under the sanitizers in a loaded fresh root, 3 of 56 took 161-254 ms
    #    with a median of 39 ms (once 1 of them 151 ms); their speed is the benchmark's. (b) redis-py
    #    re-acquires at once, zkcoro runs one process per hold (as zklock loops do): Redis keeps no
    #    queue, so nobody can promise zkcoro a share; the share and zkcoro's longest wait are
    #    reported, not checked.
    echo "== 3a. handoff behind redis-py (each pauses 50 ms after its release)"
    key3="zkcoro-interop:$run_id:handoff"
    start_py py-gap --key "$key3" --holds 60 --hold-ms 10 --gap-ms 50 --id py-gap --log "$tmp/py-gap.log"
    start_zk zk-gap --key "$key3" --holds 1000 --hold-ms 10 --gap-ms 50 --time-limit 6 --id zk-gap \
        --log "$tmp/zk-gap.log"
    finish py-gap 60 || true  # (finish counts its failure)
    rc=0
    wait_pid "${pids[zk-gap]}" 30 || rc=$?  # ends at its time limit (exit 1): not all 1000 holds
    if ! holder_ended "$rc" "$tmp/zk-gap.err"; then
        fail "3a: zkcoro's holder exited $rc; its stderr:"
        sed 's/^/    /' "$tmp/zk-gap.err"
    fi
    "$check" --max-print 3 --expect-ids py-gap,zk-gap "$tmp/py-gap.log" "$tmp/zk-gap.log" | sed 's/^/  /' ||
        fail "3a: interval-check reported overlaps"
    "$python" - "$tmp/py-gap.log" "$tmp/zk-gap.log" 150 >"$tmp/handoff.txt" <<'PY' || fail "3a: $(cat "$tmp/handoff.txt")"
import sys
holds = []
for path in sys.argv[1:3]:
    for line in open(path):
        who, _, enter, exit_ = line.split()
        holds.append((int(enter), int(exit_), who.startswith("zk")))
holds.sort()
lat = sorted((b[0] - a[1]) / 1e6 for a, b in zip(holds, holds[1:]) if b[2] and not a[2])
if not lat:
    print("no zkcoro hold followed a redis-py hold")
    sys.exit(1)
p50, p99 = lat[len(lat) // 2], lat[min(len(lat) - 1, len(lat) * 99 // 100)]
print(f"handoff redis-py -> zkcoro over {len(lat)} handoffs: p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {lat[-1]:.1f} ms")
late = [x for x in lat if x >= float(sys.argv[3])]
if late:
    print(f"  {len(late)} of {len(lat)} handoffs took {sys.argv[3]} ms or more: {', '.join(f'{x:.1f}' for x in late)} ms")
sys.exit(0 if p50 < float(sys.argv[3]) and lat[-1] < 1000 else 1)
PY
    sed 's/^/  /' "$tmp/handoff.txt"

    echo "== 3b. share beside a redis-py holder that re-acquires at once"
    key4="zkcoro-interop:$run_id:share"
    # zkcoro runs as zklock loops do: one process per hold (connect, acquire, hold, exit), for as
    # long as redis-py runs (each process bounded by its --time-limit).
    start_py py-greedy --key "$key4" --holds 150 --hold-ms 20 --id py-greedy --log "$tmp/py-greedy.log"
    : >"$tmp/zk-share.log"
    share_end=$(( $(date +%s%N) + 8000000000 ))
    share_runs=0
    while kill -0 "${pids[py-greedy]}" 2>/dev/null && [ "$(date +%s%N)" -lt "$share_end" ]; do
        share_runs=$((share_runs + 1))
        rc=0
        "$zk_holder" --url "$url" --key "$key4" --holds 1 --hold-ms 20 --time-limit 5 --id zk-share \
            --log "$tmp/zk-share.log" >/dev/null 2>"$tmp/zk-share.err" || rc=$?
        if ! holder_ended "$rc" "$tmp/zk-share.err"; then
            fail "3b: zkcoro's holder (run $share_runs) exited $rc; its stderr:"
            sed 's/^/    /' "$tmp/zk-share.err"
        fi
    done
    finish py-greedy 60 || true
    # Nothing promises zkcoro a share, but one hold in 8 s (4 to 9 in runs so far) is the least
    # that shows it can get in between the redis-py holds at all.
    [ -s "$tmp/zk-share.log" ] ||
        fail "3b: zkcoro never held beside the greedy redis-py holder ($share_runs runs of its holder)"
    "$check" --max-print 3 "$tmp/py-greedy.log" "$tmp/zk-share.log" | sed 's/^/  /' ||
        fail "3b: interval-check reported overlaps"
    "$python" - "$tmp/py-greedy.log" "$tmp/zk-share.log" <<'PY' | sed 's/^/  /' || true
import sys
py = [tuple(map(int, l.split()[2:4])) for l in open(sys.argv[1])]
zk = [tuple(map(int, l.split()[2:4])) for l in open(sys.argv[2])]
start = min(h[0] for h in py + zk)
ends = [start] + [h[1] for h in zk]  # a wait: from the previous zkcoro exit to the next entry
waits = [(b[0] - a) / 1e6 for a, b in zip(ends, zk)]
share = 100.0 * len(zk) / max(1, len(py) + len(zk))
longest = f"{max(waits):.0f} ms" if waits else "the whole run (never held)"
print(f"share (no queue in Redis: not promised): zkcoro {len(zk)} of {len(py) + len(zk)} holds "
      f"({share:.0f}%), redis-py {len(py)}; zkcoro's longest wait {longest}")
PY
fi

echo "== interop_redis: $failures failure(s) in $(elapsed)"
[ "$failures" -eq 0 ]
