#!/usr/bin/env bash
# Runs every test: installs what is missing, builds (warnings are errors), runs unit and
# integration suites (the test programs start and stop their own ZooKeeper servers), runs the
# examples, the benchmark smoke test and the consumer checks (Meson subproject, CMake against an
# installed zkcoro) and the fuzzers against throwaway servers, then the tests again under
# AddressSanitizer + UndefinedBehaviorSanitizer.
#
# Time (2 cores): compiling is most of it, so the run compiles no more than it needs to, and
# compiles while tests wait on their servers.
# - The normal build is -O1 -g1 (line tables only), about half the compile time of -O2 -g;
#   the sanitizer build is -O0 -g1, without the benchmarks, examples and header checks (the
#   normal build runs those), and compiles only the programs of the tests it runs (test_targets),
#   not those of the suites it skips (the fault suite's programs, zklock_exit_table).
# - The normal build compiles first only what its tests run (test_targets); its tests start then.
#   The sanitizer build compiles in the background, at idle priority (SCHED_IDLE, nice 19), while
#   the normal build's tests run: they mostly wait on servers, and at idle priority the compiler
#   only takes the CPU they leave, so their timing is not squeezed. The rest of the normal build
#   (the examples, the benchmarks: 77 s of its 529 s in a fresh run) follows it there, and the
#   examples, the benchmark smoke tests and the consumer checks' install wait for it. The
#   consumer checks and the fuzzers start there too once the sanitizer build's compile has ended
#   (side by side, each fuzzer 10 s); the examples and the benchmark smoke tests (which mostly
#   wait on their servers) run in the background from the end of the normal build's tests, beside
#   the sanitizer build's tests, instead of before them.
# - The test programs are unity builds where their files share work (tests/meson.build: the unit
#   files in one program, the twelve integration files in another, the ten Redis ones, zklock's
#   two, the simulation programs): the files share their Asio and zkcoro instantiations, which one
#   translation unit compiles once. Each test runs its files' cases (doctest --source-file).
# - The fuzzers link the normal build's objects for the code they do not fuzz
#   (FUZZ_OBJECTS_FROM=build) instead of compiling the library once more.
# - In each `meson test`, the tests that may share the machine start first (the longest,
#   redis_sentinel and zklock's two parts, first), and those that need it alone (is_parallel:
#   false) follow (tests/meson.build: priority).
# - The tests that may share the machine run three at a time in the normal build, four in the
#   sanitizer build: they mostly wait on servers and on zklock's and the Redis scripts' processes
#   (the sanitizer build's: 362 s of CPU in 400 s of wall time, three at a time, on 2 cores);
#   beside them only what runs at idle priority (the sanitizer build's compile, the fuzzers, the
#   consumer checks' compiles). Two at a time, the normal build's took about 280 s of a fresh
#   run's 31 minutes. Four at a time, the sanitizer build's save about 90 s (the fresh run of
#   fc73729: 27m36s against 30m13s for 4c81470 at three). Three fresh runs at four each failed a
#   timing check there (a Redis handoff at 151 ms against 150, a semaphore's renewal late by over
#   200 ms, 16 script runs against 14); those checks now allow for a busy machine (847a36c,
#   29b131b, 2023d01), as does zklock_redis_grant_signal (35360a7).
#
# A skipped test is a failure of the run: after each `meson test` (both builds) the run stops if
# Meson's test log (BUILD/meson-logs/testlog.json) shows any test as SKIP, for instance a test
# program whose root-only cases could not run (it exits 77) or interop_redis without redis-py.
# ZKCORO_ALLOW_SKIPS=1 bash scripts/test.sh says that skips are expected: they are listed and the
# run goes on (the tests that can skip, skip instead of failing, under the same variable).
#
# A sanitizer report is a failure of the run, even where a test would take its exit status for an
# expected one (ASan, LSan and UBSan exit 1 by default, which is also zklock's "cycle found") or
# discards the output of the program that made it: in the sanitizer build's tests the sanitizers
# exit 86, which no test expects, and ASan and LSan write each report to a file of its own
# (build-san/meson-logs/sanitizer/report.PROGRAM.PID; UBSan writes to stderr whatever its
# log_path says, with GCC 12); the run fails when a test exited 86 or a report is in those files
# or in Meson's test log (check_sanitizer_reports).
#
# The examples, the benchmark smoke test and the consumer checks each run under a time limit
# (limited: a few times what they take), so that a hang fails the run instead of stalling it.
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
# The lines that start a sanitizer report (never the tool's bare name, which a test may print:
# test_pool's note that its pool is disabled under AddressSanitizer).
san_report='ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:'
san_report+='|SUMMARY: UndefinedBehaviorSanitizer|Sanitizer has encountered a fatal error'
# check_sanitizer_reports BUILD_DIR REPORT_DIR: fails (exit 1) when a test of the last `meson test`
# in BUILD_DIR exited 86 or a sanitizer report is in its test log or in a file in REPORT_DIR.
check_sanitizer_reports() {
  local found=0 exited f
  exited=$(python3 -c 'import json, sys
for line in open(sys.argv[1]):
    t = json.loads(line)
    if t.get("returncode") == 86: print(t["name"])' "$1/meson-logs/testlog.json")
  if [ -n "$exited" ]; then
    echo "== FAIL: tests in $1 exited 86, the sanitizers' exit status: ${exited//$'\n'/ }" >&2
    found=1
  fi
  if grep -Eq "$san_report" "$1/meson-logs/testlog.txt"; then
    echo "== FAIL: sanitizer reports in $1/meson-logs/testlog.txt (first lines):" >&2
    grep -En "$san_report" "$1/meson-logs/testlog.txt" | head -n 20 >&2
    found=1
  fi
  for f in "$2"/*; do
    if [ -f "$f" ] && grep -Eq "$san_report" "$f"; then
      echo "== FAIL: sanitizer report $f:" >&2
      head -n 80 "$f" >&2
      found=1
    fi
  done
  [ "$found" -eq 0 ] || exit 1
}
# limited SECONDS COMMAND...: runs COMMAND, ending it (SIGTERM, SIGKILL 10 s later) once it has run
# SECONDS; then the run fails, saying so. --foreground: COMMAND stays in the run's process group,
# so that Ctrl-C and the end of the run (the EXIT trap's kill of the background checks' group)
# still reach everything it started; on the time limit only COMMAND itself is signalled (the
# wrappers used here, zkcoro-with-server and zkcoro-with-redis, stop their command and server).
limited() {
  local limit=$1 rc=0
  shift
  timeout --foreground -k 10 "$limit" "$@" || rc=$?
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "== FAIL: still running after $limit s (ended, exit $rc): $*" >&2
  fi
  return "$rc"
}
configure() {  # build-dir, extra meson -D options...
  local dir=$1; shift
  if [ -f "$dir/build.ninja" ]; then meson configure "$dir" "${common[@]}" "$@"
  else meson setup "$dir" "${common[@]}" "$@"; fi
}
# test_targets BUILD_DIR MESON_TEST_OPTIONS...: the ninja outputs that the tests these options
# select (as `meson test` selects them) need, one per line: the targets in each test's `depends`
# (its own program and those it declares), plus any program of the build named in its command or
# environment. `meson test` rebuilds the same (the depends only), so a test must declare in
# depends every program of the build it runs that its command does not name (a path compiled in).
test_targets() {
  local dir=$1; shift
  local out  # a `meson configure` takes effect here (build.ninja regenerated), as in meson test
  out=$(ninja -C "$dir" build.ninja 2>&1) || { echo "$out" >&2; return 1; }
  python3 -c 'import json, os, subprocess, sys
d, opts = sys.argv[1], sys.argv[2:]
def run(*cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if r.returncode:
        sys.exit("test_targets: " + " ".join(cmd) + f" failed (exit {r.returncode})")
    return r.stdout
listed = run("meson", "test", "-C", d, "--no-rebuild", "--list", *opts)
names = {line.rsplit(" / ", 1)[-1] for line in listed.splitlines()}
info = json.loads(run("meson", "introspect", d, "--tests", "--targets"))
root = os.path.realpath(d)
files = {t["id"]: [os.path.realpath(f) for f in t["filename"]] for t in info["targets"]}
target_of = {f: i for i, fs in files.items() for f in fs}
need, selected = set(), 0
for t in info["tests"]:
    if t["name"] not in names:
        continue
    selected += 1
    need.update(t["depends"])
    for word in t["cmd"] + list(t["env"].values()):
        for p in word.split(os.pathsep):
            p = os.path.realpath(os.path.join(root, p)) if p else ""
            if p in target_of:
                need.add(target_of[p])
if not selected:
    sys.exit(f"test_targets: no test of {d} selected by {opts}")
print("\n".join(sorted(os.path.relpath(f, root) for i in need for f in files[i])))' "$dir" "$@"
}
run_tests() {  # build-dir, meson test options...
  local dir=$1 rc=0 procs=3; shift
  # Three at a time, four in the sanitizer build (see the top).
  [ "$dir" != build-san ] || procs=4
  meson test -C "$dir" --print-errorlogs --num-processes "$procs" "$@" || rc=$?
  # The sanitizer build's reports, whether or not the tests passed.
  [ "$dir" != build-san ] || check_sanitizer_reports "$dir" "$san_logs"
  [ "$rc" -eq 0 ] || exit "$rc"
  check_skips "$dir"
}
run_examples() {  # build-dir
  local ex
  for ex in "$1"/examples/[0-9][0-9]_*; do
    [ -f "$ex" ] && [ -x "$ex" ] || continue
    stamp "example $(basename "$ex")"
    case $ex in  # each takes about 1 s, the server's start included
      *redis*) limited 60 "$1/tests/support/redis/zkcoro-with-redis" -- "$ex" ;;
      *) limited 60 "$1/tools/zkserver/zkcoro-with-server" -- "$ex" ;;
    esac
  done
}
# -g1: line tables only. Stack traces (and the sanitizers' reports) keep file:line; the full
# debug information of -g doubled the compile time of the coroutine-heavy sources.
debug_lines=(-Ddebug=false -Dcpp_args=-g1)

export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
stamp "API reference (scripts/docs.sh: Doxygen, warnings are errors)"
bash scripts/docs.sh

stamp "normal build (-O1 -g1): the programs its tests run"
configure build -Doptimization=1 "${debug_lines[@]}"
# The rest of it (the examples but the one a test runs, the benchmarks) compiles in the background
# after the sanitizer build's compile (below): the examples and the benchmark smoke tests that use
# it run only after the normal build's tests. Its tests build nothing more (--no-rebuild).
normal_targets=$(test_targets build)
# shellcheck disable=SC2086  # one build path a line, no spaces
ninja -C build $normal_targets

# The sanitizer build, in the background at idle priority (see the top). Its output goes to a log
# that is printed when it fails; the run ends it (by its PID) if the run stops first.
stamp "sanitizer build (-O0 -g1, ASan+UBSan): configured here, compiled in the background"
configure build-san -Doptimization=0 "${debug_lines[@]}" -Dbench=false -Dexamples=false \
  -Db_sanitize=address,undefined -Db_lundef=false
# The fault suite runs once, in the normal build: under the sanitizers it would only be slower.
# The 'source' suite checks sources and documents, not the built code. The 'curator' suite (our
# recipes beside Curator's in JVMs: about 90 s, each run alone) runs once too: what it drives of
# ours, the integration suites drive under the sanitizers.
# The 'differential' suite checks the simulated ZooKeeper (test code) against a real server: once.
# So does the 'selftest' suite, the tests of the test code (the harnesses, the interval checker,
# the simulated tree).
san_tests=(--no-suite=fault --no-suite=source --no-suite=curator --no-suite=differential --no-suite=selftest)
# Only what those tests run is compiled (see the top); their `meson test` builds nothing more
# (--no-rebuild), and a program missing there fails its test.
san_targets=$(test_targets build-san "${san_tests[@]}")
idle=(nice -n 19)
if chrt --idle 0 true 2>/dev/null; then idle=(chrt --idle 0 nice -n 19); fi
san_log=build-san/meson-logs/background-ninja.log
# Its end is stamped in its log (whether the run waited for it shows there). Job control: a
# process group of its own, which the trap ends whole.
set -m
# shellcheck disable=SC2086  # one build path a line, no spaces
( rc=0; "${idle[@]}" ninja -C build-san $san_targets || rc=$?
  echo "== [$(( $(date +%s) - t0 )) s] sanitizer build: the background compile ended (exit $rc)"
  exit "$rc" ) </dev/null >"$san_log" 2>&1 &
san_pid=$!
set +m
tmp=$(mktemp -d)
# The rest of the normal build, in the background once the sanitizer build's compile has ended
# (tail --pid waits for a process that is not its child): the sanitizer build's compile is what the
# run waits for, the rest only the examples, the benchmark smoke tests and the consumer checks'
# install, which wait for it (wait_rest), at idle priority. (At nice 19 in the normal class, so
# that the examples and benchmark smoke tests would run beside the sanitizer build's tests, it
# added to their load: see the top.) Its status goes to a file, for those who wait for it.
rest_log=build/meson-logs/background-ninja.log
rest_rc=$tmp/rest-build.rc
set -m
( tail --pid="$san_pid" -f /dev/null
  rc=0; "${idle[@]}" ninja -C build || rc=$?
  echo "== [$(( $(date +%s) - t0 )) s] normal build: the background compile of the rest ended (exit $rc)"
  echo "$rc" >"$rest_rc"
  exit "$rc" ) </dev/null >"$rest_log" 2>&1 &
rest_pid=$!
set +m
# wait_rest: waits for the rest of the normal build; fails (status 1) if it failed.
wait_rest() {
  tail --pid="$rest_pid" -f /dev/null
  if [ "$(cat "$rest_rc" 2>/dev/null)" != 0 ]; then
    tail -n 60 "$rest_log"
    echo "== FAIL: the rest of the normal build failed; its whole output is in $rest_log" >&2
    return 1
  fi
  tail -n 1 "$rest_log"
}
checks_pid=
fuzz_pid=
smoke_pid=
# The EXIT trap runs in this shell only: a job started with & is a forked copy of this shell until
# it has reset its traps or exec'd, and one signalled in that moment runs this trap too (bash 5.2):
# it would end the other jobs and remove $tmp (tests/zklock/zklock_redis.sh lost its directory so).
trap 'if [ "$BASHPID" = "$$" ]; then
kill -- -"$san_pid" 2>/dev/null || true; kill -- -"$rest_pid" 2>/dev/null || true
[ -z "$checks_pid" ] || kill -- -"$checks_pid" 2>/dev/null || true
[ -z "$fuzz_pid" ] || kill -- -"$fuzz_pid" 2>/dev/null || true
[ -z "$smoke_pid" ] || kill -- -"$smoke_pid" 2>/dev/null || true
rm -rf "$tmp"
fi' EXIT

# The checks that need the normal build only: the consumer checks and the fuzzers. They run in the
# background from the end of the sanitizer build's compile (tail --pid), beside the end of the
# normal build's tests and the sanitizer build's tests (which mostly wait on servers), with their
# compiles and the fuzzers at idle priority; their output is printed when they end. Two groups
# side by side, not one after the other: one after the other they ended 123 s after the sanitizer
# build's tests in a fresh run (the Meson-subproject check's compile 328 s, then six fuzzers of
# 20 s each). They share the idle CPU with the rest of the normal build, which starts at the same
# moment: in the fresh run of 4c81470 all three ended with the sanitizer build's tests (the rest
# of the normal build 2 s after them, then the examples and benchmark smoke tests, 84 s).
with_server=build/tools/zkserver/zkcoro-with-server
consumer_checks() {
  stamp "consumer check: zkcoro as a Meson subproject (without the Redis backend, optimisation or debug information)"
  mkdir -p "$tmp/meson/subprojects"
  cp tests/consumer/consumer.cpp tests/consumer/meson.build "$tmp/meson/"
  ln -s "$root" "$tmp/meson/subprojects/zkcoro"
  # redis=disabled: the library as users build it without hiredis (no other build here compiles
  # it so), and less to compile (91 s of CPU against 111 with the Redis backend, which both other
  # builds compile and test). The consumer uses ZooKeeper only.
  meson setup "$tmp/meson/build" "$tmp/meson" -Dwrap_mode=nodownload --buildtype=plain -Dzkcoro:redis=disabled >/dev/null
  # It compiles the library again, at idle priority beside the sanitizer build's tests.
  limited 900 "${idle[@]}" ninja -C "$tmp/meson/build"
  limited 60 "$with_server" -- "$tmp/meson/build/consumer"

  stamp "consumer check: CMake, find_package(zkcoro) against zkcoro installed under a temporary prefix"
  wait_rest  # the install takes the whole normal build
  DESTDIR="$tmp/install" meson install -C build --quiet --no-rebuild >/dev/null
  local prefix pcdir flags
  prefix="$tmp/install$(meson introspect build --buildoptions | python3 -c \
    'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')"
  cp tests/consumer/consumer.cpp tests/consumer/CMakeLists.txt "$tmp/"
  cmake -S "$tmp" -B "$tmp/cmake-build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
  limited 300 "${idle[@]}" ninja -C "$tmp/cmake-build"
  limited 60 "$with_server" -- "$tmp/cmake-build/consumer"

  stamp "consumer check: pkg-config against the same install"
  pcdir=$(dirname "$(find "$tmp/install" -name zkcoro.pc)")
  flags=$(PKG_CONFIG_SYSROOT_DIR="$tmp/install" PKG_CONFIG_PATH="$pcdir" pkg-config --cflags --libs zkcoro)
  # shellcheck disable=SC2086  # the flags are words
  limited 300 "${idle[@]}" g++ -std=c++20 -o "$tmp/pkgconfig-consumer" tests/consumer/consumer.cpp \
    $flags -Wl,-rpath,"$(dirname "$pcdir")"
  limited 60 "$with_server" -- "$tmp/pkgconfig-consumer"
}
# A search of 5 000 inputs per target after its seed corpus (FUZZ_RUNS overrides; FUZZ_SECONDS=N
# searches N s each instead, scripts/fuzz.sh's own way): sized in inputs, not seconds. At idle
# priority, 10 s of search gave the slowest target (lock_driver, about 480 inputs a second alone)
# 441 inputs in a fresh run, under the 500 required, and the run failed; and the quick targets
# spent 10 s each of CPU that the rest of the normal build's compile was waiting for. 5 000 each:
# about 10 s of CPU for lock_driver, under 2 s for each of the others.
fuzz_checks() {
  if [ -n "${FUZZ_SECONDS:-}" ]; then
    stamp "fuzzing: each libFuzzer target for $FUZZ_SECONDS s on its seed corpus (tests/fuzz/README.md)"
    FUZZ_OBJECTS_FROM=build "${idle[@]}" bash scripts/fuzz.sh
  else
    stamp "fuzzing: each libFuzzer target, ${FUZZ_RUNS:-5000} inputs after its seed corpus (tests/fuzz/README.md)"
    FUZZ_OBJECTS_FROM=build FUZZ_RUNS=${FUZZ_RUNS:-5000} "${idle[@]}" bash scripts/fuzz.sh
  fi
}

stamp "consumer checks and fuzzers: started in the background, side by side, once the sanitizer build's compile has ended"
checks_log=$tmp/consumer-checks.log
fuzz_log=$tmp/fuzz-checks.log
# set -e holds inside the subshells: the first failing step ends one, with that step's status.
# Job control gives each a process group of its own, so that the trap can end all they started.
set -m
( tail --pid="$san_pid" -f /dev/null; set -e; consumer_checks ) </dev/null >"$checks_log" 2>&1 &
checks_pid=$!
( tail --pid="$san_pid" -f /dev/null; set -e; fuzz_checks ) </dev/null >"$fuzz_log" 2>&1 &
fuzz_pid=$!
set +m
stamp "normal build: tests"
run_tests build --no-rebuild
grep -h '^fault-suite:' build/meson-logs/testlog.txt || true  # the fault suite's summary line

# The examples and the benchmark's smoke tests need the normal build only: they run in the
# background from here (see the top), once the rest of the normal build is compiled, beside the
# sanitizer build's tests; their output is printed when they end.
# The scale curve's smoke test runs beside the examples and the benchmark's: they are the run's
# last step, and they mostly wait on servers of their own (each on free ports); one after the
# other they took 87 s after the sanitizer build's tests in a fresh run. (Their `ninja` steps find
# the build complete: a ninja with nothing to do writes nothing.)
smoke_checks() {
  stamp "examples and benchmark smoke tests: waiting for the rest of the normal build"
  wait_rest
  stamp "scale curve smoke test (tiny sizes; the full curves: bash bench/scale.sh): started beside the examples"
  local scale_log=$tmp/scale-smoke.log scale_pid scale_rc=0
  limited 120 env BUILD_DIR=build bash bench/scale.sh --quick >"$scale_log" 2>&1 &  # about 25 s
  scale_pid=$!
  run_examples build
  stamp "benchmark smoke test (tiny counts; the full run is bash bench/run.sh)"
  limited 240 env BUILD_DIR=build bash bench/run.sh --quick  # about 25 s
  wait "$scale_pid" || scale_rc=$?
  stamp "scale curve smoke test: its output (exit $scale_rc)"
  cat "$scale_log"
  return "$scale_rc"
}
stamp "examples and benchmark smoke tests: started in the background"
smoke_log=$tmp/smoke-checks.log
set -m
( set -e; smoke_checks ) </dev/null >"$smoke_log" 2>&1 &
smoke_pid=$!
set +m

stamp "sanitizer build: waiting for the background compile"
if ! wait "$san_pid"; then
  tail -n 60 "$san_log"
  echo "== FAIL: the sanitizer build failed; its whole output is in $san_log" >&2
  exit 1
fi
tail -n 2 "$san_log"

stamp "sanitizer build: tests"
# exitcode=86 and log_path: see the top (LSan takes ASan's); halt_on_error: UBSan stops at its
# first report, as ASan does. These options are for these tests only (the fuzzers, started
# before, keep their own).
san_logs=$root/build-san/meson-logs/sanitizer
rm -rf "$san_logs"
mkdir -p "$san_logs"
export ASAN_OPTIONS=exitcode=86:log_path=$san_logs/report:log_exe_name=1
export UBSAN_OPTIONS=$UBSAN_OPTIONS:exitcode=86
run_tests build-san --no-rebuild "${san_tests[@]}"
# wait_for PID LOG WHAT: waits for the background checks PID, prints their LOG, fails the run if
# they failed.
wait_for() {
  local rc=0
  wait "$1" || rc=$?
  cat "$2"
  if [ "$rc" -ne 0 ]; then
    echo "== FAIL: $3 failed (exit $rc): see their output above" >&2
    exit 1
  fi
}
stamp "examples and benchmark smoke tests: waiting for them"
wait_for "$smoke_pid" "$smoke_log" "the examples or the benchmark smoke tests"
stamp "consumer checks: waiting for them"
wait_for "$checks_pid" "$checks_log" "the consumer checks"
stamp "fuzzers: waiting for them"
wait_for "$fuzz_pid" "$fuzz_log" "the fuzzers"
stamp "all tests passed"
