#!/usr/bin/env bash
# The library's layering, checked on its sources (no build needed):
#   recipes/ -> the backends, side by side: zookeeper/ (-> the client facade -> driver/ ->
#   session/, pure) and redis/ -> engine/ (backend-neutral) -> async/, below all
# - zookeeper.h (directly, or through driver/client_impl.hpp) only in driver/, the client facade
#   (client.cpp, client_requests.cpp, watch.cpp: the members of zkcoro::client and zkcoro::watch)
#   and error.cpp (the C library's error texts);
# - no class is split across layers: the members of client_impl are defined in driver/, those of
#   the public classes beside each other (no src/ops/ any more);
# - session/ (the session state machine) includes no other layer;
# - the engine, the recipes, async/ and the public headers include no driver or operations header;
# - the recipes include no session header either, and the engine no recipe;
# - the engine includes no backend header (zookeeper/, redis/) and not <zkcoro/client.hpp>: it
#   knows a backend only as a lock_backend;
# - the two backends include nothing of each other's;
# - hiredis only in redis/link.cpp, redis/handshake.cpp and redis/resp.cpp; redis/ (the Redis backend: a connection
#   and a lock on the engine) includes no ZooKeeper driver, operations or session header, and nothing but redis/
#   includes a redis/ header;
# - no file under src/ exceeds 500 lines.
# Usage: bash tests/layering/check_layers.sh [project root]
#        bash tests/layering/check_layers.sh --self-test [project root]
#          (plants one violation of each kind in a copy of src/ and expects each to be caught)
set -euo pipefail

if [ "${1:-}" = --self-test ]; then
  root=$(cd "${2:-$(dirname "$0")/../..}" && pwd)
  script=$root/tests/layering/check_layers.sh
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  bad=0
  # Each: a file, the line planted at its top, what the check must name.
  while IFS='|' read -r file line; do
    rm -rf "$tmp/src" "$tmp/include"
    cp -r "$root/src" "$root/include" "$tmp/"
    mkdir -p "$tmp/tests/layering"
    { echo "$line"; cat "$root/$file"; } >"$tmp/$file"
    if out=$(bash "$script" "$tmp" 2>&1); then
      echo "layering self-test: not caught: '$line' in $file" >&2
      bad=$((bad + 1))
    else
      echo "caught: $file: $(echo "$out" | head -1)"
    fi
  done <<'PLANTS'
src/engine/lock_machine.cpp|#include <zkcoro/client.hpp>
src/engine/lock_object.cpp|#include "zookeeper/lock.hpp"
src/engine/linger.cpp|#include "redis/backend.hpp"
src/redis/lock.cpp|#include "zookeeper/lock_queue.hpp"
src/zookeeper/backend.cpp|#include "redis/redis_impl.hpp"
src/recipes/mutex.cpp|#include "driver/client_impl.hpp"
src/async/op_state.hpp|#include "engine/lock_object.hpp"
src/engine/rules.cpp|#include <hiredis/hiredis.h>
PLANTS
  # And a file over the size cap.
  rm -rf "$tmp/src" "$tmp/include"
  cp -r "$root/src" "$root/include" "$tmp/"
  seq 1 501 | sed 's#^#// #' >"$tmp/src/engine/too_long.cpp"
  if bash "$script" "$tmp" >/dev/null 2>&1; then
    echo "layering self-test: not caught: a file of 501 lines" >&2
    bad=$((bad + 1))
  else
    echo "caught: a file of 501 lines"
  fi
  [ "$bad" -eq 0 ] || exit 1
  echo "layering self-test: ok"
  exit 0
fi

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

# forbid DIR REGEX WHAT: each file under DIR that includes a header matching REGEX is a violation.
forbid() {
  local f
  for f in $(includers "$1" "$2"); do
    fail "$f $3"
  done
}

c_client='zookeeper/zookeeper\.h|driver/'
for dir in src/engine src/recipes src/async include; do
  forbid "$dir" "$c_client" "includes the C client or a driver header"
done
forbid src/recipes 'session/' "(a recipe) includes a session header"
forbid src/engine 'recipes/' "(the engine) includes a recipe"
forbid src/engine '"?zookeeper/|redis/|zkcoro/client\.hpp|session/' \
  "(the engine) includes a backend's header, the ZooKeeper client or a session header"
forbid src/zookeeper 'redis/|recipes/' "(the ZooKeeper backend) includes a header of the Redis backend or a recipe"
forbid src/redis 'zookeeper/|zkcoro/client\.hpp' "(the Redis backend) includes a header of the ZooKeeper backend or client"
forbid src/session 'driver/|engine/|recipes/|async/|zookeeper/' "(the session machine, pure) includes another layer"
forbid src/async 'engine/|recipes/|session/' "(async/, below every layer) includes a layer above it"
for f in $(grep -rlE '^[[:space:]]*#[[:space:]]*include[[:space:]]*<zookeeper/zookeeper\.h>' src include); do
  case $f in
    src/driver/*|src/client.cpp|src/client_requests.cpp|src/watch.cpp|src/error.cpp) ;;
    *) fail "$f includes zookeeper.h" ;;
  esac
done
for f in $(grep -rlE '^[[:space:]]*#[[:space:]]*include[[:space:]]*<hiredis/' src include); do
  case $f in
    src/redis/link.cpp|src/redis/handshake.cpp|src/redis/resp.cpp) ;;
    *) fail "$f includes hiredis (only src/redis/link.cpp, src/redis/handshake.cpp and src/redis/resp.cpp may)" ;;
  esac
done
forbid src/redis "$c_client|session/|recipes/" "(the Redis backend) includes a ZooKeeper driver, session or recipe header"
for dir in src/engine src/zookeeper src/recipes src/driver src/session src/async include; do
  forbid "$dir" 'redis/' "includes a header of the Redis backend"
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
