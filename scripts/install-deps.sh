#!/usr/bin/env bash
# Installs the Debian 12 packages zkcoro needs. Needs root.
#   install-deps.sh demo   what the demo needs: compiler, Meson, the library's dependencies (hiredis
#                          too: the library builds its Redis part when it is found), a JRE and the
#                          ZooKeeper server
#   install-deps.sh test   (default) everything: the demo's packages plus the test framework, the
#                          tools' libraries, a JDK and Curator (interop), cmake (the CMake consumer
#                          check), clang, libFuzzer and the sanitizer runtimes (the fuzzers), iproute2 (network namespaces
#                          of the fault suite), dpkg-dev (Meson reads the multiarch libdir from
#                          dpkg-architecture; without it the install goes to lib64, where CMake on
#                          Debian does not look), redis-server and python3-redis (the Redis tests,
#                          interop with redis-py's Lock and its benchmark; for /usr/bin/python3),
#                          redis-sentinel (the Sentinel tests; they run redis-server --sentinel with
#                          their own configuration on free loopback ports, never the package's service),
#                          gnuplot-nox (bench/run.sh draws bench/out/compare.svg), doxygen (scripts/docs.sh:
#                          the API reference, built by the test command so that its warnings fail it),
#                          groff-base (the test zklock_manpage formats zklock.1 with groff)
# Skips apt-get entirely when everything is already installed.
set -euo pipefail
profile=${1:-test}
demo=(
  g++ meson ninja-build pkg-config
  libboost1.81-dev libzookeeper-st-dev libfmt-dev
  libhiredis-dev
  zookeeper default-jre-headless
)
test=(
  "${demo[@]}"
  doctest-dev libcli11-dev nlohmann-json3-dev
  default-jdk-headless libcurator-recipes-java
  cmake dpkg-dev
  clang libfuzzer-14-dev libclang-rt-14-dev
  iproute2 procps
  redis-server redis-tools python3-redis redis-sentinel
  gnuplot-nox
  prometheus curl
  doxygen groff-base
)
case $profile in
  demo) packages=("${demo[@]}") ;;
  test) packages=("${test[@]}") ;;
  *) echo "usage: $0 [demo|test]" >&2; exit 64 ;;
esac
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
