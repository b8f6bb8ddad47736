#!/bin/bash
# Mixed leader elections between zkcoro and Apache Curator on one path, with leaders killed.
#
#   zkcoro-with-server -- bash tests/interop/interop_election.sh BUILD_DIR [latch|selector]...
#
# For each kind (default: both):
#   latch     2 Curator LeaderLatch and 2 zkcoro::leader_latch participants;
#   selector  2 Curator LeaderSelector (autoRequeue) and 2 zkcoro::run_as_leader (requeue).
# Every participant appends "gained"/"lost" events with CLOCK_MONOTONIC times to one file. Each
# round the test finds the leader, kills its process with SIGKILL, notes the time after it died
# ("killed"), and starts it again with the same id; a new leader follows once ZooKeeper expired
# the dead one's session (2 s). Rounds go on until every participant has led and there were at
# least 6 leader changes (at most 10 rounds, 120 s); fewer than 6 changes (MIN_LEADER_CHANGES) is a
# failure. The events become leadership intervals
# (gained .. lost or killed) that interval-check verifies: never two leaders at once, and every
# participant led at least once. A second "gained" of one id before its "lost" or "killed" is a
# failure (its term is kept from the first: a new start would hide an overlap in between). The
# figures are printed on a line starting with "figures:".
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build_arg=$1
shift
kinds=("$@")
[ "${#kinds[@]}" -gt 0 ] || kinds=(latch selector)
# shellcheck source=common.sh
source "$here/common.sh"
interop_setup zkcoro-election "$build_arg"
# shellcheck source=elect_common.sh
source "$here/elect_common.sh"
base="/zkcoro-interop/election-$run_id"
zklock="$build/tools/zklock/zklock"
ids=(cur-1 zk-1 cur-2 zk-2)

echo "== interop_election: ZooKeeper at $connect, work dir $tmp"
build_curator_holder

# start_participant KIND ID EVENTS
start_participant() {
    local kind=$1 id=$2 events=$3
    case $id in
        cur-*) start_curator_elect "$kind-$id" "$kind" --path "$base/$kind" --id "$id" --events "$events" ;;
        *) start_elect "$kind-$id" "$kind" --path "$base/$kind" --id "$id" --events "$events" ;;
    esac
}

# leaders EVENTS: the ids whose last event is "gained", one per line.
leaders() {
    sort -n -k1,1 "$1" | awk '{ last[$2] = $3 } END { for (id in last) if (last[id] == "gained") print id }'
}

# kill_participant KIND ID EVENTS: SIGKILL, reap, then note the time (after its death).
kill_participant() {
    local kind=$1 id=$2 events=$3
    kill -KILL "${pids[$kind-$id]}" 2>/dev/null || true
    wait_pid "${pids[$kind-$id]}" 10 >/dev/null 2>&1 || true
    echo "$("$elect" now) $id killed" >>"$events"
}

# check_status KIND: once all four participants queue, `zklock status --json` shows them (the
# latch as recipe leader-latch, the selector as a mutex), one holding, their ids as data.
check_status() {
    local kind=$1 want=mutex json="" n=0 id
    [ "$kind" = latch ] && want=leader-latch
    for _ in $(seq 1 100); do  # bounded: ~20 s
        json=$(timeout 20 "$zklock" status --json -c "$connect" "$base/$kind" 2>>"$tmp/status.err" || true)
        n=$(grep -o '"node"' <<<"$json" | wc -l)
        [ "$n" -ge 4 ] && break
        sleep 0.2
    done
    local ok=1
    [ "$n" -eq 4 ] || ok=0
    grep -q "\"recipe\": *\"$want\"" <<<"$json" || ok=0
    [ "$(grep -o '"holding": *true' <<<"$json" | wc -l)" -eq 1 ] || ok=0
    for id in "${ids[@]}"; do
        grep -q "\"data\": *\"$id\"" <<<"$json" || ok=0
    done
    if [ "$ok" -eq 1 ]; then
        echo "PASS: $kind: zklock status lists the 4 participants as $want, one holding, with their ids"
    else
        fail "$kind: zklock status (want recipe $want, 4 participants, one holding, ids ${ids[*]}): $json"
    fi
}

