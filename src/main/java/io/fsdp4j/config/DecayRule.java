package io.fsdp4j.config;

/** {@code optim.decay}: which parameters get AdamW's weight decay. */
public enum DecayRule implements ConfigChoice {
    /** Matrices only (2-D and larger weights, embeddings included); not biases or norm weights. */
    MATRICES,
    /** Every parameter. */
    ALL;

    @Override
    public String toString() {
        return spelling();
    }
}
