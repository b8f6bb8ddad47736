#!/usr/bin/env python3
"""No co_await inside the condition of an if, while or switch, or in a conditional expression
(?:), in our C++ (src/, tools/).

    check_coawait_conditions.py ROOT          check ROOT/src and ROOT/tools
    check_coawait_conditions.py --self-test ROOT

g++ 12.2 (Debian 12) miscompiles a coroutine with a co_await in an `if` or `switch` condition
expression when the statement is followed by a co_return (or the body's end): the value of the
condition is stored at offset 0 of the coroutine frame, over the low byte of the frame's resume
pointer, and the next resumption jumps into the middle of another function (SIGSEGV, SIGILL,
an abort or a hang). `if (!co_await x)`, `if (co_await x)`, `if (a || !co_await x)`,
`if (co_await x == 0)`, `if ((co_await this_coro::cancellation_state).cancelled() ...)` and
`switch (co_await x)` all crashed; the same value in a variable did not (issue 32 item 2: zklock's
SIGILL at queue_walk::reconnected, and the first cut of hold_loop's supervise; the probe is
tests/unit/test_compiler_coroutines.cpp). Where the bug bites depends on what follows the
statement, which a reader cannot see at a glance; so the rule is simple: await into a variable,
then test the variable:

    const bool connected = co_await wait_connected(...);
    if (!connected) ...

A declaration as the condition or the init-statement (`if (auto ec = co_await f())`,
`if (auto ec = co_await f(); ec)`) is a variable too and did not crash: allowed. Comments and
string literals are ignored.

A co_await in an operand of ?:, or of a ?: (`co_await (c ? a() : b())`), destroys the awaited
result or the awaitable's frame twice in g++ 12 (a crash in free); the same rule: await in a
statement of its own (two branches of an if).

No site is allowed: the last ones (held_node.cpp, redis/lock.cpp, redis/backend.hpp) were
rewritten after the check came.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

DIRS = ('src', 'tools')
EXTS = ('.cpp', '.hpp', '.h', '.cc', '.cxx', '.ipp')


def strip(text):
    """Comments and the contents of string and character literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i))
            i = j
        elif text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
        elif c == 'R' and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == '_')):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(')' + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
        elif c in '"\'':
            if c == "'" and i > 0 and text[i - 1].isalnum():  # a digit separator: 1'000
                out.append(c)
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != '\n':
                j += 2 if text[j] == '\\' else 1
            j = min(j + 1, n)
            out.append(c + ' ' * (j - i - 2) + c if j - i >= 2 else text[i:j])
            i = j
        else:
            out.append(c)
            i += 1
    return ''.join(out)


# A declaration: a type (one or more words, with ::, <...>, const, &, *) then a name or a
# structured binding, then = or {.
DECL = re.compile(r'^\s*(?:const\s+|constexpr\s+|static\s+)*[A-Za-z_][\w:]*(?:\s*<[^;]*?>)?[\s&*]*'
                  r'(?:const\s+)?[\s&*]*(?:[A-Za-z_]\w*|\[[^\]]*\])\s*(?:=|\{)', re.S)


def bad_part(cond):
    """The part of a condition that must not hold a co_await: the whole expression, or after an
    init-statement's ';' its expression; a declaration's initializer is allowed."""
    parts = split_top(cond, ';')
    tests = []
    if len(parts) == 2:  # init-statement; condition
        tests = [parts[1]]
    elif len(parts) == 1:
        tests = [parts[0]]
    else:  # a for (;;): not ours
        return ''
    t = tests[0]
    if DECL.match(t):
        return ''
    return t


def split_top(s, sep):
    depth, parts, cur = 0, [], []
    for ch in s:
        if ch in '([{':
            depth += 1
        elif ch in ')]}':
            depth -= 1
        if ch == sep and depth == 0:
            parts.append(''.join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append(''.join(cur))
    return parts


def sites(text):
    """(line, keyword, condition) of each if/while/switch whose condition holds a co_await."""
    clean = strip(text)
    for m in re.finditer(r'\b(if|while|switch)\s*(?:constexpr\s*)?\(', clean):
        i, depth = m.end(), 1
        while i < len(clean) and depth:
            if clean[i] == '(':
                depth += 1
            elif clean[i] == ')':
                depth -= 1
            i += 1
        cond = clean[m.end():i - 1]
        if re.search(r'\bco_await\b', bad_part(cond)):
            yield clean.count('\n', 0, m.start()) + 1, m.group(1), ' '.join(cond.split())


def ternary_sites(text):
    """(line, expression) of each conditional expression (?:) with a co_await in an operand, or
    that is itself the operand of a co_await: g++ 12 destroys the awaited result (or the
    awaitable's frame) twice there (`auto [ec, r] = w ? co_await a : co_await b;` crashed with
    munmap_chunk(): invalid pointer; lock_queue.cpp's enter() had the same shape)."""
    clean = strip(text)
    n = len(clean)
    for m in re.finditer(r'\?', clean):
        q = m.start()
        if q + 1 < n and clean[q + 1] in '?:':  # not a conditional (?? trigraph, ?: extension)
            continue
        # The expression's start: left to an unmatched '(' / '[' / '{', or a ',', ';' at depth 0,
        # or an assignment's '=' at depth 0.
        i, depth = q - 1, 0
        while i >= 0:
            c = clean[i]
            if c in ')]}':
                depth += 1
            elif c in '([{':
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and c in ',;':
                break
            elif depth == 0 and c == '=' and clean[i - 1:i] not in ('=', '!', '<', '>') and clean[i + 1:i + 2] != '=':
                break
            i -= 1
        start = i + 1
        opener = clean[i] if i >= 0 else ''
        # The end: right to an unmatched ')' / ']' / '}', or a ',', ';' at depth 0.
        j, depth = q + 1, 0
        while j < n:
            c = clean[j]
            if c in '([{':
                depth += 1
            elif c in ')]}':
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and c in ',;':
                break
            j += 1
        expr = clean[start:j]
        awaited = opener == '(' and re.search(r'\bco_await\s*$', clean[max(0, i - 40):i]) is not None
        if awaited or re.search(r'\bco_await\b', expr):
            yield clean.count('\n', 0, q) + 1, ' '.join(expr.split())


def check(root):
    failures = []
    for d in DIRS:
        for dp, dn, fn in os.walk(os.path.join(root, d)):
            dn.sort()
            for f in sorted(fn):
                if not f.endswith(EXTS):
                    continue
                path = os.path.join(dp, f)
                rel = os.path.relpath(path, root)
                with open(path, encoding='utf-8', errors='replace') as fh:
                    found = list(sites(fh.read()))
                for line, kw, cond in found:
                    failures.append(f'{rel}:{line}: co_await in the condition of {kw} ({cond[:100]})')
                with open(path, encoding='utf-8', errors='replace') as fh:
                    for line, expr in ternary_sites(fh.read()):
                        failures.append(f'{rel}:{line}: co_await in a conditional expression ({expr[:100]})')
    for f in failures:
        print(f'check_coawait_conditions: {f}', file=sys.stderr)
    if failures:
        print('check_coawait_conditions: g++ 12 miscompiles a co_await in a condition (see this script): '
              'await into a variable, then test the variable', file=sys.stderr)
        return 1
    print('check_coawait_conditions: no co_await in a condition or a conditional expression of src/ or tools/')
    return 0


PLANTS = [
    ('if (!co_await wait_connected(zk, deadline))\n        co_return false;', True),
    ('if (co_await cancelled())\n        co_return false;', True),
    ('if (!ec || !is_retriable(ec) ||\n        !co_await wait_connected(zk, d))\n        co_return false;', True),
    ('if (ready && co_await probe())\n        co_return false;', True),
    ('if (co_await count() == 0)\n        co_return false;', True),
    ('if ((co_await asio::this_coro::cancellation_state).cancelled() != none)\n        co_return false;', True),
    ('while (!co_await probe())\n        ;', True),
    ('switch (co_await count()) { default: break; }', True),
    ('if (auto ec = co_await f(); ec && !co_await g())\n        co_return false;', True),
    ('if (auto ec = co_await f())\n        co_return false;', False),
    ('if (auto ec = co_await f(); ec && !is_retriable(ec))\n        co_return false;', False),
    ('if (const auto [ec, n] = co_await f(); ec)\n        co_return false;', False),
    ('const bool held = co_await probe();\n    if (!held)\n        co_return false;', False),
    ('// if (!co_await probe()) in a comment\n    /* if (co_await x) */', False),
    ('log("if (!co_await probe())");', False),
    ('auto [ec, r] = watch ? co_await a() : co_await b();', True),
    ('auto r = co_await (watch ? a() : b());', True),
    ('const int n = ready ? co_await count() : 0;', True),
    ('co_return ok ? co_await f() : false;', True),
    ('auto r = co_await f(watch ? 1 : 2);', False),
    ('const bool b = co_await probe();\n    const int n = b ? 1 : 2;', False),
    ('co_return have ? step::evaluate : step::again;', False),
]


def self_test(root):
    ok = True
    tmp = tempfile.mkdtemp()
    try:
        copy = os.path.join(tmp, 'tree')
        for d in DIRS:
            shutil.copytree(os.path.join(root, d), os.path.join(copy, d))

        def run(tree=copy):
            p = subprocess.run([sys.executable, __file__, tree], capture_output=True, text=True)
            return p.returncode, p.stderr

        rc, err = run()
        if rc != 0:
            print(f'self-test: an unmodified copy fails:\n{err}', file=sys.stderr)
            ok = False
        # Each plant is checked in a tree of its own file alone (the check reads each file on its
        # own, so the rest of the copy, clean as just shown, could not change the verdict): one
        # walk of the whole copy per plant took most of this self-test's time.
        alone = os.path.join(tmp, 'alone')
        os.makedirs(os.path.join(alone, 'src', 'zookeeper'))
        planted = os.path.join(alone, 'src', 'zookeeper', 'planted_site.cpp')
        for body, must_fail in PLANTS:
            with open(planted, 'w') as fh:
                fh.write('asio::awaitable<bool> planted()\n{\n    ' + body + '\n    co_return true;\n}\n')
            rc, err = run(alone)
            caught = rc == 1 and 'src/zookeeper/planted_site.cpp:' in err
            if caught != must_fail or (not must_fail and rc != 0):
                what = 'not caught' if must_fail else f'refused (rc {rc}): {err.strip()}'
                print(f'self-test: {" ".join(body.split())!r}: {what}', file=sys.stderr)
                ok = False
        os.remove(planted)
    finally:
        shutil.rmtree(tmp)
    print(f'self-test: {len(PLANTS)} plants and an unmodified copy: '
          f'{"PASS" if ok else "FAIL"}')
    return 0 if ok else 1


if __name__ == '__main__':
    if len(sys.argv) == 3 and sys.argv[1] == '--self-test':
        sys.exit(self_test(sys.argv[2]))
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(check(sys.argv[1]))
