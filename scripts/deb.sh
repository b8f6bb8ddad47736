#!/usr/bin/env bash
# Builds zkcoro's Debian packages (libzkcoro0, libzkcoro-dev, zklock) from this source tree with
# `dpkg-buildpackage -us -uc -b`, then runs lintian on them. Installs what the build needs
# (debian/control's Build-Depends, debhelper, lintian) when it is missing; needs root for that.
#   scripts/deb.sh [OUT_DIR]     (default: build-deb/, git-ignored)
# The tracked files of the work tree (uncommitted edits included) are copied to OUT_DIR/src, so
# that dpkg-buildpackage, which writes its results into the parent directory, writes them into
# OUT_DIR. Prints the .debs, lintian's output and the time taken. lintian errors fail the script.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-build-deb}")
t0=$(date +%s)

need=(debhelper lintian fakeroot dpkg-dev)
# Build-Depends, without version constraints or alternatives.
mapfile -t build_deps < <(sed -n '/^Build-Depends:/,/^[A-Z][A-Za-z-]*:/p' debian/control | sed '$d' |
  sed 's/^Build-Depends://' | tr ',' '\n' | sed 's/([^)]*)//; s/|.*//; s/^[[:space:]]*//; s/[[:space:]]*$//' |
  grep -v '^debhelper-compat' | grep -v '^$')
missing=()
for p in "${need[@]}" "${build_deps[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deb.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

rm -rf "$out"
mkdir -p "$out/src"
git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$out/src"
# ccache, when there is one, keeps a second build short (it changes nothing in the packages).
if command -v ccache >/dev/null && [ -z "${CXX:-}" ]; then export CC="ccache gcc" CXX="ccache g++"; fi
(cd "$out/src" && DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:-parallel=$(nproc)}" dpkg-buildpackage -us -uc -b)
t_build=$(($(date +%s) - t0))

echo "== packages in $out:"
ls -l "$out"/*.deb
for d in "$out"/*.deb; do
  echo "-- $(basename "$d"):"
  dpkg-deb -c "$d" | awk '{print "   " $6 ($7 ? " " $7 " " $8 : "")}'
done
echo "== lintian"
changes=$(ls "$out"/*.changes)
lintian_out=$(lintian --info --display-info "$changes" 2>&1) || true
echo "${lintian_out:-(no tags)}"
echo "== dpkg-buildpackage took ${t_build} s"
if grep -q '^E: ' <<<"$lintian_out"; then
  echo "deb.sh: lintian reports errors" >&2
  exit 1
fi
