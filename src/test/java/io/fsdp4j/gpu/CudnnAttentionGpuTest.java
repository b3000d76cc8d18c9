package io.fsdp4j.gpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.fsdp4j.Golden;
import io.fsdp4j.UserError;
import io.fsdp4j.backend.AttentionShape;
import io.fsdp4j.backend.CudaAttention;
import io.fsdp4j.config.AttentionKernel;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.cuda.Cudnn;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.fsdp.RandomInit;
import io.fsdp4j.model.CausalLMs;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import io.fsdp4j.train.StepResult;
import io.fsdp4j.train.TrainingJob;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.function.UnaryOperator;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.assertj.core.data.Percentage;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * cuDNN's attention engine ({@code attention.kernel}) on the GPU: its forward (out, lse) and backward (dQkv) against
 * the CPU backend and against fsdp4j's kernels on random bf16 inputs (causal, grouped-query, uneven T, head sizes 64,
 * 128 and 256, a sliding window), either engine's backward from the other's forward; auto's choice (each direction
 * apart) and its line; a forward on fsdp4j's kernels (Hopper's on sm_90) with a backward on cuDNN's, and the other
 * pair, through the backend's dispatch; what cuDNN is never given; the settling of a job's shapes; and the tiny model
 * trained on each engine.
 */
@Tag("gpu")
class CudnnAttentionGpuTest extends CudaOpsFixture {
    private final List<String> lines = new ArrayList<>();

    CudnnAttentionGpuTest() {
        super(23);
    }

    @BeforeEach
    void requireCudnn() {
        assumeTrue(Cudnn.found(), "libcudnn.so.9 is not on the search path");
        gpu.attention().reportTo(lines::add);
    }

    @AfterEach
    void backToFsdp4j() {
        if (gpu != null) {
            gpu.attention().use(AttentionKernel.FSDP4J);
        }
    }

    private record Result(Tensor out, Tensor lse, Tensor dQkv) {}

    /** One forward and one backward on {@code engine} (null: the CPU backend, in fp32 on the same inputs). */
    private Result run(AttentionKernel engine, AttentionShape s, float[] qkv, float[] dOut) {
        int n = s.batch() * s.seqLen(), ow = s.heads() * s.headDim();
        if (engine == null) {
            Tensor out = CPU.allocate(DType.F32, n, ow), lse = CPU.allocate(DType.F32, s.batch(), s.heads(), s.seqLen());
            Tensor x = CPU.upload(qkv, n, s.qkvWidth()), d = CPU.allocate(DType.F32, n, s.qkvWidth());
            CPU.attentionForward(out, lse, x, null, s);
            CPU.attentionBackward(d, CPU.upload(dOut, n, ow), x, out, lse, null, s);
            return new Result(out, lse, d);
        }
        gpu.attention().use(engine);
        Tensor out = gpu.allocate(DType.BF16, n, ow), lse = gpu.allocate(DType.F32, s.batch(), s.heads(), s.seqLen());
        Tensor x = onGpu(qkv, Precision.BF16, n, s.qkvWidth()), d = gpu.allocate(DType.BF16, n, s.qkvWidth());
        gpu.attentionForward(out, lse, x, null, s);
        gpu.attentionBackward(d, onGpu(dOut, Precision.BF16, n, ow), x, out, lse, null, s);
        return new Result(out, lse, d);
    }

    private static double error(Tensor a, Tensor b) {
        float[] x = a.storage() instanceof io.fsdp4j.tensor.DeviceStorage ? gpu.toFloats(a) : CPU.toFloats(a);
        float[] y = b.storage() instanceof io.fsdp4j.tensor.DeviceStorage ? gpu.toFloats(b) : CPU.toFloats(b);
        return Golden.relativeError(x, y);
    }

