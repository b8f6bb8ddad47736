#!/usr/bin/env bash
# Compiles every ```cpp block of README.md and of the pages in docs/ on its own, so that the
# documentation never shows code that does not build.
# Usage: check_snippets.sh SOURCE_ROOT COMPILER [BUILD_INCLUDE_DIR]
# BUILD_INCLUDE_DIR: where Meson generated <zkcoro/config.hpp> (the build's include/).
set -euo pipefail
root=$1
cxx=$2
extra=()
[ -n "${3:-}" ] && extra=(-I"$3")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
count=0
: >"$tmp/list"
for doc in "$root/README.md" "$root"/docs/*.md; do
  [ -f "$doc" ] || continue
  name=$(basename "$doc" .md)
  dir="$tmp/$name"
  mkdir -p "$dir"
  awk -v dir="$dir" '/^```cpp$/ {n++; out=dir "/snippet" n ".cpp"; inside=1; next}
                     /^```$/ {inside=0; next}
                     inside {print > out}' "$doc"
  n=0
  for f in "$dir"/snippet*.cpp; do
    [ -e "$f" ] || continue
    n=$((n + 1))
    count=$((count + 1))
    printf '%s\t%s\t%s\n' "$f" "${doc#"$root"/}" "$n" >>"$tmp/list"
  done
done
[ "$count" -gt 0 ] || { echo "no cpp snippet found in README.md or docs/*.md"; exit 1; }
# Each snippet is a compilation of Asio on its own, CPU-bound: as many at once as there are cores
# (each one's output is kept apart and printed whole).
compile_one() {  # FILE DOC N
  if "$cxx" -std=c++20 -fsyntax-only -Wall -Wextra -Werror "${extra[@]}" -I"$root/include" "$1" >"$1.log" 2>&1; then
    echo "$2 snippet $3 compiles"
  else
    cat "$1.log"
    echo "FAIL: snippet $3 of $2 does not compile"
    return 1
  fi
}
export -f compile_one
export cxx root
extra_flags=${extra[*]:-}
export extra_flags
rc=0
# shellcheck disable=SC2016  # expanded by the inner bash
tr '\t' '\n' <"$tmp/list" |
  xargs -d '\n' -n 3 -P "$(nproc)" bash -c 'extra=(); [ -n "$extra_flags" ] && extra=("$extra_flags"); compile_one "$@"' _ ||
  rc=$?
[ "$rc" -eq 0 ] || { echo "FAIL: some snippets do not compile (above)"; exit 1; }
echo "$count snippets compile"
