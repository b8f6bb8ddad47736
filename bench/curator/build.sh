#!/bin/sh
# Compile CuratorBench.java and CuratorScale.java (bench/scale_curator.sh), with what they share
# (BenchSupport.java), against Debian's Curator jars (no network) into OUTDIR and write
# OUTDIR/classpath.txt with the full runtime classpath (OUTDIR first).
#
#   bench/curator/build.sh OUTDIR
#   java -cp "$(cat OUTDIR/classpath.txt)" CuratorBench --help
#
# The jar list and the javac call are shared with tests/interop/build.sh, in
# tests/interop/curator-classpath.sh. JAVA_SHARE overrides /usr/share/java; JAVAC overrides javac.
set -eu

if [ $# -ne 1 ]; then
    echo "usage: $0 OUTDIR" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../../tests/interop/curator-classpath.sh
. "$here/../../tests/interop/curator-classpath.sh"

curator_build "$1" "$here/BenchSupport.java" "$here/CuratorBench.java" "$here/CuratorScale.java" || exit 1
echo "built $curator_out/CuratorBench.class and CuratorScale.class; classpath in $curator_out/classpath.txt"