    @Test
    void cudnnMatchesTheCpuAndFsdp4jsKernels() {
        int[][] shapes = {{2, 100, 4, 2, 64, 0}, {1, 77, 4, 4, 128, 0}, {2, 333, 6, 3, 64, 0}, {1, 130, 8, 2, 128, 0},
                {2, 200, 4, 2, 64, 50}, {1, 150, 4, 2, 256, 0}, {1, 64, 4, 1, 128, 0}};
        for (int[] d : shapes) {
            AttentionShape s = new AttentionShape(d[0], d[1], d[2], d[3], d[4], d[5]);
            int n = s.batch() * s.seqLen();
            float[] qkv = randoms(n * s.qkvWidth(), 0, 1.5, Precision.BF16);
            float[] dOut = randoms(n * s.heads() * s.headDim(), 0, 1, Precision.BF16);
            Result cpu = run(null, s, qkv, dOut), cudnn = run(AttentionKernel.CUDNN, s, qkv, dOut);
            assertThat(gpu.attention().chosen(s)).isNull(); // cudnn: nothing to choose
            assertThat(error(cudnn.out(), cpu.out())).as("out %s", s).isLessThan(1e-2);
            assertThat(error(cudnn.lse(), cpu.lse())).as("lse %s", s).isLessThan(1e-3);
            assertThat(error(cudnn.dQkv(), cpu.dQkv())).as("dQkv %s", s).isLessThan(2e-2);
            Result ours = run(AttentionKernel.FSDP4J, s, qkv, dOut);
            assertThat(error(cudnn.out(), ours.out())).as("out vs fsdp4j %s", s).isLessThan(1e-2);
            assertThat(error(cudnn.lse(), ours.lse())).as("lse vs fsdp4j %s", s).isLessThan(1e-3);
            assertThat(error(cudnn.dQkv(), ours.dQkv())).as("dQkv vs fsdp4j %s", s).isLessThan(2e-2);
            // either backward from the other's forward: the stats mean the same
            Tensor dQkv = gpu.allocate(DType.BF16, n, s.qkvWidth());
            gpu.attention().use(AttentionKernel.CUDNN);
            gpu.attentionBackward(dQkv, onGpu(dOut, Precision.BF16, n, s.heads() * s.headDim()),
                    onGpu(qkv, Precision.BF16, n, s.qkvWidth()), ours.out(), ours.lse(), null, s);
            assertThat(error(dQkv, cpu.dQkv())).as("cuDNN's dQkv from fsdp4j's forward %s", s).isLessThan(2e-2);
        }
    }

    private static final Pattern LINE = Pattern.compile(
            "attention B=1 T=1024 NH=8 NKV=2 HS=128: forward (cudnn|fsdp4j) \\(([0-9.]+) ms on cuDNN, ([0-9.]+) ms on "
                    + "fsdp4j's kernels\\), backward (cudnn|fsdp4j) \\(([0-9.]+) ms on cuDNN, ([0-9.]+) ms on "
                    + "fsdp4j's kernels\\)");

    private static CudaAttention.Engine faster(double cudnnMs, double oursMs) {
        return cudnnMs < oursMs ? CudaAttention.Engine.CUDNN : CudaAttention.Engine.FSDP4J;
    }

    /**
     * The engine kept for a direction: the one its line names, and the faster by the line's times, unless they print
     * alike (rounded to the microsecond: engines that close may go either way, as the unrounded times say).
     */
    private static void assertPicked(String direction, CudaAttention.Engine kept, String named, double cudnnMs,
                                     double oursMs) {
        assertThat(named).as("the %s's engine in the line", direction).isEqualTo(name(kept));
        if (cudnnMs != oursMs) {
            assertThat(kept).as("the %s's engine, %s ms on cuDNN, %s on ours", direction, cudnnMs, oursMs)
                    .isEqualTo(faster(cudnnMs, oursMs));
        }
    }

    private static String name(CudaAttention.Engine engine) {
        return engine == CudaAttention.Engine.CUDNN ? "cudnn" : "fsdp4j";
    }

    @Test
    void autoTimesBothAtAShapesFirstUseKeepsTheFasterAndSaysSo() {
        AttentionShape s = new AttentionShape(1, 1024, 8, 2, 128, 0);
        int n = s.seqLen();
        float[] qkv = randoms(n * s.qkvWidth(), 0, 1, Precision.BF16);
        Result cpu = run(null, s, qkv, randoms(n * s.heads() * s.headDim(), 0, 1, Precision.BF16));
        gpu.attention().use(AttentionKernel.AUTO);
        Tensor out = gpu.allocate(DType.BF16, n, s.heads() * s.headDim()), lse = gpu.allocate(DType.F32, 1, 8, n);
        Tensor x = onGpu(qkv, Precision.BF16, n, s.qkvWidth());
        gpu.attentionForward(out, lse, x, null, s);
        gpu.attentionForward(out, lse, x, null, s); // decided once
        assertThat(lines).hasSize(1);
        Matcher m = LINE.matcher(lines.getFirst());
        assertThat(m.matches()).as(lines.getFirst()).isTrue();
        CudaAttention.Choice kept = gpu.attention().chosen(s);
        assertPicked("forward", kept.forward(), m.group(1), Double.parseDouble(m.group(2)),
                Double.parseDouble(m.group(3)));
        assertPicked("backward", kept.backward(), m.group(4), Double.parseDouble(m.group(5)),
                Double.parseDouble(m.group(6)));
        assertThat(error(out, cpu.out())).isLessThan(1e-2); // the timing left the call's own outputs right
        assertThat(error(lse, cpu.lse())).isLessThan(1e-3);
    }

