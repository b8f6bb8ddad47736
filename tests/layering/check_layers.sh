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
# - no C++ file under src/ or tools/ exceeds 500 lines (tools/: but the ones in too_long_ok below,
#   each with its reason and the issue that takes it off).
# Usage: bash tests/layering/check_layers.sh [project root]
#        bash tests/layering/check_layers.sh --self-test [project root]
#          (an unmodified copy of src/, include/ and tools/ must pass; one violation of each rule
#          planted in a copy must fail with that rule's message naming the planted file)
set -euo pipefail

if [ "${1:-}" = --self-test ]; then
  root=$(cd "${2:-$(dirname "$0")/../..}" && pwd)
  script=$root/tests/layering/check_layers.sh
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  bad=0
  fresh_copy() {
    rm -rf "$tmp/src" "$tmp/include" "$tmp/tools"
    cp -r "$root/src" "$root/include" "$root/tools" "$tmp/"
  }
  # An unmodified copy passes: a plant below is caught for what it is, not for the copy.
  fresh_copy
  if ! out=$(bash "$script" "$tmp" 2>&1) || ! grep -q '^layering: ok' <<<"$out"; then
    echo "layering self-test: the unmodified copy of src/, include/ and tools/ failed:" >&2
    echo "$out" >&2
    bad=$((bad + 1))
  else
    echo "unmodified copy: $out"
  fi
  # check_plant FILE WHAT: the copy (with one violation planted in FILE) must fail, and the check
  # must report exactly the line "layering: FILE WHAT" (the rule that FILE breaks, naming FILE).
  check_plant() {
    local out
    if out=$(bash "$script" "$tmp" 2>&1); then
      echo "layering self-test: not caught: $1 ($2)" >&2
      bad=$((bad + 1))
    elif ! grep -Fxq "layering: $1 $2" <<<"$out"; then
      echo "layering self-test: $1 planted, but no line 'layering: $1 $2'; the check said:" >&2
      echo "$out" >&2
      bad=$((bad + 1))
    else
      echo "caught: $1 $2"
    fi
  }
  # One violation per rule (and per directory where a rule covers several): a file (it may be
  # new), the line planted at its top, the message of the rule it breaks.
  while IFS='|' read -r file line what; do
    fresh_copy
    { echo "$line"; if [ -f "$root/$file" ]; then cat "$root/$file"; fi; } >"$tmp/$file"
    check_plant "$file" "$what"
  done <<'PLANTS'
src/engine/lock_machine.cpp|#include "driver/client_impl.hpp"|includes the C client or a driver header
src/recipes/mutex.cpp|#include <zookeeper/zookeeper.h>|includes the C client or a driver header
src/async/op_state.hpp|#include "driver/registry.hpp"|includes the C client or a driver header
include/zkcoro/client.hpp|#include "driver/client_impl.hpp"|includes the C client or a driver header
src/recipes/leader_latch.cpp|#include "session/session_fsm.hpp"|(a recipe) includes a session header
src/engine/lock_object.cpp|#include "recipes/planted.hpp"|(the engine) includes a recipe
src/engine/linger.cpp|#include <zkcoro/client.hpp>|(the engine) includes a backend's header, the ZooKeeper client or a session header
src/zookeeper/backend.cpp|#include "recipes/planted.hpp"|(the ZooKeeper backend) includes a header of the Redis backend or a recipe
src/redis/lock.cpp|#include "zookeeper/lock_queue.hpp"|(the Redis backend) includes a header of the ZooKeeper backend or client
src/session/session_fsm.cpp|#include "engine/lock_object.hpp"|(the session machine, pure) includes another layer
src/async/pool.hpp|#include "engine/lock_object.hpp"|(async/, below every layer) includes a layer above it
src/zookeeper/diagnostics.cpp|#include <zookeeper/zookeeper.h>|includes zookeeper.h
src/redis/lock.cpp|#include <hiredis/hiredis.h>|includes hiredis (only src/redis/link.cpp, src/redis/handshake.cpp and src/redis/resp.cpp may)
src/redis/renewal.cpp|#include "session/session_fsm.hpp"|(the Redis backend) includes a ZooKeeper driver, session or recipe header
src/driver/registry.cpp|#include "redis/backend.hpp"|includes a header of the Redis backend
src/recipes/multi_lock.cpp|#include "redis/backend.hpp"|includes a header of the Redis backend
src/session/session_fsm.hpp|#include "redis/backend.hpp"|includes a header of the Redis backend
include/zkcoro/error.hpp|#include "redis/backend.hpp"|includes a header of the Redis backend
src/engine/rules.cpp|#include "redis/backend.hpp"|includes a header of the Redis backend
src/zookeeper/backend.cpp|#include "redis/redis_impl.hpp"|includes a header of the Redis backend
src/async/coroutine.hpp|#include "redis/link.hpp"|includes a header of the Redis backend
src/client.cpp|#include "redis/redis_impl.hpp"|includes a header of the Redis backend
PLANTS
  # And a file over the size cap, under src/ and under tools/ (a new file and one that exists).
  for file in src/engine/too_long.cpp tools/zklock/too_long.cpp tools/zklock/queue.cpp; do
    fresh_copy
    { [ -f "$root/$file" ] && cat "$root/$file"; seq 1 501 | sed 's#^#// #'; } >"$tmp/$file.new"
    mv "$tmp/$file.new" "$tmp/$file"
    check_plant "$file" "has $(wc -l <"$tmp/$file") lines (at most 500)"
  done
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
# Nothing but redis/ includes a redis/ header: the layers' folders, the client facade beside them
# (src/*.cpp) and the public headers alike.
for f in $(includers src 'redis/') $(includers include 'redis/'); do
  case $f in
    src/redis/*) ;;
    *) fail "$f includes a header of the Redis backend" ;;
  esac
done
# Files over the cap for now, each with its reason (tools/ only: src/ has none).
too_long_ok=(
  tools/zkserver/zk_server.cpp # the test servers' harness (ZooKeeper start, stop, restart, ports): not split yet
)
while read -r lines file; do
  [ "$file" = total ] && continue
  [ "$lines" -gt 500 ] || continue
  case " ${too_long_ok[*]} " in
    *" $file "*) ;;
    *) fail "$file has $lines lines (at most 500)" ;;
  esac
done < <(find src tools -type f \( -name '*.cpp' -o -name '*.hpp' \) -print0 | xargs -0 wc -l)

if [ "$failures" -gt 0 ]; then
  echo "layering: $failures violation(s)" >&2
  exit 1
fi
echo "layering: ok ($(find src tools -type f \( -name '*.cpp' -o -name '*.hpp' \) | wc -l) files)"
