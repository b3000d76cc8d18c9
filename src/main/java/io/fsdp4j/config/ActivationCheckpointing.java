package io.fsdp4j.config;

/** {@code fsdp.activation_checkpointing}: which activations are recomputed in backward instead of kept. */
public enum ActivationCheckpointing implements ConfigChoice {
    /** Keep every activation that backward needs. */
    NONE,
    /** Keep only each block's input; recompute the block's forward in its backward. */
    FULL,
    /** Keep the costly activations (matrix products, attention), recompute the cheap ones (norms, activations). */
    SELECTIVE;

    @Override
    public String toString() {
        return spelling();
    }
}
