#!/usr/bin/env bash
# zklock on a Redis lock (-c redis://...), against the real redis-server that zkcoro-with-redis
# started ($ZKCORO_TEST_REDIS, $ZKCORO_TEST_REDIS_PORT): the command's environment and exit
# status, --nonblock against a holder, the lock lost while the command runs (exit 70, the command
# terminated), bad or unreachable servers (64, 69), no password in any message, other schemes
# and keys named like a subcommand (zklock run KEY), --fair's order; -s/-w, --semaphore N and
# status on each recipe.
#   zklock_redis.sh ZKLOCK
set -uo pipefail
zklock=$1
url=${ZKCORO_TEST_REDIS:?run under zkcoro-with-redis}
port=${ZKCORO_TEST_REDIS_PORT:?}
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
rcli() { redis-cli -p "$port" "$@"; }
key="zklock-redis-$$"
tmp=$(mktemp -d)
# EXIT trap: only in this shell. A job started with & is a forked copy of this shell until its
# exec, and one signalled in that moment runs this trap too (bash 5.2): it would remove $tmp.
trap 'if [ "$BASHPID" = "$$" ]; then rm -rf "$tmp"; fi' EXIT

# 1. The environment carries the fencing token and the key; the command's status passes through.
out=$("$zklock" -c "$url" "$key" -- sh -c 'echo "$ZKLOCK_FENCING_TOKEN $ZKLOCK_NODE"; exit 7')
rc=$?
[ "$rc" -eq 7 ] || fail "exit status $rc, expected the command's 7"
read -r token node <<<"$out"
[ "$node" = "$key" ] || fail "ZKLOCK_NODE '$node', expected '$key'"
[ "${token:-0}" -gt 0 ] || fail "ZKLOCK_FENCING_TOKEN '$token' is not positive"
[ "$(rcli EXISTS "$key")" = 0 ] || fail "the key is left behind after the run"
out2=$("$zklock" -c "$url" "$key" -- sh -c 'echo "$ZKLOCK_FENCING_TOKEN"')
[ "${out2:-0}" -gt "$token" ] || fail "the second fencing token $out2 is not above the first $token"

# 2. --nonblock while another zklock holds the key: 75, the command not run.
"$zklock" -c "$url" "$key" -- sh -c "touch $tmp/holding; sleep 3" &
holder=$!
for _ in $(seq 1 100); do [ -e "$tmp/holding" ] && break; sleep 0.05; done
[ -e "$tmp/holding" ] || fail "the first holder did not start its command within 5 s"
"$zklock" -c "$url" -n "$key" -- touch "$tmp/second-ran"
rc=$?
[ "$rc" -eq 75 ] || fail "--nonblock on a held key: exit $rc, expected 75"
[ ! -e "$tmp/second-ran" ] || fail "--nonblock ran its command while the key was held"
"$zklock" -c "$url" status "$key" >"$tmp/st" 2>&1
grep -q "^$key (mutex): 1 entry" "$tmp/st" && grep -q "^  1 holds .*expires in .*  $key\$" "$tmp/st" &&
    grep -q "^fencing counter: [0-9]* ($key:fencing)" "$tmp/st" || fail "status of a held mutex: $(cat "$tmp/st")"
wait "$holder" || fail "the first holder exited with $?"

# 3. The lock lost while the command runs: the key is taken away (as an expiry would); the renewal
# finds it gone, zklock terminates the command and exits 70.
start=$(date +%s%N)
"$zklock" -c "$url" --ttl 0.6 "$key" -- sh -c "touch $tmp/lost-holding; sleep 20" &
holder=$!
for _ in $(seq 1 100); do [ -e "$tmp/lost-holding" ] && break; sleep 0.05; done
rcli DEL "$key" >/dev/null
wait "$holder"
rc=$?
took_ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$rc" -eq 70 ] || fail "lost lock: exit $rc, expected 70"
[ "$took_ms" -lt 10000 ] || fail "lost lock: zklock took $took_ms ms (the command sleeps 20 s: not terminated?)"

