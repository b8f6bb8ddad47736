#!/bin/bash
# Interop test of zkcoro::mutex against Apache Curator's InterProcessMutex on one ZooKeeper.
#
#   zkcoro-with-server -- bash tests/interop/interop_mutex.sh BUILD_DIR
#
# Needs ZK_CONNECT (zkcoro-with-server sets it), BUILD_DIR/tests/interop/{zkcoro-holder,
# interval-check}, and javac/java with Debian's Curator jars (see build.sh).
#
# 1. Mixed contention: 2 CuratorHolder processes and 2 zkcoro-holder processes (one of them with
#    two tasks) contend on ONE path for ~4 s, holding ~15 ms, all logging into one file;
#    interval-check must find no overlap and every process/task must have acquired.
# 1b. Lingering: a zkcoro-holder with --linger-ms 30000 and a CuratorHolder (2 s acquire timeout)
#    on one path: no overlap, and Curator acquires (its node makes the lingering node go).
# 2. Participants order: a zkcoro-holder holds the lock once for a long time, a CuratorHolder and
#    another zkcoro-holder queue behind it; once the three nodes exist, Curator's
#    getParticipantNodes and zkcoro's async_participants must print identical lists, holder
#    first. The three holds are then checked for overlap too.
# 3. negative_control.sh: the checker detects overlaps on different paths and passes on one.
#
# Every wait is bounded; only processes started here are ended (by PID). Exit 0 only if every
# check passed; 1 on a failed check; 2 on bad usage or setup trouble.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
source "$here/common.sh"
interop_setup zkcoro-interop "$@"
duration_ms=${DURATION_MS:-4000}
hold_ms=${HOLD_MS:-15}
long_hold_ms=${LONG_HOLD_MS:-6000}

# zk_participants PATH: zkcoro's participants list (bounded); empty output on failure
zk_participants() {
    timeout 30 "$holder" --participants --connect "$connect" --path "$1" 2>>"$tmp/participants.err" || true
}

base="/zkcoro-interop/mutex-$run_id"

echo "== interop_mutex: ZooKeeper at $connect, work dir $tmp"
build_curator_holder

# ---------------------------------------------------------------------------------------------
echo "== 1. mixed contention on $base/shared: 2 Curator + 2 zkcoro processes (3 zkcoro tasks)," \
     "${duration_ms} ms, hold ${hold_ms} ms"
log1="$tmp/mixed.log"
: >"$log1"
common=(--path "$base/shared" --duration-ms "$duration_ms" --hold-ms "$hold_ms" --log "$log1")
start_curator cur-a --recipe mutex "${common[@]}" --id cur-a
start_curator cur-b --recipe mutex "${common[@]}" --id cur-b
start_zkcoro zk-a "${common[@]}" --id zk-a --tasks 2
start_zkcoro zk-b "${common[@]}" --id zk-b
limit=$(( duration_ms / 1000 + 60 ))
for n in cur-a cur-b zk-a zk-b; do
    finish "$n" "$limit" || true
done
if "$check" --max-print 10 --expect-ids cur-a,cur-b,zk-a.1,zk-a.2,zk-b "$log1" | sed 's/^/  /'; then
    echo "PASS: mixed contention: no overlap, every process and task acquired ($(elapsed))"
else
    fail "mixed contention: interval-check reported overlaps or missing ids"
fi

# ---------------------------------------------------------------------------------------------
echo "== 1b. lingering: a zkcoro process with --linger-ms 30000 and a Curator process on" \
     "$base/linger, ${duration_ms} ms, hold ${hold_ms} ms"
# Curator's acquire timeout (2 s) is far below the linger window: it acquires only if its node
# makes the lingering node go at once.
log1b="$tmp/linger.log"
: >"$log1b"
common=(--path "$base/linger" --duration-ms "$duration_ms" --hold-ms "$hold_ms" --log "$log1b")
start_curator lg-cur --recipe mutex "${common[@]}" --id lg-cur --acquire-timeout-ms 2000
start_zkcoro lg-zk "${common[@]}" --id lg-zk --linger-ms 30000
limit=$(( duration_ms / 1000 + 60 ))
for n in lg-cur lg-zk; do
    finish "$n" "$limit" || true
done
if "$check" --max-print 10 --expect-ids lg-cur,lg-zk "$log1b" | sed 's/^/  /'; then
    echo "PASS: lingering: no overlap, the Curator contender acquired within its 2 s timeout ($(elapsed))"
else
    fail "lingering: interval-check reported overlaps or missing ids"
fi

