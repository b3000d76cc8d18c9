package io.fsdp4j.train;

/**
 * What one optimizer step did, identical on every rank.
 *
 * @param loss token-weighted mean loss over every unmasked position of the global batch
 * @param gradNorm global gradient norm before clipping (the loss scale divided out)
 * @param lr learning rate used by the update
 * @param tokens input tokens in the global batch
 * @param lossTokens positions that carried a loss
 * @param skipped the loss or the gradient norm was not finite (on some rank, so on all: both are reduced over the
 *                job), and no rank updated its shards
 * @param lossScale what the loss was multiplied by before backward ({@code fsdp.loss_scale}; 1 without scaling)
 * @param overflowed skipped with a finite loss under a dynamic loss scale of at least 1: the gradients overflowed,
 *                   the scale was halved for the next step, and the skip does not count toward
 *                   {@code train.max_bad_steps} (below 1 the scale is no longer what overflows, and it does)
 */
public record StepResult(int step, double loss, double gradNorm, double lr, long tokens, long lossTokens,
                         boolean skipped, double lossScale, boolean overflowed) {
    /** A step without loss scaling. */
    public StepResult(int step, double loss, double gradNorm, double lr, long tokens, long lossTokens,
                      boolean skipped) {
        this(step, loss, gradNorm, lr, tokens, lossTokens, skipped, 1, false);
    }

    /** Whether the step counts toward {@code train.max_bad_steps}: skipped, and not for an overflow. */
    public boolean bad() {
        return skipped && !overflowed;
    }
}
