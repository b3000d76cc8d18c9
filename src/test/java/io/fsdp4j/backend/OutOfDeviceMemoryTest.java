package io.fsdp4j.backend;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** A device out of memory reads as one line naming the allocation, its purpose, and what to change. */
class OutOfDeviceMemoryTest {

    @Test
    void oneLineNamingTheAllocationAndTheRemedies() {
        var e = new OutOfDeviceMemory("a F32[233042432] tensor of 888.9 MiB on cuda:0",
                "cudaMalloc: out of memory (cudaErrorMemoryAllocation = 2); this allocator holds 75000.0 MiB in use")
                .naming("the fp32 master and gradient shards of unit block.17");
        assertThat(e).isInstanceOf(io.fsdp4j.UserError.class);
        assertThat(e.getMessage().lines()).hasSize(1);
        assertThat(e.getMessage()).startsWith("out of GPU memory allocating the fp32 master and gradient shards of unit "
                + "block.17, a F32[233042432] tensor of 888.9 MiB on cuda:0 (cudaMalloc: out of memory")
                .contains("fsdp.cpu_offload=true", "more GPUs", "fsdp.activation_checkpointing=full");
    }
}
