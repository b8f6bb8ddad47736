#!/usr/bin/env bash
# Runs every test: installs what is missing, builds (warnings are errors), runs unit and
# integration suites (the test programs start and stop their own ZooKeeper servers), runs the
# examples and the consumer check against a throwaway server, then does it all again under
# AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
bash scripts/install-deps.sh

run_suite() {  # build-dir, extra meson options...
  local dir=$1; shift
  [ -f "$dir/build.ninja" ] || meson setup "$dir" -Dwerror=true "$@"
  ninja -C "$dir"
  meson test -C "$dir" --print-errorlogs --num-processes 2
  for ex in "$dir"/examples/[0-9][0-9]_*; do
    [ -f "$ex" ] && [ -x "$ex" ] || continue
    echo "== example $(basename "$ex")"
    "$dir/tests/support/zkcoro-with-server" -- "$ex"
  done
}

export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
echo "== normal build"
run_suite build --buildtype=debugoptimized
echo "== benchmark smoke test (tiny counts; the full run is bash bench/run.sh)"
BUILD_DIR=build bash bench/run.sh --quick
echo "== sanitizer build"
run_suite build-san --buildtype=debug -Db_sanitize=address,undefined -Db_lundef=false

echo "== consumer check: zkcoro as a Meson subproject"
consumer=$(mktemp -d)
trap 'rm -rf "$consumer"' EXIT
cp -r tests/consumer/. "$consumer/"
mkdir -p "$consumer/subprojects"
ln -s "$root" "$consumer/subprojects/zkcoro"
meson setup "$consumer/build" "$consumer" >/dev/null
ninja -C "$consumer/build"
build/tests/support/zkcoro-with-server -- "$consumer/build/consumer"
echo "== all tests passed"
