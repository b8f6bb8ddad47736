#!/usr/bin/env bash
# zklock through Sentinel (-c redis+sentinel://...) beside a redis-py Lock holder that finds the
# master with redis.sentinel.Sentinel, on one key of the cluster zkcoro-with-sentinel started
# ($ZKCORO_TEST_SENTINEL): interval-check must find 0 overlaps; then the negative control (two
# keys) where it must find some; then bad inputs (a wrong master name, every sentinel down), and
# the server's refusals (redis:// at a sentinel's port, an ACL user without WAIT).
#   zklock_sentinel.sh ZKLOCK INTERVAL_CHECK REDIS_PY_HOLDER
# Every wait is bounded; only processes started here are ended (by PID).
set -uo pipefail
zklock=$1
check=$2
py_holder=$3
url=${ZKCORO_TEST_SENTINEL:?run under zkcoro-with-sentinel}
python=/usr/bin/python3
"$python" -c 'import redis.sentinel' 2>/dev/null || { echo "FAIL: redis-py missing (python3-redis)"; exit 1; }
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
tmp=$(mktemp -d)
started=()
cleanup() {
    # Only in this shell: a job started with & is a forked copy of this shell until its exec, and
    # one signalled in that moment runs this trap too (bash 5.2).
    if [ "$BASHPID" = "$$" ]; then
        for p in "${started[@]}"; do kill "$p" 2>/dev/null; done
        rm -rf "$tmp"
    fi
}
trap cleanup EXIT
# One hold under zklock: the command logs "<id> X <enter_ns> <exit_ns>" (CLOCK_MONOTONIC).
hold_cmd='import sys, time
a = time.monotonic_ns(); time.sleep(0.02); b = time.monotonic_ns()
with open(sys.argv[1], "a") as f: f.write(f"{sys.argv[2]} X {a} {b}\n")'
# zk_loop KEY LOG ID N: N holds, one zklock process each
zk_loop() {
    local ok=0
    for _ in $(seq 1 "$4"); do
        if timeout 30 "$zklock" -c "$url" -t 20 "$1" -- "$python" -c "$hold_cmd" "$2" "$3"; then ok=$((ok + 1)); fi
    done
    [ "$ok" -eq "$4" ]
}

key="zklock-sentinel-$$"
echo "== 1. one key through Sentinel: zklock (20 holds) beside redis-py's Lock via redis.sentinel (40 holds)"
"$python" "$py_holder" --url "$url" --key "$key" --holds 40 --hold-ms 10 --sleep 0.005 --time-limit 60 \
    --id py --log "$tmp/py.log" >"$tmp/py.out" 2>"$tmp/py.err" &
py=$!
started+=("$py")
zk_loop "$key" "$tmp/zk.log" zk 20 || fail "a zklock hold failed"
timeout 70 tail --pid="$py" -f /dev/null
wait "$py" || fail "the redis-py holder exited with $? ($(tail -3 "$tmp/py.err"))"
if "$check" --max-print 5 --expect-ids py,zk "$tmp/py.log" "$tmp/zk.log"; then
    echo "PASS: 0 overlaps, both held ($(wc -l <"$tmp/zk.log") zklock holds, $(wc -l <"$tmp/py.log") redis-py holds)"
else
    fail "interval-check reported overlaps (or a holder that never held)"
fi

echo "== 2. negative control: the same on two keys: overlaps expected"
"$python" "$py_holder" --url "$url" --key "$key-a" --holds 100 --hold-ms 20 --sleep 0.005 --time-limit 60 \
    --id npy --log "$tmp/npy.log" >/dev/null 2>"$tmp/npy.err" &
npy=$!
started+=("$npy")
zk_loop "$key-b" "$tmp/nzk.log" nzk 20 || fail "a zklock hold (negative control) failed"
timeout 70 tail --pid="$npy" -f /dev/null
wait "$npy" || fail "the redis-py holder (negative control) exited with $?"
rc=0
"$check" --max-print 2 --expect-ids npy,nzk "$tmp/npy.log" "$tmp/nzk.log" >"$tmp/neg.txt" 2>&1 || rc=$?
if [ "$rc" -eq 1 ] && grep -q overlap "$tmp/neg.txt"; then
    echo "PASS: negative control: interval-check found the overlaps"
else
    fail "negative control: interval-check exit $rc, expected 1 with overlaps"
fi

