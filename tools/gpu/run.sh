#!/usr/bin/env bash
# The one script run on the GPU machine, over a copy of the working tree with .devrt/ carried
# (made here by tools/gpu/pack.sh). Usage: bash tools/gpu/run.sh TASK [ARGS...]
#   smoke [ARGS...]  the native layer's GPU tests (io.fsdp4j.cuda.NativeLayerGpuTest: copies, allocator, NVRTC,
#                  cuBLASLt, NCCL on all GPUs); libraries, versions and rates are `cli doctor`'s
#   cli ARGS...    the fsdp4j command line (io.fsdp4j.cli.Main)
#   main CLASS ARGS...  any main class of the jar
#   tests [ARGS...]  the GPU-tagged JUnit tests (JUnit console launcher; extra ARGS go to it)
#   test-main CLASS ARGS...  a main class of the test classes (a developer tool: io.fsdp4j.gpu.AttentionRates)
# Output goes to stdout and to $OUT (the folder the device tool returns; ./out when unset).
# FSDP4J_JAVA_OPTS: extra JVM options (space-separated), e.g. -Dfsdp4j.cuda.libs=/some/folder or -Xmx64g.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"

# NVLink multicast off for every program (it can take the host's GPUs out of service)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# find the CUDA libraries through fsdp4j's own search path, as on a user's machine
unset FSDP4J_CUDA_LIBS
export OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"

[[ -f .devrt/jre.tar.xz && -f .devrt/fsdp4j.jar ]] || {
    echo "error: .devrt/ is missing: run tools/gpu/pack.sh and carry .devrt" >&2
    exit 1
}
jre_root=${FSDP4J_JRE_DIR:-/tmp/fsdp4j-jre}
# unpacked once; runs started together (fp8_finetune.sh's) take turns on a lock, and the runtime appears whole
mkdir -p "$(dirname "$jre_root")"
exec 9> "$jre_root.lock"
command -v flock >/dev/null && flock 9
# (the stamp, not java itself, dates the unpacking: tar keeps the archive's older times, so comparing against java
# unpacked again on every run, under the feet of a run already started)
if [[ ! -x $jre_root/jre/bin/java || ! -f $jre_root/unpacked || .devrt/jre.tar.xz -nt $jre_root/unpacked ]]; then
    rm -rf "$jre_root" "$jre_root.new"
    mkdir -p "$jre_root.new"
    tar -C "$jre_root.new" -xJf .devrt/jre.tar.xz
    touch "$jre_root.new/unpacked"
    mv "$jre_root.new" "$jre_root"
fi
command -v flock >/dev/null && flock -u 9
exec 9>&-
java=$jre_root/jre/bin/java

task=${1:-smoke}
shift || true
if [[ $task == smoke ]]; then
    task=tests
    set -- --include-classname 'io\.fsdp4j\.cuda\.NativeLayerGpuTest' "$@"
fi
case $task in
    cli) set -- io.fsdp4j.cli.Main "$@" ;;
    main) ;;
    tests)
        # shellcheck disable=SC2086
        exec "$java" -XX:MaxDirectMemorySize=1t --enable-native-access=ALL-UNNAMED --add-modules jdk.incubator.vector ${FSDP4J_JAVA_OPTS:-} \
            -jar .devrt/junit-console.jar execute \
            --class-path .devrt/test-classes:.devrt/fsdp4j.jar:.devrt/assertj.jar \
            --scan-class-path .devrt/test-classes --include-tag gpu --details="${JUNIT_DETAILS:-tree}" \
            --reports-dir "$OUT/junit" "$@" ;;
    test-main)
        # shellcheck disable=SC2086
        exec "$java" -XX:MaxDirectMemorySize=1t --enable-native-access=ALL-UNNAMED --add-modules jdk.incubator.vector ${FSDP4J_JAVA_OPTS:-} \
            -cp .devrt/test-classes:.devrt/fsdp4j.jar "$@" ;;
    *) echo "error: unknown task '$task' (smoke, cli, main, tests, test-main)" >&2; exit 2 ;;
esac
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader || true
fi
# shellcheck disable=SC2086 # options are space-separated on purpose
# jdk.incubator.vector: the vectorised host AdamW of fsdp.cpu_offload (the runtime has it: pack.sh, jdeps)
exec "$java" -XX:MaxDirectMemorySize=1t --enable-native-access=ALL-UNNAMED --add-modules jdk.incubator.vector ${FSDP4J_JAVA_OPTS:-} \
    -cp .devrt/fsdp4j.jar "$@"
