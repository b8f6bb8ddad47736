# shellcheck shell=bash
# Sourced by the metrics_endpoint*.sh tests: starts examples/09_metrics_endpoint and waits for the
# address it serves on.
#
#   start_example NAME EXAMPLE ARGS...
#
# makes $tmp (a temporary folder named after NAME, removed at exit, with the example's output in
# $tmp/out and $tmp/err), starts EXAMPLE ARGS... in the background ($pid, ended by PID at exit if
# still running), and sets $url once the example printed its "serving URL" line (up to 60 s, or
# until the example exits). Without that line it prints the example's stderr and exits 1.
tmp=
pid=
url=
cleanup() {
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid" 2>/dev/null || true; fi
    [ -z "$tmp" ] || rm -rf "$tmp"
}
trap cleanup EXIT
start_example() {
    local name=$1 example=$2
    shift 2
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/$name.XXXXXX")
    "$example" "$@" >"$tmp/out" 2>"$tmp/err" &
    pid=$!
    for _ in $(seq 1 600); do  # up to 60 s for the work and the "serving" line
        url=$(sed -n 's/^serving \(http:[^ ]*\)$/\1/p' "$tmp/out")
        [ -n "$url" ] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    [ -n "$url" ] || { echo "FAIL: the example did not say where it serves; stderr:"; cat "$tmp/err"; exit 1; }
}
