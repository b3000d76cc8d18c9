package io.fsdp4j.plan;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import io.fsdp4j.model.ModelConfig;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

class AttentionRatesTest {
    private static final AttentionRates MMA = AttentionRates.mmaSync();
    private static final AttentionRates ENGINES = AttentionRates.engines();

    /** At the table's own points the rates are its measurements (forward, backward TFLOP/s of the sweep's lines). */
    @Test
    void atAMeasuredShapeTheRatesAreTheMeasuredOnes() {
        assertThat(MMA.alone(128, 28, 2048)).containsExactly(211.4e12, 114.1e12);
        assertThat(MMA.alone(128, 12, 2048)).containsExactly(118.3e12, 96.5e12);
        assertThat(MMA.alone(64, 14, 4096)).containsExactly(204.0e12, 98.7e12);
        // the engines' sweep: Qwen2.5-7B's heads at 2048 and 16384 tokens, fsdp4j's forward and backward; 64 heads at
        // 16384 tokens, cuDNN's
        assertThat(ENGINES.alone(128, 28, 2048)).containsExactly(449.8e12, 332.2e12);
        assertThat(ENGINES.alone(128, 28, 16384)).containsExactly(628.0e12, 531.9e12);
        assertThat(ENGINES.alone(128, 64, 16384)).containsExactly(627.0e12, 528.9e12);
    }

    /**
     * The engines' table holds, for each direction, the faster engine's rate, as {@code attention.kernel: auto} picks:
     * every line's rates are its picked engine's times turned into TFLOP/s (forward 4 NH HS T (T+1)/2), the picked
     * engine is the one with the smaller time; fsdp4j's backward is the faster at most shapes (77 of the 120 in the
     * sweep of 2026-11-27 05:07, Qwen2.5-7B's heads at 1024 to 16384 tokens among them), cuDNN's at the others.
     */
    @Test
    void theEnginesTableHoldsTheFasterEngineOfEachDirection() throws IOException {
        List<String> lines = resource("/plan/attention-hopper-auto.txt").lines().filter(l -> l.startsWith("sweep "))
                .toList();
        List<String> header = List.of(lines.getFirst().split(" "));
        assertThat(header).containsSubsequence("fsdp4j_forward_ms", "cudnn_forward_ms", "forward_engine",
                "forward_tflops", "backward_tflops");
        assertThat(lines).hasSize(1 + 2 * 10 * 6);
        int fsdp4jBackwards = 0;
        for (String line : lines.subList(1, lines.size())) {
            String[] f = line.split(" ");
            int hs = Integer.parseInt(f[1]), nh = Integer.parseInt(f[2]), t = Integer.parseInt(f[4]);
            double flops = 4.0 * nh * hs * t * (t + 1.0) / 2;
            double[] ms = {Double.parseDouble(f[5]), Double.parseDouble(f[6]), Double.parseDouble(f[7]),
                    Double.parseDouble(f[8])};
            // the picked engine's time is the smaller (equal where they differ below the printed 0.1 us)
            assertThat(f[9]).as(line).isIn("fsdp4j", "cudnn");
            assertThat(f[10]).as(line).isIn("fsdp4j", "cudnn");
            if (f[10].equals("fsdp4j")) fsdp4jBackwards++;
            double forwardMs = f[9].equals("cudnn") ? ms[2] : ms[0], backwardMs = f[10].equals("cudnn") ? ms[3] : ms[1];
            assertThat(forwardMs).as(line).isLessThanOrEqualTo(Math.min(ms[0], ms[2]));
            assertThat(backwardMs).as(line).isLessThanOrEqualTo(Math.min(ms[1], ms[3]));
            // the times are printed to 0.1 us, the rates from the unrounded times: within that rounding
            double forwardTflops = flops / forwardMs / 1e9, backwardTflops = 2.5 * flops / backwardMs / 1e9;
            assertThat(Double.parseDouble(f[11])).as(line).isCloseTo(forwardTflops,
                    within(0.06 + forwardTflops * 0.00006 / forwardMs));
            assertThat(Double.parseDouble(f[12])).as(line).isCloseTo(backwardTflops,
                    within(0.06 + backwardTflops * 0.00006 / backwardMs));
            assertThat(ENGINES.alone(hs, nh, t)).containsExactly(Double.parseDouble(f[11]) * 1e12,
                    Double.parseDouble(f[12]) * 1e12);
        }
        assertThat(fsdp4jBackwards).isEqualTo(77);
        assertThat(lines).contains("sweep 128 28 4 1024 0.0253 0.0831 0.0287 0.1036 fsdp4j fsdp4j 297.0 226.3");
        assertThat(ENGINES.longestMeasured()).isEqualTo(16384);
        assertThat(MMA.longestMeasured()).isEqualTo(8192);
    }

