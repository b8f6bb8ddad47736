#!/usr/bin/env python3
"""Checks that zklock.1 and `zklock --help` agree (the test zklock_manpage).

Usage: check_manpage.py ZKLOCK MANPAGE VERSION

Every option of `zklock --help`, `zklock status --help` and `zklock revoke --help` must have an
entry in the man page (a .TP entry under OPTIONS for zklock, under the .SS "zklock SUB" of the
subcommand), every subcommand of --help must have its .SS, the .TH line names the version, and every option the man page lists
must exist in the matching --help. groff must format the page without a warning.
"""
import re
import subprocess
import sys

OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


def help_text(zklock, *words):
    out = subprocess.run([zklock, *words, "--help"], capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        sys.exit(f"FAIL: zklock {' '.join(words)} --help exited {out.returncode}: {out.stderr}")
    return out.stdout


def help_options(text):
    """Options and subcommands of one CLI11 help text."""
    options, subcommands, section = set(), set(), None
    for line in text.splitlines():
        if re.match(r"^\S.*:$", line):
            section = line[:-1]
            continue
        if not line.strip():
            if section == "Subcommands":
                section = None
            continue
        if section == "Options" and re.match(r"^  -", line):
            options.update(line.split()[0].split(","))
        elif section == "Subcommands" and re.match(r"^  \w", line):
            subcommands.add(line.split()[0])
    return options, subcommands


def man_options(page):
    """{context: options} from the man page: context '' is zklock, else the subcommand."""
    found, context, after_tp, subcommands = {}, None, False, set()
    for line in page.splitlines():
        if line.startswith(".SH"):
            context = "" if line.split(None, 1)[1].strip('"') == "OPTIONS" else None
            continue
        m = re.match(r'^\.SS "zklock (\w+)"', line)
        if m:
            context = m.group(1)
            subcommands.add(context)
            continue
        if line.startswith(".TP"):
            after_tp = True
            continue
        if after_tp and context is not None:
            found.setdefault(context, set()).update(OPTION.findall(line.replace("\\-", "-")))
        after_tp = False
    return found, subcommands


def main():
    zklock, manpage, version = sys.argv[1], sys.argv[2], sys.argv[3]
    page = open(manpage, encoding="utf-8").read()
    in_man, man_subs = man_options(page)
    top, subs = help_options(help_text(zklock))
    errors = []
    th = next((line for line in page.splitlines() if line.startswith(".TH ")), "")
    if f'"zkcoro {version}"' not in th:
        errors.append(f'the .TH line does not name "zkcoro {version}" (the project version): {th}')
    if not subs:
        errors.append("no subcommand found in zklock --help (has its format changed?)")
    for sub in sorted(subs - man_subs):
        errors.append(f"subcommand '{sub}' of --help has no .SS \"zklock {sub}\" in the man page")
    for sub in sorted(man_subs - subs):
        errors.append(f"the man page describes a subcommand '{sub}' that --help does not list")
    for context, opts in [("", top)] + [(s, help_options(help_text(zklock, s))[0]) for s in sorted(subs)]:
        name = "zklock" + (" " + context if context else "")
        if not opts:
            errors.append(f"no option found in {name} --help (has its format changed?)")
        man = in_man.get(context, set())
        for o in sorted(opts - man):
            errors.append(f"{name} --help has {o}; the man page does not")
        for o in sorted(man - opts):
            errors.append(f"the man page lists {o} for {name}; {name} --help does not")
        print(f"{name}: {len(opts)} options in --help, {len(man)} in the man page")
    groff = subprocess.run(["groff", "-man", "-ww", "-z", "-Tutf8", manpage], capture_output=True, text=True,
                           timeout=30)
    if groff.returncode != 0 or groff.stderr.strip():
        errors.append(f"groff warns about the man page: {groff.stderr.strip()}")
    for e in errors:
        print("FAIL:", e)
    if errors:
        sys.exit(1)
    print("zklock.1 and --help agree")


if __name__ == "__main__":
    main()
