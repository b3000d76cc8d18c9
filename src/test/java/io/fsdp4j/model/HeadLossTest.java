package io.fsdp4j.model;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The head in chunks of labelled rows against one pass over every row (the plain product, cross-entropy and backward
 * the head ran before): the same loss, per-row losses, input gradient and weight gradient, for chunks of one row to all
 * rows, with and without the rows' labels known on the host.
 */
class HeadLossTest {
    private static final CpuBackend CPU = CpuBackend.INSTANCE;
    private static final int N = 41, C = 12, V = 53;

    private record Result(double loss, float[] lossPerRow, float[] dNormed, float[] dLmHead) {}

    /** Targets with unlabelled stretches at the start, inside and at the end, as a chat's prompts leave them. */
    private static int[] targets(SplittableRandom random) {
        int[] t = new int[N];
        for (int i = 0; i < N; i++) {
            boolean labelled = (i >= 3 && i < 11) || (i >= 15 && i < 16) || (i >= 20 && i < 38);
            t[i] = labelled ? random.nextInt(V) : TokenBatch.IGNORE;
        }
        return t;
    }

    private static float[] values(SplittableRandom random, int n) {
        float[] v = new float[n];
        for (int i = 0; i < n; i++) {
            v[i] = (float) random.nextGaussian();
        }
        return v;
    }

    private static Result plain(float[] normed, float[] lmHead, int[] targets, float gradScale) {
        Tensor x = CPU.upload(normed, N, C), w = CPU.upload(lmHead, V, C);
        Tensor logits = CPU.allocate(DType.F32, N, V), loss = CPU.allocate(DType.F32, N);
        CPU.linearForward(logits, x, w, null);
        double sum = CPU.crossEntropy(logits, CPU.uploadInts(targets, N), gradScale, loss);
        Tensor dx = CPU.allocate(DType.F32, N, C), dw = CPU.allocate(DType.F32, V, C);
        CPU.linearBackward(dx, dw, null, logits, x, w);
        return new Result(sum, CPU.toFloats(loss), CPU.toFloats(dx), CPU.toFloats(dw));
    }

    private static Result chunked(float[] normed, float[] lmHead, int[] targets, float gradScale, long maxLogits,
                                  boolean runsKnown) {
        Tensor x = CPU.upload(normed, N, C), w = CPU.upload(lmHead, V, C);
        Tensor loss = CPU.allocateForWrite(DType.F32, N);
        Tensor dx = CPU.allocateForWrite(DType.F32, N, C), dw = CPU.allocate(DType.F32, V, C);
        double sum = new HeadLoss(CPU, maxLogits).run(x, w, CPU.uploadInts(targets, N),
                runsKnown ? HeadLoss.labelledRuns(targets) : null, gradScale, dw, dx, loss);
        return new Result(sum, CPU.toFloats(loss), CPU.toFloats(dx), CPU.toFloats(dw));
    }

    @ParameterizedTest(name = "chunks of {0} rows, runs known: {1}")
    @CsvSource({"1,true", "2,true", "5,true", "7,false", "13,true", "100,true", "100,false"})
    void chunksOfLabelledRowsGiveThePlainHeadsNumbers(int chunkRows, boolean runsKnown) {
        var random = new SplittableRandom(chunkRows * 31L + (runsKnown ? 1 : 0));
        float[] normed = values(random, N * C), lmHead = values(random, V * C);
        int[] targets = targets(random);
        float gradScale = 1f / 27;
        Result expected = plain(normed, lmHead, targets, gradScale);
        Result actual = chunked(normed, lmHead, targets, gradScale, (long) chunkRows * V, runsKnown);
        assertThat(actual.loss()).isCloseTo(expected.loss(), within(1e-9 * Math.abs(expected.loss())));
        assertThat(actual.lossPerRow()).containsExactly(expected.lossPerRow(), within(1e-6f));
        assertThat(actual.dNormed()).containsExactly(expected.dNormed(), within(1e-6f));
        assertThat(actual.dLmHead()).containsExactly(expected.dLmHead(), within(1e-6f));
        for (int row = 0; row < N; row++) {
            if (targets[row] == TokenBatch.IGNORE) {
                assertThat(actual.lossPerRow()[row]).as("row %d has no label", row).isZero();
            }
        }
    }

