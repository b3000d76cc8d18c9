package io.fsdp4j.config;

/**
 * {@code fsdp.fp8_recipe}: how the fp8 products ({@code fsdp.param_dtype: fp8}) scale their operands, torchao's two
 * dynamic recipes by their names there.
 */
public enum Fp8Recipe implements ConfigChoice {
    /** One scale per operand, from its largest magnitude (the default). */
    TENSORWISE,
    /**
     * One scale per row of each operand along the product's kept dimension (a token's, an output feature's, an input
     * feature's), from that row's largest magnitude: a row of large values no longer shrinks every other row's.
     */
    ROWWISE;

    @Override
    public String toString() {
        return spelling();
    }
}
