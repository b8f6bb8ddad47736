#!/usr/bin/env bash
# Line coverage of the library (src/) by the unit and integration suites: configures build-cov/
# (debug, -Db_coverage=true), builds it, runs the two suites (the test programs start and stop
# their own ZooKeeper servers; the fault suite is left out), then prints gcovr's per-file summary
# and writes an HTML report with line detail to build-cov/coverage/index.html.
#
#   bash scripts/coverage.sh                        # build, run both suites, report
#   bash scripts/coverage.sh --report-only          # report on the .gcda files already there
#   bash scripts/coverage.sh --no-suite=zklock      # extra options go to meson test
#
# Needs the Debian package gcovr (scripts/install-deps.sh does not install it). The .gcda files
# are deleted before the tests run, so a report covers one run only. Every step is bounded (meson test's per-test timeouts, doubled for
# the slower instrumented build).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v gcovr >/dev/null || { echo "coverage.sh: gcovr not found: install the Debian package gcovr" >&2; exit 2; }
dir=build-cov
report_only=false
if [ "${1:-}" = --report-only ]; then report_only=true; shift; fi

if ! $report_only; then
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" --buildtype=debug -Db_coverage=true -Dwrap_mode=nodownload -Dtests=enabled -Dbench=false
  fi
  ninja -C "$dir" -j2
  find "$dir" -name '*.gcda' -delete
  # Not --num-processes above 2: the integration tests run one at a time anyway (is_parallel: false).
  status=0
  timeout 3600 meson test -C "$dir" --suite unit --suite integration --num-processes 2 \
    --timeout-multiplier 2 --print-errorlogs "$@" || status=$?
  [ "$status" -eq 0 ] || echo "coverage.sh: meson test exited $status; the report below still covers what ran" >&2
fi

mkdir -p "$dir/coverage"
# --root .: paths relative to the source tree; only the library's own sources are reported.
timeout 600 gcovr --root . --filter 'src/' --object-directory "$dir" \
  --txt - --print-summary \
  --html-details "$dir/coverage/index.html" \
  --json "$dir/coverage/coverage.json" \
  "$dir"
echo "coverage.sh: HTML report: $dir/coverage/index.html"
exit "${status:-0}"
