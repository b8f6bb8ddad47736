#!/bin/bash
# examples/09_metrics_endpoint scraped from outside: curl fetches /metrics, `promtool check
# metrics` (Debian package prometheus) parses it, and the lines the work must have made are there.
#
#   zkcoro-with-server -- bash tests/interop/metrics_endpoint.sh EXAMPLE
#
# Every wait is bounded; only the example started here is ended, by PID.
set -euo pipefail
example=$1
for tool in curl promtool; do
    command -v "$tool" >/dev/null || { echo "$0: $tool not found: install the Debian packages curl and prometheus (scripts/install-deps.sh test)" >&2; exit 1; }
done
# shellcheck source=tests/interop/metrics_endpoint_start.sh
. "$(dirname "$0")/metrics_endpoint_start.sh"
start_example zkcoro-metrics "$example" --serve 60
curl -sS --max-time 10 -D "$tmp/headers" -o "$tmp/metrics" "$url"
grep -qi '^content-type: text/plain; version=0.0.4' "$tmp/headers" || { echo "FAIL: content type:"; cat "$tmp/headers"; exit 1; }
if ! promtool check metrics <"$tmp/metrics" >"$tmp/promtool" 2>&1; then
    echo "FAIL: promtool check metrics:"; cat "$tmp/promtool"; exit 1
fi
echo "PASS: promtool check metrics accepts the scrape of $url"
# Basic regular expressions: braces and + are literal, [0-9]* matches the pid.
for want in 'zkcoro_lock_acquires_total{path="/zkcoro-example-metrics-[0-9]*/a",recipe="mutex"} 11' \
            'zkcoro_lock_timeouts_total{path="/zkcoro-example-metrics-[0-9]*/a",recipe="mutex"} 1' \
            'zkcoro_lock_wait_seconds_bucket{path="/zkcoro-example-metrics-[0-9]*/b",recipe="mutex",le="+Inf"} 10' \
            'zkcoro_lock_wait_seconds_count{path="/zkcoro-example-metrics-[0-9]*/b",recipe="mutex"} 10'; do
    grep -q "^$want\$" "$tmp/metrics" || { echo "FAIL: no line like: $want"; cat "$tmp/metrics"; exit 1; }
done
echo "PASS: counters and the histogram as the work made them"
rc=0
for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
wait "$pid" || rc=$?
pid=
[ "$rc" = 0 ] || { echo "FAIL: the example exited $rc after the scrape"; cat "$tmp/err"; exit 1; }
echo "PASS: the example exited 0 after the scrape"