# ---------------------------------------------------------------------------------------------
echo "== 2. participants order on $base/queue: zkcoro holds ${long_hold_ms} ms, Curator and zkcoro queue"
qpath="$base/queue"
log2="$tmp/queue.log"
: >"$log2"
# One acquisition each (--max-count 1); the waiters' acquire timeout outlasts the long hold so
# that they never leave the queue while it is compared.
start_zkcoro q-holder --path "$qpath" --duration-ms 1000 --max-count 1 --hold-ms "$long_hold_ms" \
    --log "$log2" --id q-holder
holder_node=""
for _ in $(seq 1 100); do  # bounded: at most ~100 polls
    mapfile -t nodes < <(zk_participants "$qpath")
    if [ "${#nodes[@]}" -ge 1 ]; then
        holder_node=${nodes[0]}
        break
    fi
    sleep 0.1
done
queue_ok=1
if [ -z "$holder_node" ]; then
    fail "participants: the long holder's node never appeared"
    queue_ok=0
else
    echo "  holder node: $holder_node"
    waiter_args=(--path "$qpath" --duration-ms $((long_hold_ms + 10000)) --max-count 1 --hold-ms 10
                 --acquire-timeout-ms $((long_hold_ms + 10000)) --log "$log2")
    start_curator q-curator --recipe mutex "${waiter_args[@]}" --id q-curator
    start_zkcoro q-zkcoro "${waiter_args[@]}" --id q-zkcoro
    nodes=()
    for _ in $(seq 1 150); do
        mapfile -t nodes < <(zk_participants "$qpath")
        [ "${#nodes[@]}" -ge 3 ] && break
        sleep 0.1
    done
    if [ "${#nodes[@]}" -ne 3 ]; then
        fail "participants: expected 3 nodes in the queue, saw ${#nodes[@]}: ${nodes[*]-}"
        queue_ok=0
    else
        timeout 60 "$java_bin" -cp "$cp" CuratorHolder --participants --connect "$connect" \
            --path "$qpath" --recipe mutex >"$tmp/curator-participants.txt" 2>"$tmp/curator-participants.err" || {
            fail "participants: CuratorHolder --participants failed"
            sed 's/^/    /' "$tmp/curator-participants.err"
            queue_ok=0
        }
        zk_participants "$qpath" >"$tmp/zkcoro-participants.txt"
        # The queue must not have moved while Curator was asked (the holder still holds).
        printf '%s\n' "${nodes[@]}" >"$tmp/zkcoro-participants-before.txt"
        echo "  Curator getParticipantNodes:"
        sed 's/^/    /' "$tmp/curator-participants.txt"
        echo "  zkcoro async_participants:"
        sed 's/^/    /' "$tmp/zkcoro-participants.txt"
        if [ "$queue_ok" -eq 1 ]; then
            if ! cmp -s "$tmp/zkcoro-participants-before.txt" "$tmp/zkcoro-participants.txt"; then
                fail "participants: the queue changed during the comparison (the long hold ended too soon?)"
                queue_ok=0
            elif ! cmp -s "$tmp/curator-participants.txt" "$tmp/zkcoro-participants.txt"; then
                fail "participants: Curator's and zkcoro's lists differ"
                diff "$tmp/curator-participants.txt" "$tmp/zkcoro-participants.txt" | sed 's/^/    /' || true
                queue_ok=0
            elif [ "$(head -n 1 "$tmp/zkcoro-participants.txt")" != "$holder_node" ]; then
                fail "participants: the holder ($holder_node) is not listed first"
                queue_ok=0
            fi
        fi
    fi
fi
limit=$(( long_hold_ms / 1000 + 60 ))
for n in q-holder q-curator q-zkcoro; do
    [ -n "${pids[$n]:-}" ] || continue
    finish "$n" "$limit" || queue_ok=0
done
if [ -n "$holder_node" ]; then
    if ! "$check" --expect-ids q-holder,q-curator,q-zkcoro "$log2" | sed 's/^/  /'; then
        fail "participants: the queued holds overlapped or did not all happen"
        queue_ok=0
    fi
fi
if [ "$queue_ok" -eq 1 ]; then
    echo "PASS: participants: identical 3-node lists from Curator and zkcoro, holder first," \
         "then the queue drained without overlap ($(elapsed))"
fi

# ---------------------------------------------------------------------------------------------
echo "== 3. negative/positive controls of the checker (negative_control.sh)"
rc=0
INTERVAL_CHECK="$check" timeout 120 sh "$here/negative_control.sh" "$connect" "$tmp/java" \
    >"$tmp/control.out" 2>"$tmp/control.err" || rc=$?
sed 's/^/  /' "$tmp/control.out"
if [ "$rc" -eq 0 ]; then
    echo "PASS: negative_control.sh ($(elapsed))"
else
    fail "negative_control.sh exited $rc; its stderr:"
    sed 's/^/    /' "$tmp/control.err"
fi

echo "== interop_mutex: $failures failure(s) in $(elapsed)"
[ "$failures" -eq 0 ]
