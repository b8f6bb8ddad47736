#!/bin/bash
# examples/09_metrics_endpoint against clients a server on a network meets: garbage (400), 20 KB
# of headers (431), other methods (405 with Allow), another path (404), a client that sends half a
# request and waits (dropped at the example's 5 s deadline, while a scrape beside it is answered),
# and 200 scrapes at once. A scrape after each must be answered, and the example must exit 0 after
# the last one (it exits after SCRAPES answered GET /metrics).
#
#   zkcoro-with-server -- bash tests/interop/metrics_endpoint_hostile.sh EXAMPLE
#
# Every wait is bounded; only the example started here is ended, by PID.
set -euo pipefail
example=$1
command -v curl >/dev/null || { echo "$0: curl not found: install the Debian package curl" >&2; exit 1; }
scrapes=205  # the GET /metrics below: 1 after each of 4 cases, and 200 at once + 1 more at the end
# shellcheck source=tests/interop/metrics_endpoint_start.sh
. "$(dirname "$0")/metrics_endpoint_start.sh"
fail() {
    echo "FAIL: $*"
    echo "the example's stderr:"; cat "$tmp/err"
    exit 1
}
start_example zkcoro-metrics-hostile "$example" --serve 60 "$scrapes"
port=${url#http://127.0.0.1:}
port=${port%%/*}

# status ARGS...: curl's HTTP status for a request (000: no answer within 5 s).
status() { curl -sS --max-time 5 -o /dev/null -w '%{http_code}' "$@" 2>/dev/null || true; }
# A scrape must be answered (the server still serves).
scrape() {  # after-what
    local code
    code=$(status "$url")
    [ "$code" = 200 ] || fail "a scrape after $1: HTTP status $code, not 200"
}
# raw BYTES: what the server answers to these bytes on a connection of their own (it closes it).
raw() {
    local fd
    exec {fd}<>"/dev/tcp/127.0.0.1/$port"
    printf '%s' "$1" >&"$fd"
    timeout 10 cat <&"$fd" || true
    exec {fd}>&-
}

# Garbage, and HTTP/1.1 without Host: 400, and serving goes on.
answer=$(raw $'GARBAGE\r\n\r\n')
[[ $answer == $'HTTP/1.1 400 Bad Request\r\n'* ]] || fail "garbage: answered '${answer%%$'\r'*}', not 400"
answer=$(raw $'GET /metrics HTTP/1.1\r\n\r\n')
[[ $answer == $'HTTP/1.1 400 Bad Request\r\n'* ]] || fail "HTTP/1.1 without Host: answered '${answer%%$'\r'*}', not 400"
scrape garbage
echo "PASS: garbage and an HTTP/1.1 request without Host get 400 Bad Request, and the next scrape is answered"

# 20 KB of headers (the limit is 8 KiB): 431, and serving goes on.
big=$(head -c 20000 /dev/zero | tr '\0' x)
code=$(status -H "X-Big: $big" "$url")
[ "$code" = 431 ] || fail "a 20 KB header: HTTP status $code, not 431"
scrape "the 20 KB header"
echo "PASS: a 20 KB header gets 431 Request Header Fields Too Large, and the next scrape is answered"

# Other methods: 405 with Allow; another path: 404; HEAD: a GET's headers, no body (not a scrape).
for method in POST DELETE PUT; do
    code=$(curl -sS --max-time 5 -X "$method" -D "$tmp/headers" -o /dev/null -w '%{http_code}' "$url" || true)
    [ "$code" = 405 ] || fail "$method /metrics: HTTP status $code, not 405"
    grep -qi $'^allow: GET, HEAD\r$' "$tmp/headers" || { cat "$tmp/headers"; fail "$method: no 'Allow: GET, HEAD'"; }
done
code=$(status "${url%/metrics}/other")
[ "$code" = 404 ] || fail "GET /other: HTTP status $code, not 404"
curl -sS --max-time 5 -I -o "$tmp/head" "$url" || fail "HEAD /metrics: no answer"
grep -qi '^content-length: [1-9]' "$tmp/head" || { cat "$tmp/head"; fail "HEAD /metrics: no Content-Length"; }
scrape "405, 404 and HEAD"
echo "PASS: POST, DELETE, PUT get 405 with 'Allow: GET, HEAD', /other gets 404, HEAD the headers"

# Half a request, then nothing: a scrape beside it is answered, and the server drops it at its
# deadline (5 s) without an answer.
exec {slow}<>"/dev/tcp/127.0.0.1/$port"
printf 'GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n' >&"$slow"
start=$(date +%s%N)
scrape "half a request on another connection"
echo "PASS: a scrape is answered while another connection holds half a request"
left=$(timeout 15 cat <&"$slow") || fail "the half-sent request's connection is still open after 15 s"
exec {slow}>&-
held_ms=$((($(date +%s%N) - start) / 1000000))
[ -z "$left" ] || fail "the half-sent request got an answer: ${left%%$'\r'*}"
[ "$held_ms" -ge 3000 ] || fail "the half-sent request was dropped after $held_ms ms, before the 5 s deadline"
echo "PASS: the half-sent request's connection was closed after $held_ms ms (deadline 5 s), unanswered"

# 200 scrapes at once (curl, one connection each), all answered; then the last one, after which
# the example exits 0 by itself (a connection left open does not hold it).
exec {idle}<>"/dev/tcp/127.0.0.1/$port"
args=()
for _ in $(seq 1 200); do args+=(-o /dev/null "$url"); done
curl -sS --max-time 20 --parallel --parallel-immediate --parallel-max 200 -w '%{http_code}\n' "${args[@]}" \
    >"$tmp/codes" 2>"$tmp/curl-err" || true
ok=$(grep -c '^200$' "$tmp/codes" || true)
[ "$ok" = 200 ] || { sort "$tmp/codes" | uniq -c; cat "$tmp/curl-err"; fail "200 scrapes at once: $ok answered 200"; }
echo "PASS: 200 scrapes at once, all answered 200"
scrape "200 at once"
rc=0
for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && fail "the example still runs 10 s after its $scrapes scrapes"
wait "$pid" || rc=$?
pid=
exec {idle}>&-
[ "$rc" = 0 ] || fail "the example exited $rc after its $scrapes scrapes"
echo "PASS: the example exited 0 after its $scrapes scrapes, with a connection still open"
