#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz/ with clang++ (-fsanitize=fuzzer,address,undefined)
# into build-fuzz/, then runs each one for a bounded time on a temporary copy of its seed corpus
# (the repository's corpus is never written to). Exits non-zero when a target finds a crash (and
# prints where the crashing input was saved), or when a search ran fewer than FUZZ_MIN_EXECS
# inputs (default: 50 per second of search, 1000 for the 20 s default; a fuzzer starved of CPU,
# or one that stalls, searched nothing and must not pass as a search).
#
#   bash scripts/fuzz.sh                  # build, then run every target for FUZZ_SECONDS (20) s
#   FUZZ_SECONDS=300 bash scripts/fuzz.sh # a longer search
#   FUZZ_MIN_EXECS=N bash scripts/fuzz.sh # the executions each target must reach (search)
#   FUZZ_RUNS=N bash scripts/fuzz.sh      # a search sized in inputs, not seconds: N inputs each
#                                         # (after the corpus), however long a busy machine takes
#                                         # (at most FUZZ_RUNS_LIMIT s, 300, else it fails)
#   bash scripts/fuzz.sh path sort        # only these targets
#   bash scripts/fuzz.sh --replay         # only run the seed corpora once, no search
#   bash scripts/fuzz.sh --build-only
#   FUZZ_OBJECTS_FROM=build bash scripts/fuzz.sh  # take the unfuzzed objects from a Meson build
#
# The library's sources are compiled directly, not through Meson: the fuzzers need clang and
# flags that the g++ build cannot share. Sources that hold fuzzed code are compiled by clang++
# with instrumentation (see fuzzed below). The rest (driver, operations, engine, recipes) is only
# needed to link (no target runs it), so g++ compiles it at -O0: that is quicker, and clang 14
# rejects some C++20 that g++ 12 takes (lambdas capturing structured bindings). A fuzzed source
# that clang++ cannot compile is an error: built by g++ it would not be instrumented, and its
# fuzzer would run blind (no coverage, no sanitizer) and still pass.
# FUZZ_OBJECTS_FROM=DIR, a Meson build directory of this tree that is up to date (the test command
# has just built it), supplies those link-only objects instead: copied from DIR, not compiled again.
# The library is a unity build there (src/meson.build): its object holds every source, the fuzzed
# ones too. It is copied with its symbols made weak (objcopy --weaken), so that the instrumented
# objects' definitions are the ones linked and the copy only fills in the rest; a fuzzed source
# without its instrumented object then fails the build here, before any link.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${FUZZ_SECONDS:-20}
runs=${FUZZ_RUNS:-}
runs_limit=${FUZZ_RUNS_LIMIT:-300}
[[ -z $runs || ($runs =~ ^[0-9]+$ && $runs -gt 0 && $runs_limit =~ ^[0-9]+$) ]] || {
  echo "fuzz.sh: FUZZ_RUNS ($runs) must be a whole number above 0, FUZZ_RUNS_LIMIT ($runs_limit) a whole number" >&2
  exit 64; }
# Sized in inputs, a search must run all of them; sized in seconds, 50 a second.
if [ -n "$runs" ]; then min_execs=${FUZZ_MIN_EXECS:-$runs}; else min_execs=${FUZZ_MIN_EXECS:-$((seconds * 50))}; fi
[[ $seconds =~ ^[0-9]+$ && $min_execs =~ ^[0-9]+$ ]] || {
  echo "fuzz.sh: FUZZ_SECONDS ($seconds) and FUZZ_MIN_EXECS ($min_execs) must be whole numbers" >&2; exit 64; }
mode=search
targets=()
for arg in "$@"; do
  case $arg in
    --replay) mode=replay ;;
    --build-only) mode=build ;;
    -*) echo "fuzz.sh: unknown option $arg" >&2; exit 64 ;;
    *) targets+=("$arg") ;;
  esac
