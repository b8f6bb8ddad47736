#!/usr/bin/env bash
# The main job: install what the demo needs, build the library, the demo and the server launcher
# (no tests, no tools), start a throwaway ZooKeeper on loopback, run the demo against it, stop it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh demo
# nodownload: with the Debian packages installed nothing is downloaded; without them meson setup
# stops at once and names the package.
opts=(-Dbuildtype=debugoptimized -Dwrap_mode=nodownload -Dtests=disabled -Dtools=disabled -Dbench=false)
[ -f build-demo/build.ninja ] || meson setup build-demo "${opts[@]}"
ninja -C build-demo examples/02_mutex_demo tools/zkserver/zkcoro-with-server
exec ./build-demo/tools/zkserver/zkcoro-with-server -- ./build-demo/examples/02_mutex_demo
