#!/usr/bin/env bash
# A signal to zklock at the moment its Redis grant lands (issue 32, item 3: once, under ASan, such
# a run exited 1 and left the key set). A foreign holder's key (plain SET with a 300 ms TTL, no
# release notification) makes zklock poll; SIGINT or SIGTERM then comes at moments spread around
# the measured grant time, some before it, some after. Every run must end with 0 (granted, the
# command ran), or 128+N (cancelled; the command may have been started and stopped), never
# anything else (1: a lost completion or a sanitizer's report; 86: a sanitizer's report under
# scripts/test.sh), and no key of zklock's may be left once the foreign one has expired.
# The moment follows the outcomes (a staircase): after a granted round the next signal comes
# earlier, after a cancelled one later, the step halving at each turn, so the signals stay around
# the grant even when a busy machine delays the script's own sleeps and kills (a fixed spread
# around the calibrated time once missed it in all 24 rounds, all granted).
# Under zkcoro-with-redis ($ZKCORO_TEST_REDIS, $ZKCORO_TEST_REDIS_PORT).
#   zklock_redis_grant_signal.sh ZKLOCK [ROUNDS]
set -uo pipefail
zklock=$1
rounds=${2:-24}
url=${ZKCORO_TEST_REDIS:?run under zkcoro-with-redis}
port=${ZKCORO_TEST_REDIS_PORT:?}
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
rcli() { redis-cli -p "$port" "$@"; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
tmp=$(mktemp -d)
# EXIT trap: only in this shell. A job started with & is a forked copy of this shell until its
# exec, and one signalled in that moment runs this trap too (bash 5.2): it would remove $tmp.
trap 'if [ "$BASHPID" = "$$" ]; then rm -rf "$tmp"; fi' EXIT
# expired KEY: waits (at most 3 s) for the foreign holder's key to run out.
expired() {
    local _
    for _ in $(seq 60); do [ "$(rcli GET "$1")" = foreign ] || return 0; sleep 0.05; done
    return 1
}

# The grant time of this build on this machine: the median of 3 unsignalled runs, from zklock's
# start to its command's.
times=()
for i in 1 2 3; do
    k="grant-signal-cal-$$-$i"
    rcli SET "$k" foreign PX 300 >/dev/null
    start=$(now_ms)
    "$zklock" -c "$url" "$k" -- sh -c "date +%s%N >$tmp/ran" 2>"$tmp/err" || fail "calibration run $i: exit $?: $(cat "$tmp/err")"
    [ -s "$tmp/ran" ] && times+=($(($(cat "$tmp/ran") / 1000000 - start)))
    rm -f "$tmp/ran"
done
[ ${#times[@]} -eq 3 ] || { fail "calibration: the command did not run 3 times"; exit 1; }
grant=$(printf '%s\n' "${times[@]}" | sort -n | sed -n 2p)
echo "grant lands about $grant ms after zklock starts (calibration: ${times[*]} ms)"

declare -A seen
at=$grant step=40 last="" trail=""
for i in $(seq "$rounds"); do
    k="grant-signal-$$-$i"
    sig=$([ $((i % 2)) = 0 ] && echo INT || echo TERM)
    rcli SET "$k" foreign PX 300 >/dev/null
    start=$(now_ms)
    "$zklock" -c "$url" "$k" -- true 2>"$tmp/err.$i" &
    pid=$!
    left=$((at - ($(now_ms) - start)))
    [ "$left" -le 0 ] || sleep "$((left / 1000)).$(printf '%03d' $((left % 1000)))"
    kill -"$sig" "$pid" 2>/dev/null
    wait "$pid"
    rc=$?
    seen[$rc]=$((${seen[$rc]:-0} + 1))
    if [ "$rc" -ne 0 ] && [ "$rc" -ne $((128 + $(kill -l "$sig"))) ]; then
        fail "round $i (SIG$sig at +$at ms): exit $rc; zklock said: $(cat "$tmp/err.$i")"
    fi
    expired "$k" || fail "round $i: the foreign key $k did not expire within 3 s"
    [ "$(rcli EXISTS "$k")" = 0 ] || fail "round $i (SIG$sig at +$at ms, exit $rc): the key $k is left: $(rcli GET "$k")"
    rcli DEL "$k" >/dev/null
    trail+=" $at"
    # The staircase: granted -> earlier, cancelled -> later; the step halves at each turn (>= 5 ms).
    if [ "$rc" -eq 0 ]; then dir=down; else dir=up; fi
    [ -z "$last" ] || [ "$dir" = "$last" ] || step=$((step > 10 ? step / 2 : 5))
    last=$dir
    if [ "$dir" = down ]; then at=$((at - step)); else at=$((at + step)); fi
    [ "$at" -ge 1 ] || at=1
    [ "$at" -le 3000 ] || at=3000
done
echo "signal moments, round by round (ms after zklock's start):${trail:-}"
summary=""
for rc in $(printf '%s\n' "${!seen[@]}" | sort -n); do summary+=" exit $rc: ${seen[$rc]},"; done
echo "rounds: $rounds;${summary%,}"
# Both outcomes must have been seen, or the signals missed the moment they are about.
[ "${seen[0]:-0}" -gt 0 ] || fail "no round was granted before its signal: the signals all came too early"
[ $((${seen[130]:-0} + ${seen[143]:-0})) -gt 0 ] || fail "no round was cancelled: the signals all came too late"
[ "$failures" -eq 0 ] || { echo "$failures failure(s)" >&2; exit 1; }
echo "PASS"
