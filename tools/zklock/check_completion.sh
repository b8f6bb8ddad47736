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
    read -ra COMP_WORDS <<<"$line"
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
expect 'zklock ' 'revoke status'
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
