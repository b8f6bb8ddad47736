#!/bin/bash
# A frozen holder (a GC pause, a stalled VM) wakes up still believing it holds the lock: only the
# resource can refuse its write. Two runs side by side, on separate paths:
#
#   fenced  holder A (zkcoro-elect write --freeze) takes the lock and stops itself (SIGSTOP) just
#           before its write; the test waits until ZooKeeper has expired A's session, which it
#           knows when holder B gets the lock; B writes; then A is continued (SIGCONT) and
#           writes with guard::async_multi (a check on its lock node first). Its write must be
#           refused and the resource must hold B's value.
#   checked the same transaction sent by hand with client::async_multi (check on A's lock node,
#           then the write): here the server's check alone refuses it, whatever A's client
#           knows (in the fenced run A's client has learnt of the expiry by its retry, and
#           refuses before sending).
#   plain   the same with a plain set_data (the negative control): the stale write lands, and
#           the resource holds A's value, so the check is what makes the other runs pass.
#
#   zkcoro-with-server -- bash tests/interop/frozen_holder.sh BUILD_DIR
#
# Every wait is bounded; only processes started here are signalled (by PID).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
source "$here/common.sh"
interop_setup zkcoro-frozen "$@"
# shellcheck source=elect_common.sh
source "$here/elect_common.sh"
base="/zkcoro-interop/frozen-$run_id"
echo "== frozen_holder: ZooKeeper at $connect, work dir $tmp"

# is_stopped PID: the process is in state T (stopped).
is_stopped() {
    local state
    state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null || echo gone)
    [ "$state" = T ]
}

# first phase of a run: A holds and freezes, B takes over and writes. Leaves A stopped.
freeze_and_take_over() {
    local mode=$1 res=$2
    start_elect "a-$mode" write --path "$base/$mode" --resource "$res" --value "stale-$mode" --mode "$mode" \
        --freeze --session-timeout-ms 2000
    if ! wait_line "a-$mode" '^held ' 30 >/dev/null; then
        fail "$mode: holder A did not get the lock"
        return 1
    fi
    for _ in $(seq 1 200); do  # bounded: ~10 s
        is_stopped "${pids[a-$mode]}" && break
        sleep 0.05
    done
    if ! is_stopped "${pids[a-$mode]}"; then
        fail "$mode: holder A did not stop itself"
        return 1
    fi
    # B gets the lock only once ZooKeeper expired A's session (A's node is ephemeral).
    start_elect "b-$mode" write --path "$base/$mode" --resource "$res" --value "second-$mode" --mode fenced \
        --session-timeout-ms 2000
}

# second phase: B's write, then A continued; sets verdict (A's "write ..." line) and data (the
# resource's value). Runs in this shell: it waits for processes started here.
verdict=""
data=""
resume_and_judge() {
    local mode=$1 res=$2 b_line
    verdict="no verdict"
    data="?"
    b_line=$(wait_line "b-$mode" '^write ' 30 || true)
    if [ "$b_line" != "write accepted" ] || ! end_ok "b-$mode" 30; then
        fail "$mode: holder B did not write after A's session expired ($b_line)"
        kill -CONT "${pids[a-$mode]}" 2>/dev/null || true
        return 0
    fi
    kill -CONT "${pids[a-$mode]}"
    verdict=$(wait_line "a-$mode" '^write ' 40 || echo "no verdict")
    end_ok "a-$mode" 40 || fail "$mode: holder A did not finish cleanly"
    data=$(timeout 30 "$elect" get --connect "$connect" --node "$res" 2>>"$tmp/get.err" || echo "?")
    echo "  $mode: A's write after SIGCONT: $verdict; the resource holds '$data'"
    sed -n 's/^zkcoro-elect: write attempt/    A: attempt/p' "$tmp/a-$mode.err"
}

res_fenced="/zkcoro-frozen-$run_id-fenced"
res_plain="/zkcoro-frozen-$run_id-plain"
res_checked="/zkcoro-frozen-$run_id-checked"
freeze_and_take_over fenced "$res_fenced" || true
freeze_and_take_over checked "$res_checked" || true
freeze_and_take_over plain "$res_plain" || true

echo "== fenced: guard::async_multi with a check on the lock node"
resume_and_judge fenced "$res_fenced"
if [ "$verdict" = "write rejected: lock lost" ] && [ "$data" = "second-fenced" ]; then
    echo "PASS: the stale holder's fenced write was refused; the resource holds only B's write ($(elapsed))"
else
    fail "fenced: expected 'write rejected: lock lost' and 'second-fenced', got '$verdict' and '$data'"
fi

echo "== checked: client::async_multi with the same check, sent by hand"
resume_and_judge checked "$res_checked"
if [ "$verdict" = "write rejected: check failed: no node" ] && [ "$data" = "second-checked" ]; then
    echo "PASS: the server's check refused the stale transaction ($(elapsed))"
else
    fail "checked: expected 'write rejected: check failed: no node' and 'second-checked', got '$verdict' and '$data'"
fi

echo "== plain: client::async_set_data (negative control)"
resume_and_judge plain "$res_plain"
if [ "$verdict" = "write accepted" ] && [ "$data" = "stale-plain" ]; then
    echo "PASS: negative control: the stale plain write landed over B's ($(elapsed))"
else
    fail "plain: expected 'write accepted' and 'stale-plain', got '$verdict' and '$data'"
fi

echo "== frozen_holder: $failures failure(s) in $(elapsed)"
[ "$failures" -eq 0 ]
