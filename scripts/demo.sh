#!/usr/bin/env bash
# The main job: install, build, start a throwaway ZooKeeper on loopback, run the demo against it,
# stop the server.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
[ -f build/build.ninja ] || meson setup build --buildtype=debugoptimized
ninja -C build
exec ./build/tests/support/zkcoro-with-server -- ./build/examples/02_mutex_demo
