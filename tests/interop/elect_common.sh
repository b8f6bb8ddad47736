# shellcheck shell=bash
# Helpers of the election, revocation and fencing interop tests (interop_revoke.sh,
# interop_election.sh, frozen_holder.sh), on top of common.sh (sourced first). Sets elect (the
# zkcoro-elect program); start_elect/start_curator_elect start one mode in the background as NAME,
# output in $tmp/NAME.{out,err}. Every wait is bounded.

# shellcheck disable=SC2154  # build, tmp, connect, cp, pids, started: set by common.sh
elect="$build/tests/interop/zkcoro-elect"
if [ ! -x "$elect" ]; then
    echo "$0: missing $elect (build it with ninja -C $build)" >&2
    exit 2
fi

# start_elect NAME MODE ARGS...
start_elect() {
    local name=$1 mode=$2
    shift 2
    "$elect" "$mode" --connect "$connect" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    pids[$name]=$!
    started+=("$!")
}
# start_curator_elect NAME MODE ARGS...
start_curator_elect() {
    local name=$1 mode=$2
    shift 2
    "$java_bin" -cp "$cp" CuratorElect "$mode" --connect "$connect" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    pids[$name]=$!
    started+=("$!")
}

# wait_line NAME REGEX SECONDS: waits until $tmp/NAME.out has a line matching REGEX (prints it);
# returns 1 (after showing NAME's stderr) when it does not within SECONDS or NAME ended first.
wait_line() {
    local name=$1 re=$2 limit=$3 line
    local deadline=$(( $(date +%s%N) + limit * 1000000000 ))
    while [ "$(date +%s%N)" -lt "$deadline" ]; do
        line=$(grep -E -m 1 "$re" "$tmp/$name.out" 2>/dev/null || true)
        if [ -n "$line" ]; then
            echo "$line"
            return 0
        fi
        if ! kill -0 "${pids[$name]}" 2>/dev/null; then
            break
        fi
        sleep 0.05
    done
    echo "$0: $name printed no line matching '$re' within ${limit}s; its stderr:" >&2
    sed 's/^/    /' "$tmp/$name.err" >&2
    return 1
}

# end_ok NAME SECONDS: waits for NAME; returns 1 (after showing its stderr) unless it exited 0.
end_ok() {
    local name=$1 rc=0
    wait_pid "${pids[$name]}" "$2" || rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "$0: $name exited $rc; its stderr:" >&2
        sed 's/^/    /' "$tmp/$name.err" >&2
        return 1
    fi
}