# 4. A bad URL is a usage error; a server that is not there is unavailable.
"$zklock" -c "redis://127.0.0.1:99999" "$key" -- true 2>"$tmp/err"
rc=$?
[ "$rc" -eq 64 ] || fail "bad URL: exit $rc, expected 64"
grep -q 65535 "$tmp/err" || fail "bad URL: the message does not say why: $(cat "$tmp/err")"
"$zklock" -c "redis://127.0.0.1:1" "$key" -- true 2>"$tmp/err"
rc=$?
[ "$rc" -eq 69 ] || fail "no server: exit $rc, expected 69"
"$zklock" -c "$url" --revocable "$key" -- true 2>/dev/null
[ $? -eq 64 ] || fail "--revocable on Redis is not refused as a usage error"

# 5. The scheme in any case is Redis; rediss:// is refused with the reason (no TLS in hiredis 0.14).
upper=${url/redis:\/\//REDIS://}
out=$("$zklock" -c "$upper" "$key" -- sh -c 'echo "$ZKLOCK_NODE"')
[ $? -eq 0 ] && [ "$out" = "$key" ] || fail "REDIS:// (upper case) did not run the command on the key: '$out'"
"$zklock" -c "${url/redis:/rediss:}" "$key" -- true 2>"$tmp/err"
rc=$?
[ "$rc" -eq 64 ] || fail "rediss://: exit $rc, expected 64"
grep -q "TLS is not supported" "$tmp/err" || fail "rediss://: the message does not say why: $(cat "$tmp/err")"

# 6. A password for a server without one: the server's own text, exit 69, no reconnection loop.
"$zklock" -c "${url/redis:\/\//redis://nosuchpassword@}" -t 5 "$key" -- true 2>"$tmp/err"
rc=$?
[ "$rc" -eq 69 ] || fail "a password for a server without one: exit $rc, expected 69"
grep -q "AUTH" "$tmp/err" || fail "a password for a server without one: no server text: $(cat "$tmp/err")"

# 7. A silent port (a listener that never answers): -t 1 bounds the connect, not the 5 s default.
if command -v python3 >/dev/null; then
    python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
print(s.getsockname()[1], flush=True); time.sleep(30)' >"$tmp/silent-port" &
silent=$!
    for _ in $(seq 1 100); do [ -s "$tmp/silent-port" ] && break; sleep 0.05; done
    start=$(date +%s%N)
    "$zklock" -c "redis://127.0.0.1:$(cat "$tmp/silent-port")" -t 1 "$key" -- true 2>"$tmp/err"
    rc=$?
    took_ms=$(( ($(date +%s%N) - start) / 1000000 ))
    kill "$silent" 2>/dev/null; wait "$silent" 2>/dev/null
    [ "$rc" -eq 69 ] || fail "silent port: exit $rc, expected 69"
    [ "$took_ms" -lt 2500 ] || fail "silent port with -t 1: zklock took $took_ms ms to give up"
fi

# 8. The server refuses (a key of another type): exit 76, the code's hint in the message.
rcli LPUSH "$key-list" x >/dev/null
"$zklock" -c "$url" -t 2 "$key-list" -- true 2>"$tmp/err"
rc=$?
[ "$rc" -eq 76 ] || fail "WRONGTYPE: exit $rc, expected 76"
grep -q "WRONGTYPE" "$tmp/err" || fail "WRONGTYPE: the message does not say so: $(cat "$tmp/err")"
rcli DEL "$key-list" >/dev/null

# 9. SIGTERM or SIGINT to a zklock waiting behind a holder that publishes nothing (a plain SET
# with a 30 s TTL: the grant cannot come first): the acquisition is cancelled, exit 128+N, the
# command not run, the holder's key untouched. The signal goes once zklock -v says it is connected
# to Redis: it starts the acquisition in that same step, before it handles any signal (on Redis,
# which keeps no queue, zklock shows no waiting line). (A signal at the very moment of the grant
# is a race of its own: one fresh-machine run under ASan saw zklock exit 1 there with the key
# left; see the note of that change. It is not what this check is about.)
# The bounds are 60 s: they are reached only when something is wrong. One fresh-root run under ASan
# saw no "connected" line within the 10 s they were, and the SIGINT then sent ignored: bash starts a
# background command with SIGINT ignored until zklock's own handler is installed, and that zklock
# was still starting (or blocked writing its line). A stall prints the process's state
# (proc_state), so that the next one says where it was.
# Each round writes its own file: with one file for all rounds, the poll could read the last
# round's "connected" line before the new zklock's shell had truncated it, and signal that shell
# before its exec (its copy of the EXIT trap then removed $tmp: two fresh-root runs lost the
# directory so, at four and five sanitizer tests at a time).
proc_state() {  # PID: the kernel's view of a process that did not answer in time
    local p=$1
    [ -d "/proc/$p" ] || { echo "(pid $p: gone)"; return; }
    echo "pid $p: $(grep -E '^(State|SigBlk|SigIgn|SigCgt):' "/proc/$p/status" | tr '\n\t' '  ')" \
        "wchan=$(cat "/proc/$p/wchan" 2>/dev/null) syscall=$(cut -d' ' -f1 "/proc/$p/syscall" 2>/dev/null)"
}
for sig in TERM INT TERM INT; do
    k="$key-sig-$sig-$RANDOM"
    want=$((128 + $(kill -l "$sig")))
    rcli SET "$k" foreign-holder PX 30000 >/dev/null
    started=$SECONDS
    err=$tmp/$k.err
    "$zklock" -v -c "$url" "$k" -- touch "$tmp/sig-ran" 2>"$err" &
    waiter=$!
    for _ in $(seq 1200); do  # at most 60 s
        grep -q '^zklock: connected to Redis' "$err" && break
        kill -0 "$waiter" 2>/dev/null || break
        sleep 0.05
    done
    grep -q '^zklock: connected to Redis' "$err" ||
        fail "SIG$sig case: zklock -v did not say it was connected within 60 s: $(cat "$err"); $(proc_state "$waiter")"
    [ $((SECONDS - started)) -lt 5 ] ||
        echo "zklock_redis: note: SIG$sig case: zklock took $((SECONDS - started)) s to say it was connected" >&2
    kill -"$sig" "$waiter" 2>/dev/null
    for _ in $(seq 1200); do  # at most 60 s
        kill -0 "$waiter" 2>/dev/null || break
        sleep 0.05
    done
    if kill -0 "$waiter" 2>/dev/null; then
        fail "SIG$sig while waiting: zklock still running 60 s later: ended (SIGKILL); $(proc_state "$waiter")"
        kill -KILL "$waiter"
    fi
    wait "$waiter"
    rc=$?
    [ "$rc" -eq "$want" ] || fail "SIG$sig while waiting: exit $rc, expected $want: $(cat "$err")"
    grep -q "SIG$sig while waiting: giving up" "$err" ||
        fail "SIG$sig while waiting: zklock did not say it gave up waiting: $(cat "$err")"
    [ ! -e "$tmp/sig-ran" ] || fail "SIG$sig while waiting: the command ran"
    rm -f "$tmp/sig-ran"
    [ "$(rcli GET "$k")" = foreign-holder ] ||
        fail "SIG$sig while waiting: the holder's key $k is now '$(rcli GET "$k")'"
    rcli DEL "$k" >/dev/null
done

# 10. The server's refusals keep their text (issue 32): ACL users made here (password pw), and
# min-replicas-to-write. A refusal exits 76, a master short of replicas 69 (like READONLY); a
# release whose delete went through succeeds even when its PUBLISH is refused.
acl_url() { echo "redis://$1:pw@127.0.0.1:$port"; }
rcli ACL SETUSER "zkl-noeval-$$" reset on '>pw' '~*' '&*' +@all -eval -evalsha >/dev/null
rcli ACL SETUSER "zkl-other-$$" reset on '>pw' '~other:*' '&*' +@all >/dev/null
rcli ACL SETUSER "zkl-nopub-$$" reset on '>pw' '~*' '&*' +@all -publish >/dev/null
"$zklock" -c "$(acl_url "zkl-noeval-$$")" -t 2 "$key-acl" -- touch "$tmp/acl-ran" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 76 ] || fail "ACL user without EVAL: exit $rc, expected 76"
grep -q "NOPERM this user has no permissions to run the 'eval" "$tmp/err" || fail "ACL user without EVAL: no server text: $(cat "$tmp/err")"
"$zklock" -c "$(acl_url "zkl-other-$$")" -t 2 "$key-acl" -- touch "$tmp/acl-ran" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 76 ] || fail "ACL user limited to other keys: exit $rc, expected 76"
grep -q "NOPERM this user has no permissions to access one of the keys" "$tmp/err" ||
    fail "ACL user limited to other keys: no server text: $(cat "$tmp/err")"
