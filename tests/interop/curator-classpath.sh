# shellcheck shell=sh
# Sourced (POSIX sh) by tests/interop/build.sh and bench/curator/build.sh: the Debian jars that
# Java programs using Apache Curator's recipes need, and how to compile such programs.
#
#   . "$dir/curator-classpath.sh"
#   curator_build OUTDIR SOURCE.java...   javac SOURCE... into OUTDIR (created if needed) and
#                                         write OUTDIR/classpath.txt: OUTDIR, then the jars
#   curator_classpath                     just set curator_cp to the jars, colon-separated
#
# Both return 1 after a message on stderr (prefixed with $0, the sourcing script) if javac or a
# jar is missing, or javac fails; they do not exit, and do not rely on `set -e` inside (which a
# caller's `if` or `||` would switch off). On success curator_build sets curator_out to the
# absolute OUTDIR. Global names used: curator_*.
#
# JAVA_SHARE overrides /usr/share/java; JAVAC overrides javac.

# jar:Debian package. Compile-time needs the first six; the rest is the runtime closure of the
# client side (taken from the jars' manifest Class-Path entries, minus server-only jars such as
# jetty, netty, metrics, snappy, jline), plus an slf4j binding so that Curator's errors reach
# stderr instead of slf4j's "no binder" warning.
curator_jars="
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

# Sets curator_cp to the jars of $curator_jars in $JAVA_SHARE (default /usr/share/java).
curator_classpath() {
    curator_share=${JAVA_SHARE:-/usr/share/java}
    curator_cp=""
    curator_missing=0
    for curator_entry in $curator_jars; do
        curator_jar=${curator_entry%%:*}
        curator_pkg=${curator_entry#*:}
        curator_f="$curator_share/$curator_jar.jar"
        if [ ! -r "$curator_f" ]; then
            echo "$0: missing $curator_f: install the Debian package $curator_pkg (apt-get install $curator_pkg)" >&2
            curator_missing=1
            continue
        fi
        curator_cp="${curator_cp:+$curator_cp:}$curator_f"
    done
    [ "$curator_missing" -eq 0 ] || return 1
    return 0
}

# curator_build OUTDIR SOURCE...
curator_build() {
    if [ $# -lt 2 ]; then
        echo "$0: curator_build OUTDIR SOURCE... (internal error)" >&2
        return 1
    fi
    curator_javac=${JAVAC:-javac}
    if ! command -v "$curator_javac" >/dev/null 2>&1; then
        echo "$0: javac not found: install the Debian package openjdk-17-jdk-headless" >&2
        return 1
    fi
    mkdir -p "$1" || return 1
    curator_out=$(cd "$1" && pwd) || return 1
    shift
    curator_classpath || return 1
    "$curator_javac" -nowarn -encoding UTF-8 --release 11 -d "$curator_out" -cp "$curator_cp" "$@" || {
        echo "$0: javac failed" >&2
        return 1
    }
    printf '%s\n' "$curator_out:$curator_cp" > "$curator_out/classpath.txt" || return 1
    return 0
}
