package io.fsdp4j.model;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.Golden;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Packed documents behave as if run alone: the same per-token losses and the same gradients as the documents in
 * separate sequences, so no token attends across a document boundary and positions restart at each document.
 */
class PackingTest {
    private final CpuBackend cpu = CpuBackend.INSTANCE;

    @Test
    void packedDocumentsEqualSeparateSequences() {
        for (String name : List.of("qwen2", "mistral")) {
            SingleDeviceModel m = Golden.load(name);
            int[] a = {5, 17, 33, 2, 90, 11, 4}, b = {8, 150, 61, 7, 7, 42, 3, 19, 100};
            // separately, each padded to 9 with ignored labels
            int[][] sepIds = {Arrays.copyOf(a, 9), b};
            int[][] sepLabels = {labels(a, 9), b.clone()};
            TokenBatch separate = TokenBatch.of(cpu, sepIds, sepLabels);
            Tensor sepLoss = cpu.allocate(DType.F32, separate.rows());
            List<Tensor> sepGrads = m.newGradients();
            double sepSum = m.lossAndGradients(separate, 1f, sepGrads);
            m.loss(separate, sepLoss);
            // packed: a then b in one sequence of 16
            int[] ids = new int[16], lab = new int[16], starts = new int[16];
            System.arraycopy(a, 0, ids, 0, a.length);
            System.arraycopy(b, 0, ids, a.length, b.length);
            System.arraycopy(a, 0, lab, 0, a.length);
            System.arraycopy(b, 0, lab, a.length, b.length);
            Arrays.fill(starts, a.length, 16, a.length);
            TokenBatch packed = TokenBatch.of(cpu, new int[][] {ids}, new int[][] {lab}, new int[][] {starts});
            Tensor packedLoss = cpu.allocate(DType.F32, packed.rows());
            List<Tensor> packedGrads = m.newGradients();
            double packedSum = m.lossAndGradients(packed, 1f, packedGrads);
            m.loss(packed, packedLoss);
            assertThat(TokenBatch.countTargets(new int[][] {lab}, new int[][] {starts}))
                    .isEqualTo(TokenBatch.countTargets(sepLabels)).isEqualTo(a.length - 1 + b.length - 1);
            float[] sl = cpu.toFloats(sepLoss), pl = cpu.toFloats(packedLoss);
            for (int p = 0; p < a.length; p++) {
                assertThat(pl[p]).as("%s doc a pos %d", name, p).isCloseTo(sl[p], org.assertj.core.data.Offset.offset(2e-5f));
            }
            for (int p = 0; p < b.length; p++) {
                assertThat(pl[a.length + p]).as("%s doc b pos %d", name, p)
                        .isCloseTo(sl[9 + p], org.assertj.core.data.Offset.offset(2e-5f));
            }
            assertThat(packedSum).isCloseTo(sepSum, org.assertj.core.data.Percentage.withPercentage(1e-4));
            for (int u = 0; u < sepGrads.size(); u++) {
                assertThat(Golden.relativeError(cpu.toFloats(packedGrads.get(u)), cpu.toFloats(sepGrads.get(u))))
                        .as("%s unit %d gradient", name, u).isLessThan(1e-5);
            }
        }
    }

    private static int[] labels(int[] ids, int length) {
        int[] l = Arrays.copyOf(ids, length);
        Arrays.fill(l, ids.length, length, TokenBatch.IGNORE);
        return l;
    }
}
