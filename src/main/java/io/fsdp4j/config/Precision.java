package io.fsdp4j.config;

/** {@code fsdp.param_dtype}, {@code fsdp.reduce_dtype}: the float type of gathered parameters or of reductions. */
public enum Precision implements ConfigChoice {
    BF16,
    FP32;

    @Override
    public String toString() {
        return spelling();
    }
}