    /** Between points: in log(heads) and log(sequence), so 2896 tokens (2048 * sqrt 2) is the two rates' midpoint. */
    @Test
    void betweenPointsTheRatesAreInterpolatedInLogScale() {
        double[] mid = MMA.alone(128, 28, Math.round(2048 * Math.sqrt(2)));
        assertThat(mid[0]).isCloseTo((211.4e12 + 238.5e12) / 2, within(0.01e12));
        double[] heads13 = MMA.alone(128, 13, 2048); // between 12 (118.3) and 14 (129.8)
        assertThat(heads13[0]).isBetween(118.3e12, 129.8e12);
        double[] hs96 = MMA.alone(96, 28, 2048); // halfway between head sizes 64 (191.6) and 128 (211.4)
        assertThat(hs96[0]).isCloseTo((191.6e12 + 211.4e12) / 2, within(0.01e12));
        double[] at11585 = ENGINES.alone(128, 28, Math.round(8192 * Math.sqrt(2))); // 629.2 and 628.0 forward
        assertThat(at11585[0]).isCloseTo((629.2e12 + 628.0e12) / 2, within(0.05e12));
    }

    /** Outside the table the nearest edge holds: no extrapolation. */
    @Test
    void outsideTheTableTheEdgeHolds() {
        assertThat(MMA.alone(128, 28, 32768)).containsExactly(MMA.alone(128, 28, 8192));
        assertThat(MMA.alone(128, 28, 128)).containsExactly(MMA.alone(128, 28, 512));
        assertThat(MMA.alone(128, 200, 2048)).containsExactly(MMA.alone(128, 64, 2048));
        assertThat(MMA.alone(256, 28, 2048)).containsExactly(MMA.alone(128, 28, 2048));
        assertThat(MMA.alone(32, 28, 2048)).containsExactly(MMA.alone(64, 28, 2048));
        assertThat(ENGINES.alone(128, 28, 32768)).containsExactly(ENGINES.alone(128, 28, 16384));
    }

    /**
     * Fewer heads and shorter sequences run slower; a batch of B sequences fills the GPU as B times the heads do; in
     * a step the rates are the table's times the in-step factors (0.5B's profile: a little below 1).
     */
    @Test
    void theRatesInAStepFollowHeadsBatchAndSequence() {
        var qwen7b = MMA.inStep(128, 28, 1, 2048);
        var qwen15b = MMA.inStep(128, 12, 1, 2048);
        assertThat(qwen15b.forward()).isLessThan(0.6 * qwen7b.forward());
        assertThat(MMA.inStep(128, 28, 1, 512).forward()).isLessThan(0.35 * qwen7b.forward());
        assertThat(MMA.inStep(128, 12, 2, 2048).forward()).isCloseTo(
                MMA.alone(128, 24, 2048)[0] * AttentionRates.IN_STEP_FORWARD, within(1e6));
        assertThat(AttentionRates.IN_STEP_FORWARD).isBetween(0.9, 1.0);
        assertThat(AttentionRates.IN_STEP_BACKWARD).isBetween(0.9, 1.0);
        assertThat(qwen7b.forward()).isCloseTo(211.4e12 * AttentionRates.IN_STEP_FORWARD, within(1e6));
        assertThat(ENGINES.inStep(128, 28, 1, 512).forward()).isLessThan(0.35 * ENGINES.inStep(128, 28, 1, 2048)
                .forward());
    }

    /**
     * The plan times attention at the engines training runs now (the faster of fsdp4j's Hopper kernels and cuDNN's in
     * each direction: at 7B's shapes fsdp4j's forward and backward from 512 to 16384 tokens), not at the mma.sync
     * kernels the calibration's reference steps ran: about twice as fast a forward and 2.9 times as fast a backward at
     * 7B's 2048 tokens, 3.9 times the backward at 8192.
     */
    @Test
    void predictionsTimeAttentionAtTheEnginesTrainingRunsNow() {
        var cal = Planner.Options.defaults().calibration();
        assertThat(cal.attention()).isSameAs(AttentionRates.engines());
        ModelShape qwen7b = ModelShape.of(ModelConfig.qwen25_7b());
        var at2048 = ComputeModel.attentionRates(qwen7b, Workload.benchmark(), cal.attention());
        assertThat(at2048.forward()).isCloseTo(449.8e12 * AttentionRates.IN_STEP_FORWARD, within(1e6));
        assertThat(at2048.backward()).isCloseTo(332.2e12 * AttentionRates.IN_STEP_BACKWARD, within(1e6));
        var old = ComputeModel.attentionRates(qwen7b, Workload.benchmark(), AttentionRates.mmaSync());
        assertThat(at2048.forward() / old.forward()).isBetween(2.0, 2.2);
        assertThat(at2048.backward() / old.backward()).isBetween(2.8, 3.0);
        var at8192 = ComputeModel.attentionRates(qwen7b, Workload.benchmark().withSeq(8192), cal.attention());
        var old8192 = ComputeModel.attentionRates(qwen7b, Workload.benchmark().withSeq(8192), AttentionRates.mmaSync());
        assertThat(at8192.backward() / old8192.backward()).isBetween(3.8, 4.0);
        assertThat(cal.attention().engineNames()).contains("auto").contains("cuDNN");
    }

