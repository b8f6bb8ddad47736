#!/usr/bin/env bash
# Checks zklock's bash completion (the test zklock_completion): sources it in this bash, runs its
# function on a few command lines, and checks that it offers every option of `zklock --help`,
# `zklock status --help` and `zklock revoke --help` (and no other).
# Usage: check_completion.sh ZKLOCK COMPLETION_FILE
set -euo pipefail
zklock=$1
# shellcheck source=/dev/null
source "$2"
fails=0

# complete LINE: COMPREPLY for the command line LINE, the cursor at its end (a trailing space
# starts a new, empty word).
complete_line() {
    local line=$1
    # "=" is a word of its own, as COMP_WORDBREAKS makes it: "--data=x" is "--data" "=" "x".
    read -ra COMP_WORDS <<<"${line//=/ = }"
    [[ $line == *' ' ]] && COMP_WORDS+=("")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMP_LINE=$line
    COMP_POINT=${#line}
    COMPREPLY=()
    _zklock zklock "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
    printf '%s\n' "${COMPREPLY[@]}" | sort -u | tr '\n' ' ' | sed 's/ $//'
}
expect() {  # LINE EXPECTED (sorted, space-separated)
    local got
    got=$(complete_line "$1")
    if [[ $got == "$2" ]]; then
        echo "ok:   '$1' -> $got"
    else
        echo "FAIL: '$1' -> '$got', expected '$2'"
        fails=$((fails + 1))
    fi
}
expect 'zklock st' 'status'
expect 'zklock ' 'revoke run status'
expect 'zklock --on-l' '--on-lost'
expect 'zklock --on-lost ' 'ignore kill term'
expect 'zklock --on-revoke i' 'ignore'
expect 'zklock --acl c' 'creator'
expect 'zklock --sem' '--semaphore'
expect 'zklock -t ' ''
expect 'zklock status --c' '--connect --cycles'
expect 'zklock status -r --o' '--older-than'
expect 'zklock revoke --' '--auth-file --connect --help --verbose'
expect 'zklock /locks/x -- zklock-no-such-command-prefix' ''
expect 'zklock /locks/x /locks/y' ''
# An option's value is not a subcommand (issue 32 item 13): --data's "status" is its text, the
# next word the LOCKPATH; after "run", status is a LOCKPATH too.
expect 'zklock --data status /x --js' ''
expect 'zklock --data status /x --sem' '--semaphore'
expect 'zklock -c 127.0.0.1:2181 status --js' '--json'
expect 'zklock --data=status /x --js' ''
expect 'zklock run status --js' ''
expect 'zklock run status --sem' '--semaphore'
expect 'zklock -v st' 'status'
expect 'zklock /locks/x st' ''
# After "--" without bash-completion (no _command_offset): each command name once, though it is a
# builtin and in several PATH directories (echo: 'echo echo echo' before).
unset -f _command_offset 2>/dev/null || true
raw() {  # COMPREPLY for LINE, unsorted, one per line
    read -ra COMP_WORDS <<<"$1"
    [[ $1 == *' ' ]] && COMP_WORDS+=("")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMPREPLY=()
    _zklock zklock "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
    printf '%s\n' "${COMPREPLY[@]}"
}
for line in 'zklock /locks/x -- ech' 'zklock -n /locks/x -- ec'; do
    dups=$(raw "$line" | sort | uniq -d | tr '\n' ' ')
    n=$(raw "$line" | grep -cx echo)
    if [[ -z $dups && $n -eq 1 ]]; then echo "ok:   '$line' offers echo once, no duplicates"
    else echo "FAIL: '$line' offers echo $n times; duplicates: '$dups'"; fails=$((fails + 1)); fi
done
got=$(complete_line 'zklock /locks/x -- bas')
if [[ " $got " == *' bash '* ]]; then echo "ok:   'zklock /locks/x -- bas' offers bash"
else echo "FAIL: 'zklock /locks/x -- bas' -> '$got', no bash"; fails=$((fails + 1)); fi

# Every option of --help, per subcommand, and nothing more.
help_opts() {  # the options of one CLI11 help text
    awk '/^Options:/ {on=1; next} /^[^ ]/ {on=0} on && /^  -/ {split($1, a, ","); for (i in a) print a[i]}' |
        sort -u | tr '\n' ' ' | sed 's/ $//'
}
for sub in "" status revoke; do
    want=$("$zklock" $sub --help | help_opts)
    got=$(complete_line "zklock${sub:+ $sub} -" | tr ' ' '\n' | sort -u | tr '\n' ' ' | sed 's/ $//')
    if [[ $got == "$want" ]]; then
        echo "ok:   zklock${sub:+ $sub} -: the options of --help ($(wc -w <<<"$want"))"
    else
        echo "FAIL: zklock${sub:+ $sub} -: completion offers '$got'; --help has '$want'"
        fails=$((fails + 1))
    fi
done
((fails == 0)) || { echo "$fails failure(s)"; exit 1; }
echo "zklock's bash completion agrees with --help"