done
if [ ${#targets[@]} -eq 0 ]; then
  for f in tests/fuzz/fuzz_*.cpp; do t=$(basename "$f" .cpp); targets+=("${t#fuzz_}"); done
fi

cxx=${FUZZ_CXX:-clang++}
gxx=${FUZZ_LINK_CXX:-g++}
out=build-fuzz
mkdir -p "$out/obj" "$out/artifacts"
# -fno-sanitize=function: clang 14 cannot emit its prologue data for coroutines ("Cannot
# represent a difference across sections"). -fno-sanitize-recover: undefined behaviour is a
# crash that libFuzzer records, not a message it ignores.
common=(-std=c++20 -Iinclude -Isrc)
# shellcheck disable=SC2054  # the commas are part of -fsanitize=
instrumented=(-O1 -gline-tables-only -fsanitize=address,undefined -fno-sanitize=function
  -fno-sanitize-recover=all -fno-omit-frame-pointer)
# The sources the targets exercise (path, config, sort, session_fsm, lock_machine, lock_driver), by file name
# under src/.
fuzzed="path.cpp connect_string.cpp types.cpp error.cpp session_fsm.cpp rules.cpp lock_machine.cpp lock_loop.cpp lock_object.cpp clock.cpp"

# Rebuild everything when the compiler or the flags change.
from=${FUZZ_OBJECTS_FROM:-}
meson_unity=
if [ -n "$from" ]; then
  meson_objs=$(find "$from/src" -maxdepth 1 -type d -name 'libzkcoro.so*.p' -print -quit 2>/dev/null)
  [ -n "$meson_objs" ] || { echo "fuzz.sh: FUZZ_OBJECTS_FROM=$from: no $from/src/libzkcoro.so*.p (not a Meson build of zkcoro)" >&2; exit 64; }
  # Meson names a unity build's objects meson-generated_zkcoro-unity0.cpp.o, ...
  meson_unity=$(find "$meson_objs" -maxdepth 1 -name 'meson-generated_*-unity*.cpp.o' | sort)
fi
stamp="$cxx ${common[*]} ${instrumented[*]} | $gxx | $fuzzed | ${from:+objects from $from}${meson_unity:+ (unity)}"
if [ "$(cat "$out/flags" 2>/dev/null)" != "$stamp" ]; then rm -f "$out"/obj/*.o; echo "$stamp" > "$out/flags"; fi

# An object is stale when its source or any header is newer than it.
stale() {  # object, source
  [ -f "$1" ] || return 0
  [ "$2" -nt "$1" ] && return 0
  [ -n "$(find include src tests/fuzz -name '*.hpp' -newer "$1" -print -quit)" ]
}

echo "== fuzz: compiling the library with $cxx"
# Objects of sources that no longer exist would be linked in: remove them.
# An object is named after its source's path under src/, '/' spelled '+' (engine+lease.o).
for obj in "$out"/obj/*.o; do
  [ -e "$obj" ] && [ ! -f "src/$(basename "$obj" .o | tr '+' '/').cpp" ] && rm -f "$obj" "$obj.log"
done
# The Redis backend (src/redis) is built, as in Meson, only where hiredis is installed.
redis=0
pkg-config --exists hiredis 2>/dev/null && redis=1
jobs=()
fuzzed_objs=()
for src in $(find src -name '*.cpp' | sort); do
  rel=${src#src/}
  if [[ $rel == redis/* ]] && (( !redis )); then rm -f "$out/obj/$(echo "${rel%.cpp}" | tr '/' '+').o"; continue; fi
  name=$(basename "$src" .cpp)
  obj="$out/obj/$(echo "${rel%.cpp}" | tr '/' '+').o"
  is_fuzzed=0
  [[ " $fuzzed " == *" $name.cpp "* ]] && is_fuzzed=1 && fuzzed_objs+=("$obj")
  if [ -n "$from" ] && (( !is_fuzzed )); then
    [ -z "$meson_unity" ] || continue  # in the unity objects (copied below)
    # Meson names an object after its source's path, '/' spelled '_' (engine_lease.cpp.o).
    mobj="$meson_objs/$(echo "${rel%.cpp}" | tr '/' '_').cpp.o"
    [ -f "$mobj" ] || { echo "fuzz.sh: FUZZ_OBJECTS_FROM=$from has no $mobj: build it first" >&2; exit 64; }
    cp "$mobj" "$obj"  # always: the Meson object may be newer than a copy taken earlier
    continue
  fi
  stale "$obj" "$src" || continue
  plain="$gxx ${common[*]} -O0 -c $src -o $obj"
  if (( !is_fuzzed )); then
    jobs+=("$plain")
  else
    # No fallback to g++: an uninstrumented fuzzed source fails the build (xargs, below).
    jobs+=("$cxx ${common[*]} ${instrumented[*]} -fsanitize=fuzzer-no-link -c $src -o $obj 2>$obj.log ||
      { tail -n 20 $obj.log >&2; rm -f $obj;
        echo 'fuzz.sh: $cxx cannot compile $src, a fuzzed source (see $obj.log): it must be instrumented' >&2; exit 1; }")
  fi
done
if [ ${#jobs[@]} -gt 0 ]; then
  # One shell command per job, run in parallel; a failed job fails the build.
  printf '%s\0' "${jobs[@]}" | xargs -0 -P "$(nproc)" -n 1 sh -c
fi
if [ -n "$meson_unity" ]; then
  for obj in "${fuzzed_objs[@]}"; do
    [ -f "$obj" ] || { echo "fuzz.sh: no $obj: the fuzzers would link the unity objects' uninstrumented copy" >&2; exit 1; }
  done
  # Named after no source: the clean-up above removes them on the next run, which copies them again.
  n=0
  for u in $meson_unity; do
    objcopy --weaken "$u" "$out/obj/meson-unity$n.o"
    n=$((n + 1))
  done
fi

echo "== fuzz: linking ${targets[*]}"
libs=(-lzookeeper_st -lfmt -lpthread)
if (( redis )); then
  # shellcheck disable=SC2207  # pkg-config prints words
  libs+=($(pkg-config --libs hiredis))
fi
for t in "${targets[@]}"; do
  src=tests/fuzz/fuzz_$t.cpp
  exe=$out/fuzz_$t
  [ -f "$src" ] || { echo "fuzz.sh: no target $src" >&2; exit 64; }
  if stale "$exe" "$src" || [ -n "$(find "$out/obj" -name '*.o' -newer "$exe" -print -quit)" ]; then
    "$cxx" "${common[@]}" "${instrumented[@]}" -fsanitize=fuzzer "$src" "$out"/obj/*.o "${libs[@]}" -o "$exe"
  fi
done
[ "$mode" = build ] && exit 0

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
summary=()
for t in "${targets[@]}"; do
  corpus=$tmp/corpus-$t
  mkdir -p "$corpus"
  if [ -d "tests/fuzz/corpus/$t" ]; then cp tests/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true; fi
  log=$tmp/$t.log
  opts=(-print_final_stats=1 -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$out/artifacts/$t-")
  # The hard limit: with a time, a last resort in case the target hangs outside libFuzzer's own
  # timer; with a count, the bound on how long the count may take.
  limit=$((seconds + 60)) size="$seconds s"
  if [ "$mode" = replay ]; then opts+=(-runs=0)
  elif [ -n "$runs" ]; then opts+=(-runs="$runs"); limit=$runs_limit size="$runs inputs"
  else opts+=(-max_total_time="$seconds"); fi
  echo "== fuzz: $t ($mode$([ "$mode" = search ] && echo ", $size"))"
  rc=0
  timeout --kill-after=10 "$limit" "$out/fuzz_$t" "${opts[@]}" "$corpus" >"$log" 2>&1 || rc=$?
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "!! fuzz target $t still ran after $limit s (ended, exit $rc)"
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)
  echo "   executions: ${execs:-?}, ${cov:-cov: ?}, corpus: $(find "$corpus" -type f | wc -l) inputs, exit $rc"
  # A search must have searched: at least min_execs inputs run (a replay: at least one).
  want=$min_execs
  [ "$mode" = replay ] && want=1
  few=""
  if [ "$rc" -eq 0 ] && { ! [[ ${execs:-} =~ ^[0-9]+$ ]] || [ "$execs" -lt "$want" ]; }; then
    few="${execs:-no count of} executions, fewer than $want"
    echo "!! fuzz target $t ran ${execs:-no count of} executions, at least $want expected ($mode$([ "$mode" = search ] && echo ", $size"); FUZZ_MIN_EXECS)"
    rc=1
  fi
  summary+=("$(printf '%-12s %10s executions  %s' "$t" "${execs:-?}" "$([ "$rc" -eq 0 ] && echo ok || echo "FAILED${few:+ ($few)}")")")
  if [ "$rc" -ne 0 ] && [ -z "$few" ]; then
    tail -n 40 "$log"
    crash=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
    echo "!! fuzz target $t failed; crashing input: ${crash:-(none written, see the log above)}"
    echo "!! reproduce with: $out/fuzz_$t ${crash:-}"
  fi
  [ "$rc" -eq 0 ] || failed=1
done
echo "== fuzz: summary ($mode)"
printf '   %s\n' "${summary[@]}"
exit "$failed"
