#!/bin/sh
# Compile CuratorHolder.java, CuratorElect.java and CuratorTwoLocks.java against Debian's Curator jars (no network) into OUTDIR and write
# OUTDIR/classpath.txt with the full runtime classpath (OUTDIR first).
#
#   tests/interop/build.sh OUTDIR
#   java -cp "$(cat OUTDIR/classpath.txt)" CuratorHolder --help
#
# The jar list and the javac call are in curator-classpath.sh (shared with
# bench/curator/build.sh). JAVA_SHARE overrides /usr/share/java; JAVAC overrides javac.
set -eu

if [ $# -ne 1 ]; then
    echo "usage: $0 OUTDIR" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=curator-classpath.sh
. "$here/curator-classpath.sh"

curator_build "$1" "$here/CuratorHolder.java" "$here/CuratorElect.java" "$here/CuratorTwoLocks.java" || exit 1
echo "built $curator_out/CuratorHolder.class; classpath in $curator_out/classpath.txt"