    /**
     * Auto with the forward settled on fsdp4j's kernels and the backward on cuDNN's: the backend's own calls give the
     * CPU's out, lse and gradients, cuDNN's backward taking the other engine's lse. On sm_90 (the kernel set auto)
     * these bf16 forwards of head size 64 and 128 are attention_sm90.cu's.
     */
    @Test
    void aForwardOnFsdp4jsKernelsAndABackwardOnCudnnGiveTheCpusGradients() {
        // this "rank"'s times made to say: forward on fsdp4j's kernels, backward on cuDNN's
        mixedEnginesGiveTheCpusGradients(new CudaAttention.Choice(CudaAttention.Engine.FSDP4J,
                CudaAttention.Engine.CUDNN), mine -> new double[] {mine[0], mine[1] + 1e6, mine[2] + 1e6, mine[3],
                mine[4]});
    }

    /** The other pair: cuDNN's forward, fsdp4j's backward taking cuDNN's statistics as its lse. */
    @Test
    void aForwardOnCudnnAndABackwardOnFsdp4jsKernelsGiveTheCpusGradients() {
        mixedEnginesGiveTheCpusGradients(new CudaAttention.Choice(CudaAttention.Engine.CUDNN,
                CudaAttention.Engine.FSDP4J), mine -> new double[] {mine[0] + 1e6, mine[1], mine[2], mine[3] + 1e6,
                mine[4]});
    }

    /** Settles each shape with {@code times} (this rank's times made to say {@code pair}), then runs it. */
    private void mixedEnginesGiveTheCpusGradients(CudaAttention.Choice pair, UnaryOperator<double[]> times) {
        int[][] shapes = {{1, 512, 28, 4, 128, 0}, {2, 333, 8, 2, 64, 0}, {1, 300, 8, 2, 128, 100}};
        for (int[] d : shapes) {
            AttentionShape s = new AttentionShape(d[0], d[1], d[2], d[3], d[4], d[5]);
            int n = s.batch() * s.seqLen(), ow = s.heads() * s.headDim();
            float[] qkv = randoms(n * s.qkvWidth(), 0, 1.5, Precision.BF16);
            float[] dOut = randoms(n * ow, 0, 1, Precision.BF16);
            Result cpu = run(null, s, qkv, dOut);
            gpu.attention().use(AttentionKernel.AUTO);
            gpu.attention().settle(List.of(s), times, false);
            assertThat(gpu.attention().chosen(s)).isEqualTo(pair);
            Tensor out = gpu.allocate(DType.BF16, n, ow);
            Tensor lse = gpu.allocate(DType.F32, s.batch(), s.heads(), s.seqLen());
            Tensor x = onGpu(qkv, Precision.BF16, n, s.qkvWidth()), dQkv = gpu.allocate(DType.BF16, n, s.qkvWidth());
            gpu.attentionForward(out, lse, x, null, s);
            gpu.attentionBackward(dQkv, onGpu(dOut, Precision.BF16, n, ow), x, out, lse, null, s);
            assertThat(error(out, cpu.out())).as("out %s", s).isLessThan(1e-2);
            assertThat(error(lse, cpu.lse())).as("lse %s", s).isLessThan(1e-3);
            assertThat(error(dQkv, cpu.dQkv())).as("dQkv %s", s).isLessThan(2e-2);
        }
    }

    @Test
    void whatCudnnCannotTakeIsAnErrorUnderCudnnAndFsdp4jsUnderAuto() {
        AttentionShape s = new AttentionShape(1, 64, 4, 2, 64, 0);
        int n = s.seqLen();
        Tensor out = gpu.allocate(DType.BF16, n, 256), lse = gpu.allocate(DType.F32, 1, 4, n);
        Tensor qkv = onGpu(randoms(n * s.qkvWidth(), 0, 1, Precision.BF16), Precision.BF16, n, s.qkvWidth());
        int[] starts = new int[n];
        for (int t = 0; t < n; t++) {
            starts[t] = t < 20 ? 0 : 20;
        }
        Tensor documentStarts = gpu.uploadInts(starts, n);
        gpu.attention().use(AttentionKernel.CUDNN);
        assertThatThrownBy(() -> gpu.attentionForward(out, lse, qkv, documentStarts, s)).isInstanceOf(UserError.class)
                .hasMessageContaining("packed documents").hasMessageContaining("attention.kernel: auto")
                .hasMessageNotContaining("\n");
        AttentionShape capped = s.withScores(0.125f, 30f);
        assertThatThrownBy(() -> gpu.attentionForward(out, lse, qkv, null, capped)).isInstanceOf(UserError.class)
                .hasMessageContaining("soft-capped");
        gpu.attention().use(AttentionKernel.AUTO);
        gpu.attentionForward(out, lse, qkv, documentStarts, s); // fsdp4j's kernels, nothing timed or said
        assertThat(gpu.attention().chosen(s)).isNull();
        assertThat(lines).isEmpty();
    }