[ ! -e "$tmp/acl-ran" ] || fail "a refused acquisition ran its command"
"$zklock" -v -c "$(acl_url "zkl-nopub-$$")" -t 2 "$key-acl" -- sh -c 'exit 3' 2>"$tmp/err"
rc=$?
[ "$rc" -eq 3 ] || fail "ACL user without PUBLISH: exit $rc, expected the command's 3 ($(cat "$tmp/err"))"
[ "$(rcli EXISTS "$key-acl")" = 0 ] || fail "ACL user without PUBLISH: the key is left behind"
grep -q "cannot release\|closing the session" "$tmp/err" && fail "ACL user without PUBLISH: release reported failed: $(cat "$tmp/err")"
grep -q "warn.*refused the release notification (PUBLISH" "$tmp/err" ||
    fail "ACL user without PUBLISH: no warning about the notification: $(cat "$tmp/err")"
rcli CONFIG SET min-replicas-to-write 1 >/dev/null
"$zklock" -c "$url" -t 2 "$key-noreplicas" -- touch "$tmp/noreplicas-ran" 2>"$tmp/err"
rc=$?
rcli CONFIG SET min-replicas-to-write 0 >/dev/null
[ "$rc" -eq 69 ] || fail "NOREPLICAS: exit $rc, expected 69"
grep -q "NOREPLICAS Not enough good replicas" "$tmp/err" || fail "NOREPLICAS: no server text: $(cat "$tmp/err")"
[ ! -e "$tmp/noreplicas-ran" ] || fail "NOREPLICAS: the command ran"
for u in noeval other nopub; do rcli ACL DELUSER "zkl-$u-$$" >/dev/null; done

