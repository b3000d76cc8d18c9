package io.fsdp4j.config;

/** {@code matmul.algorithm}: how a GPU's matrix products choose among cuBLASLt's algorithms. */
public enum MatmulAlgorithm implements ConfigChoice {
    /**
     * For each product shape, cuBLASLt's candidates (up to eight, from its heuristic) timed at the shape's first use
     * on its own operands, the fastest kept for the whole process; the heuristic's first where none is clearly faster.
     */
    TIMED,
    /** cuBLASLt's heuristic's first choice, every shape: no timing, the same algorithm in every run (the default). */
    HEURISTIC;

    @Override
    public String toString() {
        return spelling();
    }
}
