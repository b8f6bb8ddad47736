#!/usr/bin/env bash
# Builds zkcoro's API reference with Doxygen (Debian package doxygen) into build-docs/html (or
# OUT_DIR/html): the public headers, the pages in docs/, the examples. Any Doxygen warning (an
# undocumented public name, a broken reference) fails the build; the warnings are printed.
#   scripts/docs.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-build-docs}")
if ! command -v doxygen >/dev/null; then
  echo "docs.sh: doxygen not found: install the Debian package doxygen (scripts/install-deps.sh test)" >&2
  exit 1
fi
rm -rf "$out"
mkdir -p "$out"
t0=$(date +%s%N)
rc=0
ZKCORO_DOCS_OUT=$out doxygen docs/Doxyfile >"$out/doxygen.log" 2>&1 || rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
if [ -s "$out/warnings.log" ] || [ $rc != 0 ]; then
  echo "docs.sh: doxygen failed (exit $rc) after $ms ms; warnings:" >&2
  cat "$out/warnings.log" >&2 2>/dev/null || true
  tail -20 "$out/doxygen.log" >&2
  exit 1
fi
echo "docs.sh: API reference in $out/html/index.html ($ms ms, no warnings)"
