package io.fsdp4j.fsdp;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.comm.DeviceMesh;
import io.fsdp4j.config.Precision;
import io.fsdp4j.job.InProcessWorld;
import io.fsdp4j.job.RankThreads;
import io.fsdp4j.model.ParamSpec;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.tensor.Half;
import io.fsdp4j.tensor.Nf4;
import java.time.Duration;
import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * An NF4 base on 1 to 5 ranks: its 8 blocks of linears sharded in whole blocks (3 ranks: 3, 3 and 2 blocks; 5
 * ranks: the last owns none), its norms and biases on their own; every rank gathers each weight as its NF4 round trip
 * (rounded to bf16 in a bf16 gather) and the rest as loaded, again after a free; it holds 36 bytes a block of its
 * shard and no gradient.
 */
class Nf4UnitTest {
    private static final UnitLayout LAYOUT = new UnitLayout.Builder("block.0")
            .add("norm", ParamSpec.Kind.NORM, 5).add("w1", ParamSpec.Kind.MATRIX, 3, 64)
            .add("bias", ParamSpec.Kind.BIAS, 7).add("w2", ParamSpec.Kind.MATRIX, 4, 80).build(); // 524 elements

    @ParameterizedTest(name = "{0} ranks, gathered in {1}")
    @CsvSource({"1,fp32", "3,fp32", "3,bf16", "5,bf16", "5,fp32", "2,fp16"})
    void everyRankGathersTheRoundTripOfTheWeights(int ranks, String dtype) {
        Precision precision = Precision.valueOf(dtype.toUpperCase());
        float[] values = new float[Math.toIntExact(LAYOUT.numel())];
        var rng = new SplittableRandom(7);
        for (int i = 0; i < values.length; i++) {
            values[i] = (float) (rng.nextGaussian() * 0.05);
        }
        float[] want = values.clone();
        for (ParamSpec p : LAYOUT.params()) {
            if (p.kind() == ParamSpec.Kind.MATRIX) {
                float[] trip = Nf4.roundTrip(Arrays.copyOfRange(values, (int) p.offset(), (int) p.end()));
                System.arraycopy(trip, 0, want, (int) p.offset(), trip.length);
            }
        }
        float[] rounded = want.clone();
        if (precision != Precision.FP32) {
            for (int i = 0; i < rounded.length; i++) {
                rounded[i] = Half.fromBits(precision.dtype(), Half.toBits(precision.dtype(), rounded[i]));
            }
        }
        InProcessWorld world = new InProcessWorld(new DeviceMesh(1, ranks), Duration.ofSeconds(30));
        float[][] gathered = new float[ranks][], again = new float[ranks][], full = new float[ranks][];
        long[] paramBytes = new long[ranks];
        RankThreads.run(world, r -> {
            var ctx = world.rank(r, CpuBackend.INSTANCE);
            var be = CpuBackend.INSTANCE;
            Nf4Unit unit = new Nf4Unit(LAYOUT, be, ctx.shardGroup(), ctx.replicateGroup(), precision.dtype(),
                    (u, start, dst, off, count) -> System.arraycopy(values, (int) start, dst, off, count), 1);
            try (var scope = be.newScope(); var entered = scope.enter()) {
                gathered[r] = be.toFloats(unit.gather(precision));
                unit.free();
                assertThat(unit.isGathered()).isFalse();
                unit.startGather(precision);
                again[r] = be.toFloats(unit.gather(precision));
                unit.free();
            }
            full[r] = unit.fullParameters();
            paramBytes[r] = unit.paramBytes();
            assertThat(unit.trains()).isFalse();
            assertThat(unit.gradBytes()).isZero();
            assertThatThrownBy(unit::trainable).isInstanceOf(IllegalStateException.class);
        });
        int blocksPerRank = (8 + ranks - 1) / ranks, restPerRank = (12 + ranks - 1) / ranks;
        for (int r = 0; r < ranks; r++) {
            assertThat(gathered[r]).as("rank %d", r).containsExactly(rounded);
            assertThat(again[r]).as("rank %d, gathered again", r).containsExactly(rounded);
            assertThat(full[r]).as("rank %d, full parameters (fp32)", r).containsExactly(precision == Precision.FP32
                    ? want : withRest(want, rounded));
            assertThat(paramBytes[r]).isEqualTo(36L * blocksPerRank + (long) precision.dtype().bytes() * restPerRank);
        }
    }

    /** The weights from {@code weights}, the norms and biases (held in the gather's precision) from {@code rest}. */
    private static float[] withRest(float[] weights, float[] rest) {
        float[] result = weights.clone();
        for (ParamSpec p : LAYOUT.params()) {
            if (p.kind() != ParamSpec.Kind.MATRIX) {
                System.arraycopy(rest, (int) p.offset(), result, (int) p.offset(), (int) p.numel());
            }
        }
        return result;
    }
}
