#!/usr/bin/env bash
# Packs what the GPU machine needs into .devrt/ (git-ignored; name it in the device run's `carry`):
#   .devrt/fsdp4j.jar     the shaded jar (built here unless --no-build)
#   .devrt/jre.tar.xz     a jlink runtime of the JDK 25 with the modules the jar needs (jdeps), unpacked by
#                         tools/gpu/run.sh on the device. Kept as xz because everything sent to the device must
#                         stay under 64 MiB: the runtime is ~90 MB unpacked (uncompressed modules, stripped
#                         libjvm.so) and ~21 MB packed, against ~64 MB for a zip-compressed jlink image.
#   .devrt/jre.modules    the module list it was made with; the runtime is remade only when that changes.
# Prints the sizes and fails when the tree that travels (tracked and untracked files not ignored, plus .devrt)
# exceeds 64 MiB. Extra modules: FSDP4J_JLINK_EXTRA=jdk.incubator.vector,... (comma-separated).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# shellcheck source=../../bin/lib/java-home.sh
source bin/lib/java-home.sh
fsdp4j_find_java
export PATH=$JAVA_HOME/bin:$PATH

build=1
[[ ${1:-} == --no-build ]] && build=0
if (( build )); then
    mvn -q -B -o -DskipTests package # compiles the tests too: the GPU tests travel as classes
fi
[[ -f target/fsdp4j.jar ]] || { echo "error: target/fsdp4j.jar is missing; build it first" >&2; exit 1; }
mkdir -p .devrt

# modules: what jdeps finds in the jar (optional dependencies of libraries included), jdk.unsupported
# (sun.misc.Unsafe users), jdk.incubator.vector (the host AdamW of fsdp.cpu_offload; run.sh adds it), and any extras
modules=$(jdeps --print-module-deps --ignore-missing-deps --multi-release 25 target/fsdp4j.jar)
modules=$(printf '%s\n' "${modules//,/$'\n'}" jdk.unsupported jdk.incubator.vector ${FSDP4J_JLINK_EXTRA:+${FSDP4J_JLINK_EXTRA//,/ }} | sort -u | paste -sd, -)
if [[ -f .devrt/jre.tar.xz && -f .devrt/jre.modules && $(cat .devrt/jre.modules) == "$modules" ]]; then
    echo "runtime: unchanged ($modules)"
else
    echo "runtime: jlink $modules"
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    # uncompressed modules: xz packs them far better than jlink's per-class zip
    jlink --add-modules "$modules" --strip-debug --no-header-files --no-man-pages --compress=zip-0 \
        --output "$work/jre"
    if command -v strip >/dev/null 2>&1; then
        strip --strip-unneeded "$work/jre/lib/server/libjvm.so"
    fi
    "$work/jre/bin/java" -version 2>&1 | head -1
    echo "runtime: $(du -sh "$work/jre" | cut -f1) unpacked; packing with xz (about a minute)"
    XZ_OPT="-T0 -6" tar -C "$work" -cJf .devrt/jre.tar.xz.tmp jre
    mv .devrt/jre.tar.xz.tmp .devrt/jre.tar.xz
    echo "$modules" > .devrt/jre.modules
    rm -rf .devrt/jre # an unpacked runtime from an older pack would travel too
fi
cp target/fsdp4j.jar .devrt/fsdp4j.jar

# the GPU tests: test classes and their resources (not the tokenizer corpora, which they do not use), JUnit's
# console launcher and AssertJ; tools/gpu/run.sh tests runs those tagged gpu
rm -rf .devrt/test-classes
mkdir -p .devrt/test-classes
(cd target/test-classes && tar cf - --exclude=./tokenizer .) | (cd .devrt/test-classes && tar xf -)
m2=${MAVEN_REPO:-$HOME/.m2/repository}
console=org.junit.platform:junit-platform-console-standalone:1.13.4
[[ -f $m2/org/junit/platform/junit-platform-console-standalone/1.13.4/junit-platform-console-standalone-1.13.4.jar ]] \
    || mvn -q -B dependency:get -Dartifact=$console
cp "$m2/org/junit/platform/junit-platform-console-standalone/1.13.4/junit-platform-console-standalone-1.13.4.jar" \
    .devrt/junit-console.jar
# the PyTorch peer benchmark, run beside ours in the same session (not part of the project: kept out of git)
mkdir -p .devrt/peers
cp "$ROOT"/../shared/peers/*.py .devrt/peers/ 2>/dev/null || echo "note: ../shared/peers not found; no peer benchmark"
cp "$m2/org/assertj/assertj-core/3.27.7/assertj-core-3.27.7.jar" .devrt/assertj.jar

# files that exist (a tracked file moved out of the tree for the call, see below, is not sent and not counted)
tree_bytes=$( { git ls-files -z --cached --others --exclude-standard | xargs -0 -r stat -c %s -- 2>/dev/null || true; } \
    | awk '{s += $1} END {print s + 0}')
devrt_bytes=$(du -sb .devrt | cut -f1)
total=$((tree_bytes + devrt_bytes))
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
echo "jar $(mib "$(stat -c %s .devrt/fsdp4j.jar)"), runtime $(mib "$(stat -c %s .devrt/jre.tar.xz)")," \
    ".devrt $(mib "$devrt_bytes"), tree $(mib "$tree_bytes"), total to send $(mib "$total") (limit 64 MiB)"
if (( total >= 64 * 1048576 )); then
    echo "error: what would be sent to the GPU machine is over 64 MiB; the test resources travel in .devrt/test-classes" \
        "too: move src/test/resources/golden and src/test/resources/tokenizer out of the tree for the call (and back" \
        "after it), then run this again with --no-build" >&2
    exit 1
fi
