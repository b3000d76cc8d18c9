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
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Half;
import java.time.Duration;
import java.util.Arrays;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The three storages of a unit's shard gather the same parameters: fp32 masters on the device or in host memory
 * exactly, a frozen bf16 shard those values rounded to bf16 (as a bf16 gather of a master rounds them); a frozen unit
 * holds its parameters only (no master, no gradient: asking for one fails) and counts 2 bytes an element.
 */
class ShardStorageTest {
    private static final UnitLayout LAYOUT = new UnitLayout.Builder("u").add("norm", ParamSpec.Kind.NORM, 5)
            .add("w", ParamSpec.Kind.MATRIX, 3, 4).add("b", ParamSpec.Kind.BIAS, 3).build(); // 20 elements

    @ParameterizedTest(name = "{0} on {1} ranks, gathered in {2}")
    @CsvSource({"device,1,fp32", "device,3,bf16", "host,3,fp32", "host,1,bf16", "frozen-bf16,1,bf16",
            "frozen-bf16,3,bf16", "frozen-f32,3,fp32", "frozen-f32,1,fp32"})
    void everyStorageGathersTheSameParameters(String kind, int ranks, String dtype) {
        Precision precision = Precision.valueOf(dtype.toUpperCase());
        float[] values = new float[20];
        for (int i = 0; i < values.length; i++) {
            values[i] = 0.1f + i * 0.3377f;
        }
        ShardedUnit.Holding holding = switch (kind) {
            case "device" -> new ShardedUnit.Holding.Device(null);
            case "host" -> new ShardedUnit.Holding.Host();
            case "frozen-bf16" -> new ShardedUnit.Holding.Frozen(DType.BF16);
            default -> new ShardedUnit.Holding.Frozen(DType.F32);
        };
        InProcessWorld world = new InProcessWorld(new DeviceMesh(1, ranks), Duration.ofSeconds(30));
        float[][] gathered = new float[ranks][];
        long[] paramBytes = new long[ranks];
        RankThreads.run(world, r -> {
            var ctx = world.rank(r, CpuBackend.INSTANCE);
            var be = CpuBackend.INSTANCE;
            ShardedUnit unit = new ShardedUnit(LAYOUT, be, ctx.shardGroup(), ctx.replicateGroup(), holding);
            int owned = unit.ownedParamElements();
            unit.loadMaster(Arrays.copyOfRange(values, (int) unit.shardStart(), (int) unit.shardStart() + owned));
            try (var scope = be.newScope(); var entered = scope.enter()) {
                gathered[r] = Arrays.copyOf(be.toFloats(unit.gather(precision)), 20);
                unit.free();
            }
            paramBytes[r] = unit.storage().paramBytes();
            if (kind.startsWith("frozen")) {
                assertThat(unit.trains()).isFalse();
                assertThat(unit.storage().gradBytes()).isZero();
                assertThatThrownBy(unit::gradAccumulator).hasMessageContaining("unit u is frozen");
                unit.zeroGrad(); // nothing to zero: no failure
            } else {
                assertThat(unit.trainable().inHostMemory()).isEqualTo(kind.equals("host"));
            }
        });
        boolean rounded = precision == Precision.BF16 || kind.equals("frozen-bf16");
        for (int r = 0; r < ranks; r++) {
            for (int i = 0; i < 20; i++) {
                float expected = rounded ? Half.fromBf16(Half.toBf16(values[i])) : values[i];
                assertThat(gathered[r][i]).as("rank %d element %d", r, i).isEqualTo(expected);
            }
            int shardNumel = (20 + ranks - 1) / ranks;
            assertThat(paramBytes[r]).isEqualTo((long) shardNumel * (kind.equals("frozen-bf16") ? 2 : 4));
        }
    }

    /**
     * A kept copy ({@code fsdp.param_copy: kept}) is what a bf16 gather sends, and it follows the master: after a load
     * and after an AdamW step the gather gives the master's values rounded to bf16, exactly as a gather that rounds
     * them does; the copy counts 2 bytes an element beside the master's 4.
     */
    @ParameterizedTest(name = "on {0} ranks")
    @CsvSource({"1", "3"})
    void aKeptCopyFollowsTheMasterThroughLoadsAndSteps(int ranks) {
        InProcessWorld world = new InProcessWorld(new DeviceMesh(1, ranks), Duration.ofSeconds(30));
        float[][][] gathered = new float[ranks][][];
        float[][][] masters = new float[ranks][][];
        long[] paramBytes = new long[ranks];
        RankThreads.run(world, r -> {
            var ctx = world.rank(r, CpuBackend.INSTANCE);
            var be = CpuBackend.INSTANCE;
            ShardedUnit unit = new ShardedUnit(LAYOUT, be, ctx.shardGroup(), ctx.replicateGroup(),
                    new ShardedUnit.Holding.Device(DType.BF16));
            int owned = unit.ownedParamElements();
            gathered[r] = new float[3][];
            masters[r] = new float[3][];
            for (int round = 0; round < 3; round++) {
                if (round < 2) { // two loads: the second changes what the first left in the copy
                    float[] values = new float[owned];
                    for (int i = 0; i < owned; i++) {
                        values[i] = 0.1f + (unit.shardStart() + i) * (round == 0 ? 0.3377f : -0.2113f);
                    }
                    unit.loadMaster(values);
                } else { // an optimizer step, a gradient in every element
                    var adamw = new io.fsdp4j.optim.AdamW(be, java.util.List.of(unit.trainable()), 0.9f, 0.999f,
                            1e-8f, 0.1f, io.fsdp4j.config.DecayRule.MATRICES);
                    var b = (io.fsdp4j.optim.TrainableShard.OnDevice) unit.trainable().buffers();
                    be.fill(b.grad(), 0.37f);
                    adamw.step(0.01f);
                }
                masters[r][round] = unit.masterValues();
                try (var scope = be.newScope(); var entered = scope.enter()) {
                    gathered[r][round] = Arrays.copyOf(be.toFloats(unit.gather(Precision.BF16)), 20);
                    unit.free();
                }
            }
            paramBytes[r] = unit.storage().paramBytes();
        });
        int shardNumel = (20 + ranks - 1) / ranks;
        for (int round = 0; round < 3; round++) {
            for (int i = 0; i < 20; i++) {
                float master = masters[i / shardNumel][round][i % shardNumel];
                for (int r = 0; r < ranks; r++) {
                    assertThat(gathered[r][round][i]).as("round %d, rank %d, element %d", round, r, i)
                            .isEqualTo(Half.fromBf16(Half.toBf16(master)));
                }
            }
        }
        assertThat(masters[0][2][0]).as("the step changed the master").isNotEqualTo(masters[0][1][0]);
        for (int r = 0; r < ranks; r++) {
            assertThat(paramBytes[r]).isEqualTo((long) shardNumel * 6);
        }
    }
}