# 11. A password in the URL is never shown (issue 32 item 5): bad URLs (refused before any
# connection), a refused connection, no sentinel, AUTH refused (no password configured; a wrong
# one for an ACL user), and a run with -v; from -c and from $ZK_CONNECT.
rcli ACL SETUSER zklock-secret on ">TopSecret" "~*" "&*" "+@all" >/dev/null
rcli ACL SETUSER zklock-other on ">right-one" "~*" "&*" "+@all" >/dev/null
while read -r want form; do
    form=${form//PORT/$port}
    for how in -c env; do
        if [ "$how" = -c ]; then
            "$zklock" -c "$form" -v -t 2 "/$key-secret" -- true 2>"$tmp/err"
        else
            ZK_CONNECT="$form" "$zklock" -v -t 2 "/$key-secret" -- true 2>"$tmp/err"
        fi
        rc=$?
        [ "$rc" -eq "$want" ] || fail "$form ($how): exit $rc, expected $want: $(cat "$tmp/err")"
        ! grep -q TopSecret "$tmp/err" || fail "$form ($how): the password is shown: $(cat "$tmp/err")"
        if [ "$want" -eq 64 ]; then
            grep -q '\*\*\*@' "$tmp/err" || fail "$form ($how): the URL is not shown redacted: $(cat "$tmp/err")"
        fi
    done
done <<'FORMS'
64 redis://:TopSecret@127.0.0.1:PORT/3x
64 redis://TopSecret@127.0.0.1:99999
64 redis+sentinel://user:TopSecret@127.0.0.1:PORT/mymaster/9x
64 rediss://:TopSecret@127.0.0.1:PORT
64 rediss+sentinel://user:TopSecret@127.0.0.1:PORT/mymaster
64 sentinel://user:TopSecret@127.0.0.1:PORT/mymaster
64 user:TopSecret@127.0.0.1:2181/locks
69 redis://:TopSecret@127.0.0.1:1
69 redis+sentinel://user:TopSecret@127.0.0.1:1/mymaster
69 redis://:TopSecret@127.0.0.1:PORT
69 redis://zklock-other:TopSecret@127.0.0.1:PORT/2
0 redis://zklock-secret:TopSecret@127.0.0.1:PORT/2
FORMS

# 12. Issue 32 item 10: other schemes are told which there are (not "invalid path"); a key named
# status, revoke or run is locked after "run" (options before or after it).
for form in "rediss+sentinel://127.0.0.1:$port/mymaster" "redis+sentinels://127.0.0.1:$port/mymaster" \
            "sentinel://127.0.0.1:$port/mymaster" "SENTINEL://127.0.0.1:$port/mymaster"; do
    "$zklock" -c "$form" "$key" -- true 2>"$tmp/err"
    rc=$?
    [ "$rc" -eq 64 ] || fail "$form: exit $rc, expected 64"
    grep -q "redis+sentinel://\[\[USER\]:PASSWORD@\]HOST:PORT" "$tmp/err" && grep -q "ZooKeeper connect string" "$tmp/err" &&
        ! grep -q "invalid path" "$tmp/err" || fail "$form: the message does not name the supported forms: $(cat "$tmp/err")"
done
for word in status revoke run; do
    rcli DEL "$word" >/dev/null
    out=$("$zklock" -c "$url" run "$word" -- sh -c 'echo "$ZKLOCK_NODE $ZKLOCK_FENCING_TOKEN"; redis-cli -p "$1" EXISTS "$2"' \
          sh "$port" "$word" 2>"$tmp/err")
    rc=$?
    [ "$rc" -eq 0 ] && [ "$(head -1 <<<"$out" | cut -d' ' -f1)" = "$word" ] && [ "$(tail -1 <<<"$out")" = 1 ] ||
        fail "run $word: exit $rc, output '$out' (expected the key $word held): $(cat "$tmp/err")"
    [ "$(rcli EXISTS "$word")" = 0 ] || fail "run $word: the key is left behind"
    out=$("$zklock" run -c "$url" -t 2 "$word" -- sh -c 'echo "$ZKLOCK_NODE"' 2>"$tmp/err")
    [ $? -eq 0 ] && [ "$out" = "$word" ] || fail "run -c URL $word: '$out': $(cat "$tmp/err")"
done
"$zklock" -c "$url" status -- true 2>"$tmp/err"
rc=$?
[ "$rc" -eq 64 ] || fail "status -- COMMAND: exit $rc, expected 64"
grep -q "run status -- COMMAND" "$tmp/err" || fail "status -- COMMAND: no hint at 'run status': $(cat "$tmp/err")"
"$zklock" -c "$url" "$key" run "$key" -- true 2>"$tmp/err"
[ $? -eq 64 ] || fail "LOCKPATH before and after run: not a usage error"

# 13. --fair (issue 35): three zklocks queued behind a holder, each started once the one before it
# is in the queue, run their commands in that order; then nothing is left but the counter. The
# holder holds until the three are queued (or 10 s): a zklock's start takes seconds under the
# sanitizers on a loaded machine, longer than a fixed hold.
fkey="zklock-fair-$$"
"$zklock" -c "$url" --fair "$fkey" -- sh -c "touch $tmp/fair-holding; for i in \$(seq 1 200); do [ -e $tmp/fair-go ] && exit 0; sleep 0.05; done" &
holder=$!
for _ in $(seq 1 100); do [ -e "$tmp/fair-holding" ] && break; sleep 0.05; done
[ -e "$tmp/fair-holding" ] || fail "--fair: the holder did not start its command within 5 s"
: >"$tmp/fair.out"
waiters=()
for i in 1 2 3; do
    "$zklock" -c "$url" --fair -t 30 "$fkey" -- sh -c "echo $i >>$tmp/fair.out" &
    waiters+=($!)
    for _ in $(seq 1 250); do [ "$(rcli LLEN "{$fkey}:queue")" = "$i" ] && break; sleep 0.02; done
    [ "$(rcli LLEN "{$fkey}:queue")" = "$i" ] || fail "--fair: waiter $i is not queued within 5 s"
done
"$zklock" -c "$url" status "$fkey" >"$tmp/st" 2>&1
grep -q "^$fkey (fair): 4 entries" "$tmp/st" && [ "$(grep -c ' waits .*timeout in .*{'"$fkey"'}:queue$' "$tmp/st")" = 3 ] &&
    grep -q "^  1 holds .*expires in" "$tmp/st" && grep -q "^fencing counter: [0-9]* ({$fkey}:fencing)" "$tmp/st" ||
    fail "status of a fair lock with 3 waiting: $(cat "$tmp/st")"
touch "$tmp/fair-go"
wait "$holder" || fail "--fair: the holder exited with $?"
for w in "${waiters[@]}"; do wait "$w" || fail "--fair: a waiter exited with $?"; done
[ "$(tr '\n' ' ' <"$tmp/fair.out")" = "1 2 3 " ] || fail "--fair: ran in the order '$(tr '\n' ' ' <"$tmp/fair.out")', expected 1 2 3"
[ "$(rcli EXISTS "$fkey" "{$fkey}:queue" "{$fkey}:timeouts")" = 0 ] || fail "--fair: a key other than the counter is left"
[ "$(rcli EXISTS "{$fkey}:fencing")" = 1 ] || fail "--fair: no fencing counter {$fkey}:fencing"

# 14. Issue 35 item 4: the read-write lock, the semaphore and status on Redis. Holders hold until
# a file appears (bounded: 10 s), so that each check runs while they hold. (The lost lock is the
# mutex's case above: the hold loop is the same for every recipe, and a lost case costs 1.5 s.)
wait_file() {  # FILE WHAT: at most 5 s
    for _ in $(seq 1 100); do [ -e "$1" ] && return 0; sleep 0.05; done
    fail "$2: not within 5 s"
    return 1
}
hold_until() {  # STARTED-FILE GO-FILE: the command of a holder
    echo "touch $1; for i in \$(seq 1 200); do [ -e $2 ] && exit 0; sleep 0.05; done; exit 9"
}
rkey="zklock-rw-$$"
"$zklock" -c "$url" status "$rkey" >"$tmp/st" 2>&1
[ $? -eq 0 ] && grep -q "^$rkey (none): 0 entries" "$tmp/st" && grep -q "^note: free: no key" "$tmp/st" ||
    fail "status of an unused name: $(cat "$tmp/st")"
"$zklock" -c "$url" -s "$rkey" -- sh -c "$(hold_until "$tmp/r1" "$tmp/rw-go")" &
r1=$!
wait_file "$tmp/r1" "-s: the first reader did not start"
out=$("$zklock" -c "$url" -s -n "$rkey" -- sh -c 'echo "$ZKLOCK_FENCING_TOKEN"' 2>"$tmp/err")
[ $? -eq 0 ] && [ "${out:-0}" -gt 0 ] || fail "-s -n beside a reader: '$out' $(cat "$tmp/err")"
"$zklock" -c "$url" -w -n "$rkey" -- touch "$tmp/w-ran" 2>/dev/null
rc=$?
[ "$rc" -eq 75 ] && [ ! -e "$tmp/w-ran" ] || fail "-w -n beside a reader: exit $rc, expected 75"
"$zklock" -c "$url" -n "$rkey" -- true 2>/dev/null
[ $? -eq 0 ] || fail "a plain mutex beside a reader: not granted (a mutex does not exclude readers)"
# A waiting writer: its mark shows, and it holds back a new reader.
"$zklock" -c "$url" -w -t 10 "$rkey" -- sh -c "echo \$ZKLOCK_FENCING_TOKEN >$tmp/w-token" &
w1=$!
for _ in $(seq 1 100); do [ "$(rcli ZCARD "{$rkey}:writers")" = 1 ] && break; sleep 0.05; done
"$zklock" -c "$url" status "$rkey" >"$tmp/st" 2>&1
grep -q "^$rkey (read-write): 2 entries" "$tmp/st" && grep -q "^  1 read, holds .*{$rkey}:readers\$" "$tmp/st" &&
    grep -q "^  2 write, waits .*timeout in .*{$rkey}:writers\$" "$tmp/st" || fail "status of a read-write lock: $(cat "$tmp/st")"
"$zklock" -c "$url" status --json "$rkey" >"$tmp/st.json" 2>&1
# (grep on the indented JSON: a python3 start costs most of a second on a loaded machine)
tr -d ' \n' <"$tmp/st.json" >"$tmp/st.flat"
grep -q '^{"path":"'"$rkey"'","recipe":"read-write","participants":\[{"node":"[^"]*r","session":null,"data":"","age_s":null,"mode":"read","holding":true,"key":"{'"$rkey"'}:readers","expires_in_s":[0-9.]*},{"node":"[^"]*w","session":null,"data":"","age_s":null,"mode":"write","holding":false,"key":"{'"$rkey"'}:writers","expires_in_s":[0-9.]*}\],"fencing":{.*"{'"$rkey"'}:fencing":"[0-9]*"},"notes":\[\]}$' "$tmp/st.flat" ||
    fail "status --json of a read-write lock: $(cat "$tmp/st.json")"
"$zklock" -c "$url" -s -n "$rkey" -- true 2>/dev/null
[ $? -eq 75 ] || fail "-s -n with a writer waiting: not refused (75)"
touch "$tmp/rw-go"
wait "$r1" || fail "-s: the first reader exited with $?"
wait "$w1" || fail "-w: the waiting writer exited with $?"
[ "$(cat "$tmp/w-token" 2>/dev/null || echo 0)" -gt "${out:-0}" ] || fail "-w: the writer's token is not above the reader's"
[ "$(rcli EXISTS "$rkey" "{$rkey}:readers" "{$rkey}:writers")" = 0 ] || fail "-s/-w: keys left other than the counter"

# The semaphore: 2 of 2 held, a third -n fails (75), another count is a usage error (64), a
# waiter queues and gets a lease at the release.
skey="zklock-sem-$$"
for i in 1 2; do
    "$zklock" -c "$url" --semaphore 2 -t 5 "$skey" -- sh -c "$(hold_until "$tmp/s$i" "$tmp/sem-go")" &
    eval "s$i=\$!"
    wait_file "$tmp/s$i" "--semaphore 2: holder $i did not start"
done
"$zklock" -c "$url" --semaphore 2 -n "$skey" -- touch "$tmp/s3-ran" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 75 ] && [ ! -e "$tmp/s3-ran" ] || fail "--semaphore 2 -n, 2 of 2 held: exit $rc, expected 75: $(cat "$tmp/err")"
"$zklock" -c "$url" --semaphore 3 -n "$skey" -- touch "$tmp/s3-ran" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 64 ] && [ ! -e "$tmp/s3-ran" ] || fail "--semaphore 3 beside holders of 2: exit $rc, expected 64"
grep -q "\-\-semaphore 3: the semaphore's holders and waiters use another number of leases (the server said: .*has 2 leases; this participant was made with 3): every participant must give the same N" "$tmp/err" ||
    fail "--semaphore 3 beside holders of 2: the message: $(cat "$tmp/err")"