    @Test
    void settlingKeepsTheEngineWithTheSmallerSumOverTheRanksThenTheRuleForOtherShapes() {
        AttentionShape a = new AttentionShape(1, 256, 8, 2, 64, 0), b = new AttentionShape(1, 256, 8, 2, 128, 0);
        AttentionShape c = new AttentionShape(2, 256, 8, 2, 128, 0), other = new AttentionShape(1, 512, 8, 2, 128, 0);
        gpu.attention().use(AttentionKernel.AUTO);
        List<double[]> seen = new ArrayList<>();
        // another "rank" whose cuDNN is far slower at a, far faster at b's forward and slower at its backward, and
        // missing at c (times: fsdp4j's forward and backward, cuDNN's forward and backward, ranks without cuDNN)
        double[][] others = {{0, 0, 1e6, 1e6, 0}, {1e6, 0, 0, 1e6, 0}, {0, 0, 0, 0, 1}};
        gpu.attention().settle(List.of(a, b, c), mine -> {
            double[] theirs = others[seen.size()];
            seen.add(mine);
            double[] sum = mine.clone();
            for (int i = 0; i < sum.length; i++) {
                sum[i] += theirs[i];
            }
            return sum;
        }, true);
        assertThat(seen).hasSize(3).allSatisfy(mine -> {
            assertThat(mine).hasSize(5);
            assertThat(mine[0]).isPositive(); // this rank timed both engines, each direction
            assertThat(mine[1]).isPositive();
            assertThat(mine[2]).isPositive();
            assertThat(mine[3]).isPositive();
            assertThat(mine[4]).isZero();
        });
        var fsdp4j = CudaAttention.Engine.FSDP4J;
        assertThat(gpu.attention().chosen(a)).isEqualTo(new CudaAttention.Choice(fsdp4j, fsdp4j));
        assertThat(gpu.attention().chosen(b)).isEqualTo(new CudaAttention.Choice(CudaAttention.Engine.CUDNN, fsdp4j));
        assertThat(gpu.attention().chosen(c)).isEqualTo(new CudaAttention.Choice(fsdp4j, fsdp4j));
        assertThat(lines).hasSize(3);
        assertThat(lines.get(2)).contains("cuDNN cannot run it on 1 rank(s)");
        int n = other.seqLen();
        Tensor out = gpu.allocate(DType.BF16, n, 1024), lse = gpu.allocate(DType.F32, 1, 8, n);
        Tensor qkv = onGpu(randoms(n * other.qkvWidth(), 0, 1, Precision.BF16), Precision.BF16, n, other.qkvWidth());
        gpu.attentionForward(out, lse, qkv, null, other);
        assertThat(gpu.attention().chosen(other)).isEqualTo(new CudaAttention.Choice(fsdp4j, fsdp4j)); // the rule
        assertThat(lines).hasSize(3); // and nothing timed
    }

    /** The tiny model (head size 32), bf16, unpacked sequences of 128 tokens, on one rank and one engine. */
    private static List<StepResult> trainTiny(String kernel) {
        ModelConfig tiny = ModelConfig.tiny();
        TrainConfig config = TrainConfig.load(null, List.of("dist.device=cuda", "dist.ranks=1", "train.steps=6",
                "data.seq_len=128", "train.batch_size=2", "fsdp.param_dtype=bf16", "attention.kernel=" + kernel));
        SplittableRandom random = new SplittableRandom(5);
        List<Sequence> data = new ArrayList<>();
        for (int i = 0; i < 12; i++) {
            int[] ids = random.ints(128, 0, tiny.vocabSize()).toArray();
            data.add(new Sequence(ids, ids.clone()));
        }
        return new TrainingJob(config, tiny, new RandomInit(1, 0.02, CausalLMs.layout(tiny)), data, false)
                .run(null, false).steps();
    }

    @Test
    void theTinyModelTrainsOnCudnnAsOnFsdp4jsKernels() {
        List<StepResult> ours = trainTiny("fsdp4j"), cudnn = trainTiny("cudnn");
        assertThat(cudnn).hasSameSizeAs(ours);
        for (int s = 0; s < ours.size(); s++) {
            assertThat(cudnn.get(s).loss()).as("loss at step %d", s + 1)
                    .isCloseTo(ours.get(s).loss(), Percentage.withPercentage(1));
            assertThat(cudnn.get(s).gradNorm()).as("grad norm at step %d", s + 1)
                    .isCloseTo(ours.get(s).gradNorm(), Percentage.withPercentage(5));
        }
        assertThat(ours.getLast().loss()).isLessThan(ours.getFirst().loss());
    }
}
