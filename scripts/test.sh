#!/usr/bin/env bash
# Runs every test: installs what is missing, builds (warnings are errors), runs unit and
# integration suites (the test programs start and stop their own ZooKeeper servers), runs the
# examples, the benchmark smoke test and the consumer checks (Meson subproject, CMake against an
# installed zkcoro) against throwaway servers, then the build and tests again under
# AddressSanitizer + UndefinedBehaviorSanitizer.
#
# A skipped test is a failure of the run: after each `meson test` (both builds) the run stops if
# Meson's test log (BUILD/meson-logs/testlog.json) shows any test as SKIP, for instance a test
# program whose root-only cases could not run (it exits 77) or interop_redis without redis-py.
# ZKCORO_ALLOW_SKIPS=1 bash scripts/test.sh says that skips are expected: they are listed and the
# run goes on (the tests that can skip, skip instead of failing, under the same variable).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
bash scripts/install-deps.sh test
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }

# nodownload: with the Debian packages installed nothing is downloaded; without them meson setup
# stops at once and names the package. tests=enabled: a missing test framework is an error, never
# a silently smaller test run. redis=enabled: likewise for hiredis and redis-server (the Redis
# tests).
common=(-Dwerror=true -Dwrap_mode=nodownload -Dtests=enabled -Dtools=enabled -Dredis=enabled)
# check_skips BUILD_DIR: fails (exit 1) when the last `meson test` in BUILD_DIR skipped a test,
# unless ZKCORO_ALLOW_SKIPS=1.
check_skips() {
  local skipped
  skipped=$(python3 -c 'import json, sys
for line in open(sys.argv[1]):
    t = json.loads(line)
    if t.get("result") == "SKIP": print(t["name"])' "$1/meson-logs/testlog.json")
  [ -n "$skipped" ] || return 0
  if [ "${ZKCORO_ALLOW_SKIPS:-0}" = 1 ]; then
    echo "== skipped tests in $1 (allowed by ZKCORO_ALLOW_SKIPS=1): ${skipped//$'\n'/ }"
  else
    echo "== FAIL: skipped tests in $1: ${skipped//$'\n'/ }" >&2
    echo "   their output is in $1/meson-logs/testlog.txt; ZKCORO_ALLOW_SKIPS=1 accepts skips" >&2
    exit 1
  fi
}
run_suite() {  # build-dir, meson test options (one word), extra meson -D options...
  local dir=$1 test_opts=$2; shift 2
  if [ -f "$dir/build.ninja" ]; then meson configure "$dir" "${common[@]}" "$@"
  else meson setup "$dir" "${common[@]}" "$@"; fi
  ninja -C "$dir"
  # shellcheck disable=SC2086  # empty or one option
  meson test -C "$dir" --print-errorlogs --num-processes 2 $test_opts
  check_skips "$dir"
  for ex in "$dir"/examples/[0-9][0-9]_*; do
    [ -f "$ex" ] && [ -x "$ex" ] || continue
    stamp "example $(basename "$ex")"
    case $ex in
      *redis*) "$dir/tests/support/redis/zkcoro-with-redis" -- "$ex" ;;
      *) "$dir/tools/zkserver/zkcoro-with-server" -- "$ex" ;;
    esac
  done
}

export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
stamp "API reference (scripts/docs.sh: Doxygen, warnings are errors)"
bash scripts/docs.sh

stamp "normal build"
run_suite build "" -Dbuildtype=debugoptimized
grep -h '^fault-suite:' build/meson-logs/testlog.txt || true  # the fault suite's summary line
stamp "benchmark smoke test (tiny counts; the full run is bash bench/run.sh)"
BUILD_DIR=build bash bench/run.sh --quick

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
with_server=build/tools/zkserver/zkcoro-with-server
stamp "consumer check: zkcoro as a Meson subproject"
mkdir -p "$tmp/meson/subprojects"
cp tests/consumer/consumer.cpp tests/consumer/meson.build "$tmp/meson/"
ln -s "$root" "$tmp/meson/subprojects/zkcoro"
meson setup "$tmp/meson/build" "$tmp/meson" -Dwrap_mode=nodownload >/dev/null
ninja -C "$tmp/meson/build"
"$with_server" -- "$tmp/meson/build/consumer"

stamp "consumer check: CMake, find_package(zkcoro) against zkcoro installed under a temporary prefix"
DESTDIR="$tmp/install" meson install -C build --quiet >/dev/null
prefix="$tmp/install$(meson introspect build --buildoptions | python3 -c \
  'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')"
cp tests/consumer/consumer.cpp tests/consumer/CMakeLists.txt "$tmp/"
cmake -S "$tmp" -B "$tmp/cmake-build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
ninja -C "$tmp/cmake-build"
"$with_server" -- "$tmp/cmake-build/consumer"

stamp "consumer check: pkg-config against the same install"
pcdir=$(dirname "$(find "$tmp/install" -name zkcoro.pc)")
flags=$(PKG_CONFIG_SYSROOT_DIR="$tmp/install" PKG_CONFIG_PATH="$pcdir" pkg-config --cflags --libs zkcoro)
# shellcheck disable=SC2086  # the flags are words
g++ -std=c++20 -o "$tmp/pkgconfig-consumer" tests/consumer/consumer.cpp $flags -Wl,-rpath,"$(dirname "$pcdir")"
"$with_server" -- "$tmp/pkgconfig-consumer"

stamp "fuzzing: each libFuzzer target for ${FUZZ_SECONDS:-20} s on its seed corpus (tests/fuzz/README.md)"
bash scripts/fuzz.sh

stamp "sanitizer build"
# The fault suite runs once, in the normal build: under the sanitizers it would only be slower.
run_suite build-san --no-suite=fault -Dbuildtype=debug -Db_sanitize=address,undefined -Db_lundef=false
stamp "all tests passed"
