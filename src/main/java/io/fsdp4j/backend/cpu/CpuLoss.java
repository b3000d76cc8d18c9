package io.fsdp4j.backend.cpu;

/**
 * Cross-entropy of logits against target ids, one row per parallel item: the loss of each row in double, and (with a
 * gradient scale) the gradient written over the logits in place, one exp per logit.
 */
public final class CpuLoss {
    private static final boolean VECTORISED = ModuleLayer.boot().findModule("jdk.incubator.vector").isPresent();

    private CpuLoss() {}

    /**
     * The largest of z[from, to) by {@link Math#max} (NaN if any is NaN, +0 above -0), -infinity for none: a value
     * that the order of comparisons cannot change, so the vector form gives the same bits as the scalar loop. As one
     * scalar chain it was an eighth of the cross-entropy's time at a vocabulary of 32000 (issue 28).
     */
    static float max(float[] z, int from, int to) {
        if (VECTORISED) {
            return VectorFloats.max(z, from, to);
        }
        float max = Float.NEGATIVE_INFINITY;
        for (int j = from; j < to; j++) {
            max = Math.max(max, z[j]);
        }
        return max;
    }

    /**
     * Sum over rows of -log softmax(z)[target] for z (rows, vocab) at z[zo..]; rows whose target is -100 count nothing
     * (their gradient is zero). With {@code gradScale} != 0, z becomes gradScale * (softmax(z) - onehot(target)).
     * Each row's loss goes to {@code rowLoss} (rows values), the sum over rows in row order is returned.
     */
    public static double crossEntropy(float[] z, int zo, int[] tg, int to, int rows, int vocab, float gradScale,
                                      double[] rowLoss) {
        Parallel.forEach(rows, 4L * vocab, r -> {
            int target = tg[to + r];
            int base = zo + r * vocab;
            if (target == -100) {
                if (gradScale != 0f) {
                    java.util.Arrays.fill(z, base, base + vocab, 0f);
                }
                return;
            }
            if (target < 0 || target >= vocab) {
                throw new io.fsdp4j.UserError("label " + target + " is outside the vocabulary of " + vocab
                        + " tokens (use -100 for positions without loss)");
            }
            float max = max(z, base, base + vocab);
            float targetLogit = z[base + target];
            double sum = 0;
            for (int j = 0; j < vocab; j++) { // one exp per logit: kept in place for the gradient
                double e = Math.exp(z[base + j] - max);
                sum += e;
                if (gradScale != 0f) {
                    z[base + j] = (float) e;
                }
            }
            double logSum = max + Math.log(sum);
            rowLoss[r] = logSum - targetLogit;
            if (gradScale != 0f) {
                double factor = gradScale / sum; // softmax times the scale
                for (int j = 0; j < vocab; j++) {
                    z[base + j] = (float) (z[base + j] * factor);
                }
                z[base + target] -= gradScale;
            }
        });
        double total = 0;
        for (int r = 0; r < rows; r++) {
            total += rowLoss[r];
        }
        return total;
    }

    /**
     * The index of each row's largest value of z (rows, vocab) at z[zo..], the lowest on ties; NaN is never the largest
     * (a row of NaN only gives 0).
     */
    public static int[] argmaxRows(float[] z, int zo, int rows, int vocab) {
        int[] result = new int[rows];
        for (int r = 0; r < rows; r++) {
            int base = zo + r * vocab, best = -1;
            for (int v = 0; v < vocab; v++) {
                float x = z[base + v];
                if (x == x && (best < 0 || x > z[base + best])) {
                    best = v;
                }
            }
            result[r] = Math.max(best, 0);
        }
        return result;
    }
}
