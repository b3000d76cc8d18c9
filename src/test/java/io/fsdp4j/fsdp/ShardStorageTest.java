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
            case "device" -> new ShardedUnit.Holding.Device();
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
}
