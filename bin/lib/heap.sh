# shellcheck shell=bash
# Sourced by bin/fsdp4j: the JVM heap's size. The JVM's default is a quarter of the machine's memory, but CPU ranks
# keep the whole model's fp32 weights, gradients and AdamW moments on the heap (16 bytes a parameter: 8 GB for a
# 0.5B model), so the heap is sized from the machine's memory (the container's limit where there is one): 75% of
# it, the rest for native memory (offloaded shards, GPU staging, the JIT). FSDP4J_JAVA_OPTS that names a heap size
# (-Xmx, -XX:MaxHeapSize, -XX:MaxRAMPercentage, -XX:MaxRAM) decides instead.

FSDP4J_HEAP_PERCENT=75

# Prints the heap options for the JVM, one a line (none when FSDP4J_JAVA_OPTS sizes the heap itself).
fsdp4j_heap_options() {
    if [[ ${FSDP4J_JAVA_OPTS:-} =~ (-Xmx|MaxHeapSize|MaxRAMPercentage|MaxRAM=) ]]; then
        return 0
    fi
    echo "-XX:MaxRAMPercentage=$FSDP4J_HEAP_PERCENT"
}
