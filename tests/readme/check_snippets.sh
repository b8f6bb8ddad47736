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
    "$cxx" -std=c++20 -fsyntax-only -Wall -Wextra -Werror "${extra[@]}" -I"$root/include" "$f" ||
      { echo "FAIL: snippet $n of ${doc#"$root"/} does not compile"; exit 1; }
    echo "${doc#"$root"/} snippet $n compiles"
  done
done
[ "$count" -gt 0 ] || { echo "no cpp snippet found in README.md or docs/*.md"; exit 1; }
echo "$count snippets compile"
