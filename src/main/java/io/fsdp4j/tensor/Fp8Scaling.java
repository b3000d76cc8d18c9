package io.fsdp4j.tensor;

/**
 * How an fp8 product scales its two operands before each is rounded to {@link Fp8} (torchao's dynamic recipes): the
 * scale of a group of elements is {@link Fp8#scale} of the group's largest magnitude, and the product is multiplied
 * back by the inverses of the scales that met in each of its elements.
 */
public enum Fp8Scaling {
    /** One scale for the whole operand ("tensorwise"). */
    TENSOR,
    /**
     * One scale per row of the operand along the dimension the product keeps ("rowwise"): for out = x W^T each token of
     * x and each output feature of W; for dx = dOut W each token of dOut and each input feature of W (a column of W);
     * for dW = dOut^T x each output feature of dOut and each input feature of x (columns of both, over the tokens).
     */
    ROW
}
