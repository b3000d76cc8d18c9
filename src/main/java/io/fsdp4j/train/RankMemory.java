package io.fsdp4j.train;

/**
 * Bytes one rank holds for the whole job: its shards of parameters, gradients and optimizer state, all on its
 * device, or all in host memory when offloaded ({@code fsdp.cpu_offload}). On CPU ranks the device is host memory
 * too; the split says where the engine keeps the state, as on a GPU.
 */
public record RankMemory(int rank, long paramBytes, long gradBytes, long optimizerBytes, boolean offloaded) {
    public long total() {
        return paramBytes + gradBytes + optimizerBytes;
    }

    /** Bytes of this state on the device (0 when offloaded). */
    public long deviceBytes() {
        return offloaded ? 0 : total();
    }

    /** Bytes of this state in host memory (all of it when offloaded). */
    public long hostBytes() {
        return offloaded ? total() : 0;
    }
}
