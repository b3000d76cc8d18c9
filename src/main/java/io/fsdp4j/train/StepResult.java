package io.fsdp4j.train;

/**
 * What one optimizer step did, identical on every rank.
 *
 * @param loss token-weighted mean loss over every unmasked position of the global batch
 * @param gradNorm global gradient norm before clipping
 * @param lr learning rate used by the update
 * @param tokens input tokens in the global batch
 * @param lossTokens positions that carried a loss
 * @param skipped the loss or the gradient norm was not finite (on some rank, so on all: both are reduced over the
 *                job), and no rank updated its shards
 */
public record StepResult(int step, double loss, double gradNorm, double lr, long tokens, long lossTokens,
                         boolean skipped) {
}