echo "== 3. bad inputs: a wrong master name (69), every sentinel down (69), no master name (64)"
bad_master=${url%/*}/no-such-master
out=$(timeout 20 "$zklock" -c "$bad_master" "$key" -- true 2>&1); rc=$?
[ "$rc" -eq 69 ] || fail "wrong master name: exit $rc, expected 69"
grep -q "no sentinel knows a master named 'no-such-master'" <<<"$out" || fail "wrong master name: message: $out"
p1=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
out=$(timeout 20 "$zklock" -c "redis+sentinel://127.0.0.1:$p1/zkm" "$key" -- true 2>&1); rc=$?
[ "$rc" -eq 69 ] || fail "sentinels down: exit $rc, expected 69"
grep -q "no sentinel answered for master 'zkm' (127.0.0.1:$p1" <<<"$out" || fail "sentinels down: message: $out"
out=$(timeout 20 "$zklock" -c "${url%/*}" "$key" -- true 2>&1); rc=$?
[ "$rc" -eq 64 ] || fail "no master name: exit $rc, expected 64"
echo "   $out" | head -2

echo "== 4. the server's refusals keep their text (issue 32): redis:// at a sentinel's port (76), an ACL user without WAIT (76)"
s1=${ZKCORO_TEST_SENTINEL_PORTS%%,*}
out=$(timeout 20 "$zklock" -c "redis://127.0.0.1:$s1" -t 2 "$key" -- true 2>&1); rc=$?
[ "$rc" -eq 76 ] || fail "redis:// at a sentinel: exit $rc, expected 76"
grep -q "unknown command 'EVAL" <<<"$out" || fail "redis:// at a sentinel: no server text: $out"
grep -q "redis+sentinel://" <<<"$out" || fail "redis:// at a sentinel: redis+sentinel:// not suggested: $out"
master_port=$(redis-cli -p "$s1" SENTINEL get-master-addr-by-name "$ZKCORO_TEST_MASTER_NAME" | sed -n 2p)
redis-cli -p "$master_port" ACL SETUSER "nowait-$$" reset on '>pw' '~*' '&*' +@all -wait >/dev/null
nowait_url="redis+sentinel://nowait-$$:pw@${url#redis+sentinel://}"
out=$(timeout 20 "$zklock" -c "$nowait_url" -t 5 "$key-nowait" -- true 2>&1); rc=$?
[ "$rc" -eq 76 ] || fail "ACL user without WAIT: exit $rc, expected 76 ($out)"
grep -q "NOPERM this user has no permissions to run the 'wait' command" <<<"$out" || fail "ACL user without WAIT: no server text: $out"
grep -q "replicas in time" <<<"$out" && fail "ACL user without WAIT: told replicas were slow: $out"
[ "$(redis-cli -p "$master_port" EXISTS "$key-nowait")" = 0 ] || fail "ACL user without WAIT: the key is left behind"
redis-cli -p "$master_port" ACL DELUSER "nowait-$$" >/dev/null

echo "== 5. -v names the master Sentinel gave (was 'at :0'); a database above 15 is the server's to refuse (issue 32 item 13)"
out=$(timeout 20 "$zklock" -v -c "$url" -t 10 "$key-v" -- true 2>&1); rc=$?
[ "$rc" -eq 0 ] || fail "-v through Sentinel: exit $rc ($out)"
grep -q "connected to Redis master '$ZKCORO_TEST_MASTER_NAME' at 127.0.0.1:$master_port, named by Sentinel" <<<"$out" ||
    fail "-v through Sentinel does not name the master at 127.0.0.1:$master_port: $out"
grep -q " at :0" <<<"$out" && fail "-v through Sentinel: 'at :0': $out"
# The master has the default 16 databases: /16 goes to the server, whose SELECT says no (its text).
out=$(timeout 20 "$zklock" -c "redis://127.0.0.1:$master_port/16" -t 5 "$key-db" -- true 2>&1); rc=$?
[ "$rc" -eq 69 ] || fail "redis://.../16 on a 16-database server: exit $rc, expected 69 ($out)"
grep -q "SELECT 16 refused by 127.0.0.1:$master_port: ERR DB index is out of range" <<<"$out" ||
    fail "redis://.../16: not the server's refusal: $out"
# A server of 32 databases (started here, ended by PID): /20 holds the key in database 20.
p2=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$p2" --bind 127.0.0.1 --save '' --appendonly no --databases 32 --dir "$tmp" \
    >"$tmp/db32.log" 2>&1 &
db32=$!
started+=("$db32")
for _ in $(seq 1 100); do [ "$(redis-cli -p "$p2" PING 2>/dev/null)" = PONG ] && break; sleep 0.05; done
out=$(timeout 20 "$zklock" -c "redis://127.0.0.1:$p2/20" -t 5 "$key-db" -- sh -c "redis-cli -p $p2 -n 20 EXISTS $key-db" 2>&1)
rc=$?
[ "$rc" -eq 0 ] && [ "$out" = 1 ] || fail "redis://.../20 on a 32-database server: exit $rc, the key in db 20: '$out'"
kill "$db32"
wait "$db32" 2>/dev/null

[ "$failures" -eq 0 ] && echo "zklock_sentinel: all passed" || echo "zklock_sentinel: $failures failure(s)"
[ "$failures" -eq 0 ]
