#!/usr/bin/env bash
# Compiles every ```cpp block of README.md on its own, so that the README never shows code that
# does not build. Usage: check_snippets.sh SOURCE_ROOT COMPILER
set -euo pipefail
root=$1
cxx=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
awk -v dir="$tmp" '/^```cpp$/ {n++; out=dir "/snippet" n ".cpp"; inside=1; next}
                   /^```$/ {inside=0; next}
                   inside {print > out}' "$root/README.md"
count=0
for f in "$tmp"/snippet*.cpp; do
  [ -e "$f" ] || continue
  count=$((count + 1))
  "$cxx" -std=c++20 -fsyntax-only -Wall -Wextra -Werror -I"$root/include" "$f"
  echo "README snippet $count compiles"
done
[ "$count" -gt 0 ] || { echo "no cpp snippet found in README.md"; exit 1; }