run_kind() {
    local kind=$1 events="$tmp/$1.events" intervals="$tmp/$1.intervals" id leader rounds=0
    local t0 deadline
    : >"$events"
    echo "== $kind: ${ids[*]} on $base/$kind"
    t0=$(date +%s%N)
    deadline=$(( t0 + 120 * 1000000000 ))
    for id in "${ids[@]}"; do
        start_participant "$kind" "$id" "$events"
    done
    while [ "$rounds" -lt 10 ] && [ "$(date +%s%N)" -lt "$deadline" ]; do
        # Wait (at most 20 s) for exactly one leader.
        leader=""
        for _ in $(seq 1 400); do
            mapfile -t now < <(leaders "$events")
            if [ "${#now[@]}" -gt 1 ]; then
                fail "$kind: ${#now[@]} leaders at once: ${now[*]}"  # interval-check reports it too
            fi
            if [ "${#now[@]}" -ge 1 ]; then
                leader=${now[0]}
                break
            fi
            sleep 0.05
        done
        if [ -z "$leader" ]; then
            fail "$kind: no leader within 20 s (round $rounds)"
            break
        fi
        local led changes
        led=$(awk '$3 == "gained" { print $2 }' "$events" | sort -u | wc -l)
        changes=$(grep -c ' gained' "$events" || true)
        if [ "$led" -ge "${#ids[@]}" ] && [ "$changes" -ge 7 ]; then
            break
        fi
        [ "$rounds" -gt 0 ] || check_status "$kind"
        rounds=$((rounds + 1))
        echo "  round $rounds: killing the leader $leader"
        kill_participant "$kind" "$leader" "$events"
        start_participant "$kind" "$leader" "$events"
    done
    for id in "${ids[@]}"; do
        kill_participant "$kind" "$id" "$events"
    done
    # Intervals "<id> X <gained> <lost|killed>"; a "gained" inside a term goes to $intervals.twice.
    sort -n -k1,1 "$events" | awk -v twice="$intervals.twice" '
        $3 == "gained" && ($2 in start) { print $2, "gained at", $1, "inside its term from", start[$2] > twice; next }
        $3 == "gained" { start[$2] = $1 }
        ($3 == "lost" || $3 == "killed") && ($2 in start) { print $2, "X", start[$2], $1; delete start[$2] }
    ' >"$intervals"
    if [ -s "$intervals.twice" ]; then
        fail "$kind: \"gained\" twice without \"lost\" or \"killed\" between:"
        sed 's/^/    /' "$intervals.twice"
    fi
    local gains participants check_out rc=0
    gains=$(grep -c ' gained' "$events" || true)
    participants=$(awk '$3 == "gained" { print $2 }' "$events" | sort -u | wc -l)
    check_out=$("$check" --max-print 10 --expect-ids "$(IFS=,; echo "${ids[*]}")" "$intervals" 2>&1) || rc=$?
    echo "$check_out" | sed 's/^/  /'
    local overlaps
    overlaps=$(echo "$check_out" | sed -n 's/^[A-Z]*: \([0-9]*\) violation(s)$/\1/p')
    echo "figures: $kind: leader changes=$((gains > 0 ? gains - 1 : 0)) terms=$gains kills=$rounds" \
         "participants=$participants/${#ids[@]} (2 Curator, 2 zkcoro) overlaps=$overlaps" \
         "time=$(( ($(date +%s%N) - t0) / 1000000 )) ms"
    # The rounds stop at 10 even when fewer changes were seen: the promise is checked here.
    local min_changes=${MIN_LEADER_CHANGES:-6}
    if [ "$((gains > 0 ? gains - 1 : 0))" -lt "$min_changes" ]; then
        fail "$kind: only $((gains > 0 ? gains - 1 : 0)) leader change(s), at least $min_changes expected" \
             "(rounds=$rounds); events:"
        sed 's/^/    /' "$events"
    fi
    if [ "$rc" -eq 0 ]; then
        echo "PASS: $kind: one leader at a time, every participant led ($(elapsed))"
    else
        fail "$kind: interval-check failed (exit $rc); events:"
        sed 's/^/    /' "$events"
    fi
}

for k in "${kinds[@]}"; do
    case $k in
        latch|selector) run_kind "$k" ;;
        *) echo "$0: unknown kind $k (latch or selector)" >&2; exit 2 ;;
    esac
done

echo "== interop_election: $failures failure(s) in $(elapsed)"
[ "$failures" -eq 0 ]
