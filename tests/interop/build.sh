#!/bin/sh
# Compile CuratorHolder.java against Debian's Curator jars (no network) into OUTDIR and write
# OUTDIR/classpath.txt with the full runtime classpath (OUTDIR first).
#
#   tests/interop/build.sh OUTDIR
#   java -cp "$(cat OUTDIR/classpath.txt)" CuratorHolder --help
#
# JAVA_SHARE overrides /usr/share/java; JAVAC overrides javac.
set -eu

if [ $# -ne 1 ]; then
    echo "usage: $0 OUTDIR" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
share=${JAVA_SHARE:-/usr/share/java}
javac_bin=${JAVAC:-javac}

if ! command -v "$javac_bin" >/dev/null 2>&1; then
    echo "$0: javac not found: install the Debian package openjdk-17-jdk-headless" >&2
    exit 1
fi

# jar:Debian package. Compile-time needs the first six; the rest is the runtime closure of
# the client side (taken from the jars' manifest Class-Path entries, minus server-only jars
# such as jetty, netty, metrics, snappy, jline), plus an slf4j binding so that Curator's
# errors reach stderr instead of slf4j's "no binder" warning.
jars="
curator-recipes:libcurator-recipes-java
curator-framework:libcurator-framework-java
curator-client:libcurator-client-java
zookeeper:libzookeeper-java
zookeeper-jute:libzookeeper-java
guava:libguava-java
slf4j-api:libslf4j-java
slf4j-simple:libslf4j-java
jackson-databind:libjackson2-databind-java
jackson-core:libjackson2-core-java
jackson-annotations:libjackson2-annotations-java
commons-cli:libcommons-cli-java
commons-io:libcommons-io-java
"

cp=""
missing=0
for entry in $jars; do
    jar=${entry%%:*}
    pkg=${entry#*:}
    f="$share/$jar.jar"
    if [ ! -r "$f" ]; then
        echo "$0: missing $f: install the Debian package $pkg (apt-get install $pkg)" >&2
        missing=1
        continue
    fi
    cp="${cp:+$cp:}$f"
done
[ "$missing" -eq 0 ] || exit 1

"$javac_bin" -nowarn -encoding UTF-8 --release 11 -d "$out" -cp "$cp" "$here/CuratorHolder.java"
printf '%s\n' "$out:$cp" > "$out/classpath.txt"
echo "built $out/CuratorHolder.class; classpath in $out/classpath.txt"
