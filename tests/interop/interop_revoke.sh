#!/bin/bash
# Revocation between zkcoro and Apache Curator (makeRevocable / Revoker), both ways.
#
#   zkcoro-with-server -- bash tests/interop/interop_revoke.sh BUILD_DIR
#
# 1. Curator's Revoker.attemptRevoke makes a revocable zkcoro holder let go.
# 2. zkcoro::async_request_revoke (zkcoro-elect revoke) and `zklock revoke` make a Curator
#    holder with a revocation listener let go.
# 3. Non-revocable holders (zkcoro's and Curator's) are left alone by a request.
# 4. A request that comes while a revocable zkcoro acquisition still queues (behind a Curator
#    holder) is seen at once when it is granted: the node is watched from its creation on.
# 5. `zklock --revocable` (--on-revoke term, the default) ends its command when Curator's Revoker
#    asks, and exits with the command's status.
# The cases run side by side on separate paths. Exit 0 only if every check passed.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
source "$here/common.sh"
interop_setup zkcoro-revoke "$@"
# shellcheck source=elect_common.sh
source "$here/elect_common.sh"
zklock="$build/tools/zklock/zklock"
base="/zkcoro-interop/revoke-$run_id"

echo "== interop_revoke: ZooKeeper at $connect, work dir $tmp"
build_curator_holder

# stop MESSAGE: a failed step the later ones depend on: fails and ends the test now.
stop() {
    fail "$*"
    echo "== interop_revoke: stopped at that step, $failures failure(s) in $(elapsed)"
    exit 1
}

# expect NAME WORD SECONDS: NAME exits 0 and its verdict line is WORD.
expect() {
    local name=$1 want=$2 got
    if ! end_ok "$name" "$3"; then
        fail "$name did not finish cleanly"
        return
    fi
    got=$(grep -E -m 1 '^(revoked|not-revoked|lost)$' "$tmp/$name.out" || echo none)
    if [ "$got" = "$want" ]; then
        echo "PASS: $name: $got ($(elapsed))"
    else
        fail "$name: expected '$want', got '$got'"
    fi
}

echo "== holders: a revocable and a plain one of each kind, and a revocable zkcoro waiter"
start_elect zk-revocable hold --path "$base/zk-revocable" --revocable --wait-ms 20000
start_curator_elect cur-revocable hold --path "$base/cur-revocable" --revocable --wait-ms 20000
start_curator_elect cur-revocable2 hold --path "$base/cur-revocable2" --revocable --wait-ms 20000
start_elect zk-plain hold --path "$base/zk-plain" --wait-ms 8000
start_curator_elect cur-plain hold --path "$base/cur-plain" --wait-ms 8000
start_curator_elect cur-first hold --path "$base/queued" --wait-ms 8000
# Every later step needs these holders' nodes: a holder that does not hold ends the test here,
# at the step that failed (wait_line shows its stderr).
n_zk=$(wait_line zk-revocable '^held ' 30 | cut -d' ' -f2) || stop "zk-revocable never held $base/zk-revocable"
n_cur=$(wait_line cur-revocable '^held ' 30 | cut -d' ' -f2) || stop "cur-revocable never held $base/cur-revocable"
n_cur2=$(wait_line cur-revocable2 '^held ' 30 | cut -d' ' -f2) || stop "cur-revocable2 never held $base/cur-revocable2"
n_zkp=$(wait_line zk-plain '^held ' 30 | cut -d' ' -f2) || stop "zk-plain never held $base/zk-plain"
n_curp=$(wait_line cur-plain '^held ' 30 | cut -d' ' -f2) || stop "cur-plain never held $base/cur-plain"
wait_line cur-first '^held ' 30 >/dev/null || stop "the Curator holder of $base/queued did not hold"
# The waiter queues behind cur-first; its node is the second of the queue.
start_elect zk-queued hold --path "$base/queued" --revocable --wait-ms 5000
n_queued=""
for _ in $(seq 1 100); do  # bounded: ~10 s
    mapfile -t nodes < <(timeout 20 "$holder" --participants --connect "$connect" --path "$base/queued" 2>/dev/null || true)
    if [ "${#nodes[@]}" -ge 2 ]; then
        n_queued=${nodes[1]}
        break
    fi
    sleep 0.1
done

echo "== 4. a request to a revocable zkcoro waiter while it queues ($n_queued): sent now, checked last"
if [ -z "$n_queued" ]; then
    fail "the zkcoro waiter's node never appeared behind the Curator holder"
else
    timeout 30 "$elect" revoke --connect "$connect" --node "$n_queued" 2>"$tmp/revoke4.err" ||
        fail "zkcoro-elect revoke of the waiter failed"
    grep -qx "held $base/queued/.*" "$tmp/zk-queued.out" && fail "the waiter held before the request was sent (test too slow?)"