"$zklock" -c "$url" --semaphore 2 -t 10 "$skey" -- touch "$tmp/s3-ran" &
s3=$!
for _ in $(seq 1 100); do [ "$(rcli LLEN "{$skey}:queue")" = 1 ] && break; sleep 0.05; done
"$zklock" -c "$url" status "$skey" >"$tmp/st" 2>&1
grep -q "^$skey (semaphore): 3 entries" "$tmp/st" && [ "$(grep -c '^  [12] lease, holds x1 .*expires in .*{'"$skey"'}:leases$' "$tmp/st")" = 2 ] &&
    grep -q "^  3 queued, waits x1 .*timeout in .*{$skey}:queue\$" "$tmp/st" && grep -q "^max: 2 leases ({$skey}:max)" "$tmp/st" ||
    fail "status of a semaphore, 2 of 2 held, 1 waiting: $(cat "$tmp/st")"
touch "$tmp/sem-go"
for p in "$s1" "$s2" "$s3"; do wait "$p" || fail "--semaphore 2: a participant exited with $?"; done
[ -e "$tmp/s3-ran" ] || fail "--semaphore 2: the waiter did not run its command"
"$zklock" -c "$url" status "$skey" >"$tmp/st" 2>&1
grep -q "^$skey (none): 0 entries" "$tmp/st" && grep -q "^fencing counter: [0-9]* ({$skey}:fencing)" "$tmp/st" &&
    grep -q "^note: free: nobody holds it" "$tmp/st" || fail "status of a semaphore left by all: $(cat "$tmp/st")"

