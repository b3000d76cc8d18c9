package io.fsdp4j.config;

/** {@code attention.kernel}: which engine computes attention on a GPU. */
public enum AttentionKernel implements ConfigChoice {
    /**
     * For each attention shape, the faster of the two for its forward and, apart, for its backward where cuDNN is
     * found and runs it (both timed at its first use), else fsdp4j's kernels.
     */
    AUTO,
    /** fsdp4j's own kernels ({@code attention_sm90.cu}, {@code attention_tc.cu}, {@code attention.cu}), every shape. */
    FSDP4J,
    /** cuDNN's fused flash attention, for every shape it runs; a shape it cannot run is an error. */
    CUDNN;

    @Override
    public String toString() {
        return spelling();
    }
}