fi

echo "== 3. non-revocable holders are left alone ($n_zkp, $n_curp): sent now, checked later"
timeout 60 "$java_bin" -cp "$cp" CuratorElect revoke --connect "$connect" --node "$n_zkp" 2>>"$tmp/revoke3.err" ||
    fail "CuratorElect revoke of the plain zkcoro holder failed"
timeout 30 "$elect" revoke --connect "$connect" --node "$n_curp" 2>>"$tmp/revoke3.err" ||
    fail "zkcoro-elect revoke of the plain Curator holder failed"
# The requests landed while both still held: their nodes carry them.
for n in "$n_zkp" "$n_curp"; do
    got=$(timeout 30 "$elect" get --connect "$connect" --node "$n" 2>>"$tmp/revoke3.err" || echo "<gone>")
    [ "$got" = "__REVOKE__" ] || fail "the request to $n did not land while it was held (data: '$got')"
done

echo "== 1. Curator's Revoker -> revocable zkcoro holder ($n_zk)"
timeout 60 "$java_bin" -cp "$cp" CuratorElect revoke --connect "$connect" --node "$n_zk" 2>"$tmp/revoke1.err" ||
    fail "CuratorElect revoke failed: $(cat "$tmp/revoke1.err")"
expect zk-revocable revoked 15

echo "== 2. zkcoro's async_request_revoke -> revocable Curator holder ($n_cur)"
timeout 30 "$elect" revoke --connect "$connect" --node "$n_cur" 2>"$tmp/revoke2.err" ||
    fail "zkcoro-elect revoke failed: $(cat "$tmp/revoke2.err")"
expect cur-revocable revoked 15

echo "== 2b. zklock revoke LOCKPATH (the holder) -> revocable Curator holder ($n_cur2)"
timeout 30 "$zklock" revoke -c "$connect" "$base/cur-revocable2" >"$tmp/zklock-revoke.out" 2>&1 ||
    fail "zklock revoke failed: $(cat "$tmp/zklock-revoke.out")"
sed 's/^/  /' "$tmp/zklock-revoke.out"
grep -qF "$n_cur2" "$tmp/zklock-revoke.out" || fail "zklock revoke did not name the holder's node $n_cur2"
expect cur-revocable2 revoked 15

echo "== 3. (check) the non-revocable holders kept the lock to the end of their hold"
expect zk-plain not-revoked 20
expect cur-plain not-revoked 20

echo "== 5. zklock --revocable: a request from Curator's Revoker ends the command (SIGTERM) and releases"
start_zklock() {
    "$zklock" -c "$connect" --revocable --session-timeout 2000 "$base/zklock" -- sleep 30 \
        >"$tmp/zklock-holder.out" 2>"$tmp/zklock-holder.err" &
    pids[zklock-holder]=$!
    started+=("$!")
}
start_zklock
n_zl=""
for _ in $(seq 1 100); do  # bounded: ~10 s
    n_zl=$(timeout 20 "$holder" --participants --connect "$connect" --path "$base/zklock" 2>/dev/null | head -n 1 || true)
    [ -n "$n_zl" ] && break
    sleep 0.1
done
if [ -z "$n_zl" ]; then
    fail "zklock --revocable never held $base/zklock"
else
    t0=$(date +%s%N)
    timeout 60 "$java_bin" -cp "$cp" CuratorElect revoke --connect "$connect" --node "$n_zl" 2>"$tmp/revoke5.err" ||
        fail "CuratorElect revoke of the zklock holder failed"
    rc=0
    wait_pid "${pids[zklock-holder]}" 15 || rc=$?
    took=$(( ($(date +%s%N) - t0) / 1000000 ))
    # sleep dies of SIGTERM: zklock exits with 128+15.
    if [ "$rc" -eq 143 ] && grep -q 'revocation of .* requested' "$tmp/zklock-holder.err"; then
        echo "PASS: zklock --revocable let go ${took} ms after the request (exit $rc) ($(elapsed))"
    else
        fail "zklock --revocable: exit $rc after ${took} ms (expected 143 and a revocation message); its stderr:"
        sed 's/^/    /' "$tmp/zklock-holder.err"
    fi
fi

if [ -n "$n_queued" ]; then
    echo "== 4. (check) the waiter, granted after the Curator holder, saw the request at once"
    end_ok cur-first 20 || fail "the Curator holder of $base/queued failed"
    grep -qx 'not-revoked' "$tmp/cur-first.out" || fail "the Curator holder of $base/queued was revoked"
    expect zk-queued revoked 20
fi

echo "== interop_revoke: $failures failure(s) in $(elapsed)"
[ "$failures" -eq 0 ]
