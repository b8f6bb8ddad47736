#!/usr/bin/env bash
# Installs the three .debs built by scripts/deb.sh into a fresh Debian 12 root
# (../shared/fresh/fresh.sh run) and checks there, as a user of the packages would:
#   - zklock --version and --help, `man zklock`, the bash completion;
#   - the CMake consumer (tests/consumer: find_package(zkcoro), zkcoro::zkcoro) and a pkg-config
#     build of the same program, compiled against the installed libzkcoro-dev;
#   - both programs and zklock run against a throwaway ZooKeeper server (Debian's zookeeper
#     package; the launcher is tools/zkserver, compiled there from the clone).
# Needs root (fresh.sh). Slow (apt downloads a compiler, cmake and a JRE in the fresh root: see
# README.md for the time), so scripts/test.sh does not run it.
#   scripts/deb-test.sh [DEB_DIR]      (default: build-deb/, as scripts/deb.sh writes it)
# fresh.sh clones the committed HEAD; the .debs travel in the clone's ../shared (a temporary
# directory here), which fresh.sh copies to /root/shared.
set -euo pipefail
if [ "${1:-}" = --inside ]; then
  # In the fresh root, in the clone of the project, the .debs in $2.
  debs=$2
  export DEBIAN_FRONTEND=noninteractive
  step() { echo "== deb-test [$SECONDS s] $*"; }
  step "installing the .debs and what the checks use"
  apt-get update -q
  apt-get install -y -q --no-install-recommends "$debs"/*.deb man-db cmake make g++ pkg-config \
    zookeeper default-jre-headless
  dpkg -l libzkcoro0 libzkcoro-dev zklock | tail -3
  step "zklock --version, --help"
  zklock --version
  help=$(zklock --help)  # not piped into grep -q: an early exit of grep would fail the pipe
  grep -q '^Usage: zklock \[OPTIONS\] LOCKPATH -- COMMAND' <<<"$help" || { echo "FAIL: zklock --help"; exit 1; }
  rc=0; zklock /x 2>/dev/null || rc=$?
  [ $rc = 64 ] || { echo "FAIL: zklock /x exited $rc, expected 64 (usage)"; exit 1; }
  step "man zklock"
  MANPAGER=cat MANWIDTH=80 man zklock >/tmp/zklock.txt
  for section in NAME SYNOPSIS OPTIONS "EXIT STATUS" ENVIRONMENT SAFETY EXAMPLES; do
    grep -q "^$section" /tmp/zklock.txt || { echo "FAIL: man zklock has no $section"; exit 1; }
  done
  head -12 /tmp/zklock.txt
  step "bash completion"
  bash -c 'source /usr/share/bash-completion/completions/zklock && complete -p zklock'
  step "the ZooKeeper launcher (tools/zkserver), built from the clone"
  g++ -std=c++20 -O1 -Itools/zkserver tools/zkserver/zk_server.cpp tools/zkserver/run_child.cpp \
    tools/zkserver/with_server_main.cpp -lfmt -pthread -o /tmp/zkcoro-with-server
  step "CMake consumer against the installed package"
  cmake -S tests/consumer -B /tmp/consumer-build
  cmake --build /tmp/consumer-build
  step "pkg-config consumer against the installed package"
  # shellcheck disable=SC2046  # the flags are words
  g++ -std=c++20 -o /tmp/pkgconfig-consumer tests/consumer/consumer.cpp $(pkg-config --cflags --libs zkcoro)
  step "run: CMake consumer, pkg-config consumer and zklock against a throwaway ZooKeeper"
  /tmp/zkcoro-with-server -- /tmp/consumer-build/consumer
  /tmp/zkcoro-with-server -- /tmp/pkgconfig-consumer
  out=$(/tmp/zkcoro-with-server -- zklock /locks/deb-test -- sh -c 'echo "token=$ZKLOCK_FENCING_TOKEN"')
  echo "$out"
  grep -q '^token=[0-9][0-9]*$' <<<"$out" || { echo "FAIL: zklock gave no fencing token"; exit 1; }
  step "all checks passed"
  exit 0
fi

cd "$(dirname "$0")/.."
root=$(pwd)
debs=$(realpath "${1:-build-deb}")
fresh=$root/../shared/fresh/fresh.sh
[ -x "$fresh" ] || [ -f "$fresh" ] || { echo "deb-test: $fresh not found" >&2; exit 2; }
shopt -s nullglob
files=("$debs"/libzkcoro0_*.deb "$debs"/libzkcoro-dev_*.deb "$debs"/zklock_*.deb)
((${#files[@]} == 3)) || { echo "deb-test: expected the three .debs in $debs (run scripts/deb.sh)" >&2; exit 2; }
[ -z "$(git status --porcelain)" ] || echo "deb-test: note: uncommitted changes; the fresh root gets HEAD" >&2
tmp=$(mktemp -d /tmp/zkcoro-deb-test.XXXX)
trap 'rm -rf "$tmp"' EXIT
git clone -q --no-hardlinks "$root" "$tmp/zkcoro"
mkdir -p "$tmp/shared/debs"
cp "${files[@]}" "$tmp/shared/debs/"
cp "$fresh" "$tmp/shared/fresh.sh"
t0=$(date +%s)
rc=0
bash "$tmp/shared/fresh.sh" run --timeout 1800 --tail 60 "$tmp/zkcoro" \
  'bash scripts/deb-test.sh --inside /root/shared/debs' || rc=$?
echo "== deb-test: fresh root, install and checks took $(($(date +%s) - t0)) s (exit $rc)"
exit $rc