    @Test
    void withoutABackwardOnlyTheLossIsComputed() {
        var random = new SplittableRandom(5);
        float[] normed = values(random, N * C), lmHead = values(random, V * C);
        int[] targets = targets(random);
        Tensor x = CPU.upload(normed, N, C), w = CPU.upload(lmHead, V, C);
        double sum = new HeadLoss(CPU, 3L * V).run(x, w, CPU.uploadInts(targets, N), HeadLoss.labelledRuns(targets), 0f,
                null, null, null);
        assertThat(sum).isCloseTo(plain(normed, lmHead, targets, 0f).loss(), within(1e-9 * sum));
    }

    @Test
    void labelledRunsAreTheStretchesOfRowsWithATarget() {
        int[] t = {-100, 4, 5, -100, -100, 7, -100, 1, 2, 3};
        assertThat(HeadLoss.labelledRuns(t)).containsExactly(1, 3, 5, 6, 7, 10);
        assertThat(HeadLoss.labelledRuns(new int[] {-100, -100})).isEmpty();
        assertThat(HeadLoss.chunks(HeadLoss.runs(new int[] {1, 3, 5, 6, 7, 10}, 10), 2)).containsExactly(
                List.of(new HeadLoss.Run(1, 2)), List.of(new HeadLoss.Run(5, 1), new HeadLoss.Run(7, 1)),
                List.of(new HeadLoss.Run(8, 2)));
    }

    /**
     * A soft-capped head (Gemma 2's final_logit_softcapping) in chunks against the formulas in double: logits
     * cap * tanh(x W^T / cap), their cross-entropy, and the gradient (softmax - one-hot) * (1 - tanh^2) taken back
     * through the product. The cap is of the order of the products, so that it bends them.
     */
    @ParameterizedTest(name = "chunks of {0} rows")
    @CsvSource({"3", "100"})
    void softCappedLogitsAndTheirGradient(int chunkRows) {
        var random = new SplittableRandom(77 + chunkRows);
        float[] normed = values(random, N * C), lmHead = values(random, V * C);
        int[] targets = targets(random);
        float cap = 2.5f, gradScale = 1f / 27;
        Tensor x = CPU.upload(normed, N, C), w = CPU.upload(lmHead, V, C);
        Tensor loss = CPU.allocateForWrite(DType.F32, N);
        Tensor dx = CPU.allocateForWrite(DType.F32, N, C), dw = CPU.allocate(DType.F32, V, C);
        double sum = new HeadLoss(CPU, (long) chunkRows * V, cap).run(x, w, CPU.uploadInts(targets, N),
                HeadLoss.labelledRuns(targets), gradScale, dw, dx, loss);

        double expectedSum = 0;
        double[] expectedDx = new double[N * C], expectedDw = new double[V * C];
        float[] perRow = CPU.toFloats(loss);
        for (int i = 0; i < N; i++) {
            if (targets[i] == TokenBatch.IGNORE) {
                continue;
            }
            double[] z = new double[V], tanh = new double[V];
            double max = Double.NEGATIVE_INFINITY;
            for (int v = 0; v < V; v++) {
                double dot = 0;
                for (int c = 0; c < C; c++) {
                    dot += (double) normed[i * C + c] * lmHead[v * C + c];
                }
                tanh[v] = Math.tanh(dot / cap);
                z[v] = cap * tanh[v];
                max = Math.max(max, z[v]);
            }
            double norm = 0;
            for (int v = 0; v < V; v++) {
                norm += Math.exp(z[v] - max);
            }
            double rowLoss = max + Math.log(norm) - z[targets[i]];
            expectedSum += rowLoss;
            assertThat((double) perRow[i]).as("loss of row %d", i).isCloseTo(rowLoss, within(1e-5));
            for (int v = 0; v < V; v++) {
                double dz = (Math.exp(z[v] - max) / norm - (v == targets[i] ? 1 : 0)) * gradScale
                        * (1 - tanh[v] * tanh[v]);
                for (int c = 0; c < C; c++) {
                    expectedDx[i * C + c] += dz * lmHead[v * C + c];
                    expectedDw[v * C + c] += dz * normed[i * C + c];
                }
            }
        }
        assertThat(sum).isCloseTo(expectedSum, within(1e-4));
        float[] gotDx = CPU.toFloats(dx), gotDw = CPU.toFloats(dw);
        for (int i = 0; i < N * C; i++) {
            assertThat((double) gotDx[i]).as("dx[%d]", i).isCloseTo(expectedDx[i], within(1e-6));
        }
        for (int i = 0; i < V * C; i++) {
            assertThat((double) gotDw[i]).as("dW[%d]", i).isCloseTo(expectedDw[i], within(1e-6));
        }
    }
}
