#!/bin/bash
# Trap sites (ud2) in our compiled code: each must be one the compiler puts in every coroutine.
#
#   check_traps.sh BINARY...       scan the binaries (the library, zklock)
#   check_traps.sh --self-test     the check itself: a planted trap must be caught
#
# GCC lowers each coroutine into an actor function that switches on the frame's resume index;
# the switch's default (an index no suspension point set: a frame resumed after its destruction,
# or overwritten) is __builtin_trap, a ud2. There are two such switches per actor (resume and
# destroy). Any other ud2 is a path the compiler proved to be undefined behaviour and replaced
# by a trap (at -O2, -fisolate-erroneous-paths-dereference turns a proven null dereference into
# one; __builtin_unreachable reached in some builds): issue 32's SIGILL was looked for there.
# So: a ud2 outside a coroutine actor fails, and so does an actor with more than two.
set -u
objdump=${OBJDUMP:-objdump}
command -v "$objdump" >/dev/null || { echo "check_traps: $objdump not found (Debian package binutils)" >&2; exit 2; }

# scan FILE: prints one line per bad function: "<count> <function>"; exit 0 if none.
scan() {
    "$objdump" -d --no-show-raw-insn -C "$1" | awk '
        # Keyed by address: an actor of internal linkage is emitted once per translation unit.
        /^[0-9a-f]+ <.*>:$/ { fn = substr($0, index($0, "<") + 1); sub(/>:$/, "", fn); at = $1; next }
        /\tud2/ { n[at] ++; name[at] = fn }
        END {
            bad = 0
            for (a in n) {
                f = name[a]
                actor = (f ~ /\[clone \.actor\]/ || f ~ /\.Frame\.actor$/ || f ~ /\.actor(\.cold)?$/ || f ~ /\[clone \.actor\] \[clone \.cold\]/)
                if (!actor || n[a] > 2) { printf "%d %s\n", n[a], f; bad = 1 }
            }
            exit bad
        }'
}

if [ "${1:-}" = --self-test ]; then
    cxx=${CXX:-c++}
    tmp=$(mktemp -d) || exit 2
    trap 'rm -rf "$tmp"' EXIT
    # A plain function with a trap: must be caught, by name.
    printf '%s\n' 'extern "C" int planted_trap(int* p) { if (!p) __builtin_trap(); return *p; }' >"$tmp/t.cpp"
    "$cxx" -O2 -c "$tmp/t.cpp" -o "$tmp/t.o" || { echo "check_traps self-test: cannot compile" >&2; exit 2; }
    out=$(scan "$tmp/t.o") && { echo "FAIL: a planted ud2 in planted_trap was not reported" >&2; exit 1; }
    grep -q planted_trap <<<"$out" || { echo "FAIL: the report does not name planted_trap: $out" >&2; exit 1; }
    # A coroutine's own dispatch traps: must pass.
    cat >"$tmp/c.cpp" <<'CPP'
#include <coroutine>
struct task {
    struct promise_type {
        task get_return_object() { return {}; }
        std::suspend_never initial_suspend() noexcept { return {}; }
        std::suspend_never final_suspend() noexcept { return {}; }
        void return_void() {}
        void unhandled_exception() {}
    };
};
task coro_under_test(int n) { for (int i = 0; i < n; ++i) co_await std::suspend_always{}; }
CPP
    "$cxx" -std=c++20 -O2 -c "$tmp/c.cpp" -o "$tmp/c.o" || { echo "check_traps self-test: cannot compile" >&2; exit 2; }
    if ! "$objdump" -d "$tmp/c.o" | grep -q ud2; then
        echo "FAIL: the compiler put no trap in a coroutine's actor: the allow-list is out of date" >&2; exit 1
    fi
    out=$(scan "$tmp/c.o") || { echo "FAIL: a coroutine's dispatch traps were reported: $out" >&2; exit 1; }
    echo "check_traps self-test: a planted trap is reported by name; a coroutine's dispatch traps pass"
    exit 0
fi

[ $# -gt 0 ] || { echo "usage: check_traps.sh BINARY... | --self-test" >&2; exit 2; }
status=0
for f in "$@"; do
    [ -f "$f" ] || { echo "check_traps: no such file: $f" >&2; exit 2; }
    total=$("$objdump" -d --no-show-raw-insn "$f" | grep -c $'\tud2')
    if out=$(scan "$f"); then
        echo "check_traps: $f: $total trap sites, all in coroutine actors' dispatch (at most 2 each)"
    else
        echo "FAIL: $f: trap sites (ud2) outside a coroutine actor's dispatch, or more than 2 in one actor:" >&2
        echo "$out" | sed 's/^/  /' >&2
        status=1
    fi
done
exit $status
