package io.fsdp4j.config;

/** {@code dist.device}: where the ranks compute. */
public enum DeviceKind implements ConfigChoice {
    /** CUDA when a GPU can be used, otherwise the CPU. */
    AUTO,
    /** CPU ranks (threads of this process). */
    CPU,
    /** One GPU per rank. */
    CUDA;

    @Override
    public String toString() {
        return spelling();
    }
}
