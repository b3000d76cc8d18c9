# shellcheck shell=bash
# Sourced by bin/fsdp4j and bin/test: finds a JDK 25 or newer and sets JAVA_HOME and JAVA to it (exported).
# Order: $JAVA_HOME when it is 25+, else the newest 25+ JDK under /usr/lib/jvm (or macOS's JavaVirtualMachines),
# else the `java` on the PATH when it is 25+. Otherwise one line on stderr and exit 1.

FSDP4J_MIN_JAVA=25

# The feature version (8, 17, 25, ...) of the java binary $1, or nothing if it does not run.
fsdp4j_java_major() {
    local line version
    line=$("$1" -version 2>&1 | grep -m1 -E 'version "[0-9]') || return 1
    version=${line#*version \"}
    version=${version%%\"*}
    case $version in
        1.*) version=${version#1.} ;;
    esac
    version=${version%%[!0-9]*}
    [[ -n $version ]] && echo "$version"
}

fsdp4j_find_java() {
    local candidate major best="" best_major=0
    if [[ -n ${JAVA_HOME:-} && -x $JAVA_HOME/bin/java ]]; then
        major=$(fsdp4j_java_major "$JAVA_HOME/bin/java") || major=0
        if (( major >= FSDP4J_MIN_JAVA )); then
            best=$JAVA_HOME
        fi
    fi
    if [[ -z $best ]]; then
        for candidate in /usr/lib/jvm/*/ /Library/Java/JavaVirtualMachines/*/Contents/Home/; do
            candidate=${candidate%/}
            [[ -x $candidate/bin/java ]] || continue
            major=$(fsdp4j_java_major "$candidate/bin/java") || continue
            if (( major >= FSDP4J_MIN_JAVA && major > best_major )); then
                best=$candidate
                best_major=$major
            fi
        done
    fi
    if [[ -z $best ]] && command -v java >/dev/null 2>&1; then
        candidate=$(readlink -f "$(command -v java)" 2>/dev/null) || candidate=""
        if [[ -n $candidate ]]; then
            major=$(fsdp4j_java_major "$candidate") || major=0
            if (( major >= FSDP4J_MIN_JAVA )); then
                best=${candidate%/bin/java}
            fi
        fi
    fi
    if [[ -z $best ]]; then
        echo "error: fsdp4j needs JDK $FSDP4J_MIN_JAVA or newer; install one (e.g. Temurin $FSDP4J_MIN_JAVA) or set JAVA_HOME to it" >&2
        exit 1
    fi
    export JAVA_HOME=$best
    export JAVA=$best/bin/java
}
