#!/usr/bin/env python3
"""Holds zklock's documented exit statuses against the code's table (the test zklock_exit_table).

Usage: check_exit_table.py EXIT_TABLE ZKLOCK MANPAGE README

EXIT_TABLE (tests/zklock/exit_table.cpp, built from tools/zklock/exit_codes.cpp) checks the
error-to-exit mapping and prints the table's rows, "CODE NAME" (NAME may be empty). The numbered
rows of the man page's EXIT STATUS section, of README.md's "Exit status" table and of
`zklock --help`'s EXIT STATUS list must be exactly those codes with those sysexits.h names; the
statuses that "status" and "revoke" name beside them must be rows too (or 0, 1).
"""
import re
import subprocess
import sys


def fail(msg):
    sys.exit(f"FAIL: {msg}")


def code_table(exe):
    out = subprocess.run([exe], capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        fail(f"{exe} exited {out.returncode}:\n{out.stderr}")
    rows = {}
    for line in out.stdout.splitlines():
        code, _, name = line.partition(" ")
        rows[int(code)] = name.strip()
    if not rows:
        fail(f"{exe} printed no rows")
    return rows


def manpage_rows(text):
    """The .TP entries of .SH EXIT STATUS whose tag is a number: {code: EX_NAME or ''}."""
    section = re.search(r"^\.SH EXIT STATUS\n(.*?)(?=^\.SH )", text, re.M | re.S)
    if not section:
        fail("the man page has no .SH EXIT STATUS section")
    body = section.group(1)
    rows = {}
    for m in re.finditer(r"^\.TP\n\.B (\S+)\n(.*)$", body, re.M):
        if m.group(1).isdigit():
            name = re.match(r"(EX_[A-Z]+):", m.group(2))
            rows[int(m.group(1))] = name.group(1) if name else ""
    return rows, body


def readme_rows(text):
    section = re.search(r"^## Exit status\n(.*?)(?=^## )", text, re.M | re.S)
    if not section:
        fail("README.md has no '## Exit status' section")
    body = section.group(1)
    rows = {}
    for m in re.finditer(r"^\| (\d+)(?: \((EX_[A-Z]+)\))? \|", body, re.M):
        rows[int(m.group(1))] = m.group(2) or ""
    return rows, body


def help_rows(zklock):
    out = subprocess.run([zklock, "--help"], capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        fail(f"zklock --help exited {out.returncode}")
    section = re.search(r"^EXIT STATUS\n(.*?)(?=^\S)", out.stdout, re.M | re.S)
    if not section:
        fail("zklock --help has no EXIT STATUS list")
    rows = {}
    for m in re.finditer(r"^  (\d+) +(EX_[A-Z]+)?", section.group(1), re.M):
        rows[int(m.group(1))] = m.group(2) or ""
    rest = out.stdout[section.end():]
    return rows, rest


def subcommand_codes(text):
    """The numbers named in the status/revoke sentences after the table (0 and 1 aside)."""
    codes = set()
    for sentence in re.findall(r"(?:status|revoke)[^.]*?exits?[^.]*\.|(?:status|revoke):[^\n]*(?:\n[^\n]+)*", text):
        codes.update(int(n) for n in re.findall(r"(?<![\d+.])(\d{2,3})(?![\d+])", sentence))
    return codes - {0, 1}


def compare(where, doc, table, errors):
    for code, name in sorted(table.items()):
        if code not in doc:
            errors.append(f"{where}: no row for exit {code} ({name or 'no sysexits name'})")
        elif doc[code] != name:
            errors.append(f"{where}: exit {code} is called '{doc[code]}', the code's table says '{name}'")
    for code in sorted(set(doc) - set(table)):
        errors.append(f"{where}: exit {code} is not in the code's table (tools/zklock/exit_codes.hpp)")


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    exe, zklock, manpage, readme = sys.argv[1:]
    table = code_table(exe)
    errors = []
    with open(manpage, encoding="utf-8") as f:
        man, man_body = manpage_rows(f.read())
    compare(f"{manpage} EXIT STATUS", man, table, errors)
    with open(readme, encoding="utf-8") as f:
        rd, rd_body = readme_rows(f.read())
    compare(f"{readme} Exit status", rd, table, errors)
    hl, hl_rest = help_rows(zklock)
    compare("zklock --help EXIT STATUS", hl, table, errors)
    for where, text in ((manpage, re.sub(r"^\.\S+ ?", "", man_body, flags=re.M)), (readme, rd_body),
                        ("zklock --help", hl_rest)):
        for code in sorted(subcommand_codes(text) - set(table)):
            errors.append(f"{where}: status/revoke exit {code} is not in the code's table")
    if errors:
        fail("\n".join(errors))
    print(f"OK: {len(table)} numbered exit statuses agree: the code's table, the man page, README.md, --help")


if __name__ == "__main__":
    main()
