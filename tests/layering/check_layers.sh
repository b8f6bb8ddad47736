#!/usr/bin/env bash
# The library's layering, checked on its sources (no build needed):
#   recipes/ -> engine/ -> the client facade -> driver/ -> session/ (pure); async/ below all
# - zookeeper.h (directly, or through driver/client_impl.hpp) only in driver/, the client facade
#   (client.cpp, client_requests.cpp, watch.cpp: the members of zkcoro::client and zkcoro::watch)
#   and error.cpp (the C library's error texts);
# - no class is split across layers: the members of client_impl are defined in driver/, those of
#   the public classes beside each other (no src/ops/ any more);
# - session/ (the session state machine) includes no other layer;
# - the engine, the recipes, async/ and the public headers include no driver or operations header;
# - the recipes include no session header either, and the engine no recipe;
# - hiredis only in redis/link.cpp and redis/resp.cpp; redis/ (the Redis backend: a connection
#   and a lock on the engine) includes no ZooKeeper driver, operations or session header, and nothing but redis/
#   includes a redis/ header;
# - no file under src/ exceeds 500 lines.
# Usage: bash tests/layering/check_layers.sh [project root]
set -euo pipefail
cd "${1:-$(dirname "$0")/../..}"

failures=0
fail() {
  echo "layering: $*" >&2
  failures=$((failures + 1))
}

# Files under $1 that include a header matching the extended regex $2.
includers() {
  [ -d "$1" ] || return 0
  grep -rlE "^[[:space:]]*#[[:space:]]*include[[:space:]]*[<\"]($2)" "$1" || true
}

c_client='zookeeper/zookeeper\.h|driver/'
for dir in src/engine src/recipes src/async include; do
  for f in $(includers "$dir" "$c_client"); do
    fail "$f includes the C client or a driver header"
  done
done
for f in $(includers src/recipes 'session/'); do
  fail "$f (a recipe) includes a session header"
done
for f in $(includers src/engine 'recipes/'); do
  fail "$f (the engine) includes a recipe"
done
for f in $(includers src/session 'driver/|engine/|recipes/|async/|zookeeper/'); do
  fail "$f (the session machine, pure) includes another layer"
done
for f in $(includers src/async 'engine/|recipes/|session/'); do
  fail "$f (async/, below every layer) includes a layer above it"
done
for f in $(grep -rlE '^[[:space:]]*#[[:space:]]*include[[:space:]]*<zookeeper/zookeeper\.h>' src include); do
  case $f in
    src/driver/*|src/client.cpp|src/client_requests.cpp|src/watch.cpp|src/error.cpp) ;;
    *) fail "$f includes zookeeper.h" ;;
  esac
done
for f in $(grep -rlE '^[[:space:]]*#[[:space:]]*include[[:space:]]*<hiredis/' src include); do
  case $f in
    src/redis/link.cpp|src/redis/resp.cpp) ;;
    *) fail "$f includes hiredis (only src/redis/link.cpp and src/redis/resp.cpp may)" ;;
  esac
done
for f in $(includers src/redis "$c_client|session/|recipes/"); do
  fail "$f (the Redis backend) includes a ZooKeeper driver, session or recipe header"
done
for dir in src/engine src/recipes src/driver src/session src/async include; do
  for f in $(includers "$dir" 'redis/'); do
    fail "$f includes a header of the Redis backend"
  done
done
while read -r lines file; do
  [ "$file" = total ] && continue
  if [ "$lines" -gt 500 ]; then fail "$file has $lines lines (at most 500)"; fi
done < <(find src -type f \( -name '*.cpp' -o -name '*.hpp' \) -print0 | xargs -0 wc -l)

if [ "$failures" -gt 0 ]; then
  echo "layering: $failures violation(s)" >&2
  exit 1
fi
echo "layering: ok ($(find src -type f \( -name '*.cpp' -o -name '*.hpp' \) | wc -l) files)"