# Combinations that make no sense, and status's options on Redis: 64 with the reason.
while IFS='|' read -r want args; do
    eval "set -- $args"
    "$zklock" -c "$url" "$@" 2>"$tmp/err" </dev/null >/dev/null
    rc=$?
    [ "$rc" -eq 64 ] && grep -q -- "$want" "$tmp/err" || fail "zklock $args: exit $rc, expected 64 and '$want': $(cat "$tmp/err")"
done <<'ARGS'
--fair and --shared|--fair -s k -- true
--fair and --write|--fair -w k -- true
--fair and --semaphore|--fair --semaphore 2 k -- true
excludes|-s -w k -- true
excludes|-s --semaphore 2 k -- true
number of leases|--semaphore 0 k -- true
walk a ZooKeeper tree|status -r k
walk a ZooKeeper tree|status -r --json k
-s, -w, --semaphore, --fair and --ttl are for a run|-s status k
-s, -w, --semaphore, --fair and --ttl are for a run|--ttl 3 status k
status takes no command|status k -- true
ARGS
rcli SET "$key-plain" x >/dev/null
"$zklock" -c "$url" status "$key-plain" >"$tmp/st" 2>&1
grep -q "^$key-plain (mutex): 1 entry" "$tmp/st" && grep -q "^note: $key-plain has no TTL" "$tmp/st" ||
    fail "status of a plain key without TTL: $(cat "$tmp/st")"
rcli DEL "$key-plain" >/dev/null
rcli LPUSH "{$key-odd}:readers" x >/dev/null
"$zklock" -c "$url" status "$key-odd" >"$tmp/st" 2>&1
[ $? -eq 0 ] && grep -q "^note: {$key-odd}:readers is a list, not the zset" "$tmp/st" ||
    fail "status beside a key of another type: $(cat "$tmp/st")"
rcli DEL "{$key-odd}:readers" >/dev/null

if [ "$failures" -gt 0 ]; then
    echo "zklock_redis: $failures failure(s)" >&2
    exit 1
fi
echo "zklock_redis: ok"