    /**
     * Packed documents run on fsdp4j's kernels (cuDNN takes none): the engines' table's fsdp4j columns turned into
     * rates as the sweep counts them; where fsdp4j was picked they are the picked rates, where cuDNN was, fsdp4j's
     * own. The mma.sync table has no such columns: its own rates.
     */
    @Test
    void packedDocumentsReadFsdp4jsColumns() {
        AttentionRates packed = ENGINES.forPackedDocuments();
        assertThat(packed.engineNames()).startsWith("fsdp4j's kernels");
        double flops2048 = 4.0 * 28 * 128 * 2048 * 2049 / 2;
        // sweep 128 28 4 2048 0.0669 0.2264 0.0718 0.2485 fsdp4j fsdp4j 449.8 332.2
        assertThat(packed.alone(128, 28, 2048)[0]).isCloseTo(flops2048 / 0.0669e-3, within(1e6));
        assertThat(packed.alone(128, 28, 2048)[1] / ENGINES.alone(128, 28, 2048)[1]).isCloseTo(1, within(0.001));
        // sweep 128 64 4 16384 7.2706 21.4974 7.0152 20.7907 cudnn cudnn 627.0 528.9: fsdp4j's own, not cuDNN's
        double flops64 = 4.0 * 64 * 128 * 16384 * 16385.0 / 2;
        assertThat(packed.alone(128, 64, 16384)[0]).isCloseTo(flops64 / 7.2706e-3, within(1e6));
        assertThat(packed.alone(128, 64, 16384)[1]).isCloseTo(2.5 * flops64 / 21.4974e-3, within(1e6));
        assertThat(packed.alone(128, 64, 16384)[1]).isLessThan(ENGINES.alone(128, 64, 16384)[1] * 0.98);
        assertThat(MMA.forPackedDocuments()).isSameAs(MMA);
        // the step's rates: 16384 tokens of documents of 4096 are four sequences of 4096
        ModelShape qwen7b = ModelShape.of(ModelConfig.qwen25_7b());
        var w = Workload.benchmark().withSeq(16384).withDocumentTokens(4096);
        assertThat(ComputeModel.attentionRates(qwen7b, w, ENGINES)).isEqualTo(packed.inStep(128, 28, 4.0, 4096));
        assertThat(ComputeModel.attentionRates(qwen7b, w.withDocumentTokens(16384), ENGINES))
                .isEqualTo(ENGINES.inStep(128, 28, 1, 16384));
    }

    /** A table's columns are found by their names; a file that lacks one, or a line before the header, is refused. */
    @Test
    void aTableIsReadByItsColumnNames() {
        var table = AttentionRates.parse("""
                # comment
                sweep HS NH NKV T backward_tflops other forward_tflops
                sweep 128 28 4 2048 300.0 x 440.0
                sweep 128 28 4 4096 430.0 y 560.0 host
                """, "test.txt", "test");
        assertThat(table.alone(128, 28, 2048)).containsExactly(440e12, 300e12);
        assertThat(table.engineNames()).isEqualTo("test");
        assertThatThrownBy(() -> AttentionRates.parse("sweep HS NH NKV T forward_tflops\nsweep 128 28 4 2048 1\n",
                "a.txt", "a")).hasMessageContaining("a.txt: the column header has no backward_tflops");
        assertThatThrownBy(() -> AttentionRates.parse("sweep 128 28 4 2048 1 2\n", "b.txt", "b"))
                .hasMessageContaining("b.txt:1: a sweep line before the column header");
        assertThatThrownBy(() -> AttentionRates.parse("sweep HS NH T forward_tflops backward_tflops\nsweep 128 28 2048 "
                + "- 1\n", "c.txt", "c")).hasMessageContaining("c.txt:2: not a sweep line of");
        assertThatThrownBy(() -> AttentionRates.parse("# nothing\n", "d.txt", "d")).hasMessageContaining("no rows");
    }

    private static String resource(String name) throws IOException {
        try (InputStream in = AttentionRates.class.getResourceAsStream(name)) {
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
    }
}
