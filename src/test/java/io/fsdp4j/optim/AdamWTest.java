package io.fsdp4j.optim;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.comm.DeviceMesh;
import io.fsdp4j.config.DecayRule;
import io.fsdp4j.config.ScheduleKind;
import io.fsdp4j.fsdp.ShardedUnit;
import io.fsdp4j.job.InProcessWorld;
import io.fsdp4j.job.RankThreads;
import io.fsdp4j.model.ParamSpec;
import io.fsdp4j.model.UnitLayout;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

class AdamWTest {

    /** With zero gradients AdamW only decays: matrices shrink by (1 - lr*wd), the rest stays, across shard cuts. */
    @ParameterizedTest
    @EnumSource(DecayRule.class)
    void weightDecayFollowsTheRuleOnEveryShard(DecayRule rule) {
        UnitLayout layout = new UnitLayout.Builder("u").add("norm", ParamSpec.Kind.NORM, 5)
                .add("w", ParamSpec.Kind.MATRIX, 3, 4).add("b", ParamSpec.Kind.BIAS, 3).build(); // 20 elements
        InProcessWorld world = new InProcessWorld(new DeviceMesh(1, 3), Duration.ofSeconds(30));
        float[][] after = new float[3][];
        long[] starts = new long[3];
        RankThreads.run(world, r -> {
            var ctx = world.rank(r, CpuBackend.INSTANCE);
            ShardedUnit unit = new ShardedUnit(layout, CpuBackend.INSTANCE, ctx.shardGroup(), ctx.replicateGroup());
            CpuBackend.INSTANCE.fill(unit.master(), 2f);
            new AdamW(CpuBackend.INSTANCE, java.util.List.of(unit.trainable()), 0.9f, 0.95f, 1e-8f, 0.5f, rule).step(0.1f);
            after[r] = CpuBackend.INSTANCE.toFloats(unit.master());
            starts[r] = unit.shardStart();
        });
        for (int r = 0; r < 3; r++) {
            for (int i = 0; i < after[r].length; i++) {
                long element = starts[r] + i;
                boolean matrix = element >= 5 && element < 17;
                boolean decays = rule == DecayRule.ALL || matrix;
                float expected = element >= 20 ? 2f : decays ? 2f * (1 - 0.1f * 0.5f) : 2f; // padding untouched
                assertThat(after[r][i]).as("element %d", element).isEqualTo(expected);
            }
        }
    }

    @Test
    void schedulesWarmUpThenDecayToTheFloor() {
        var cosine = new LrSchedule(ScheduleKind.COSINE, 1.0, 4, 14, 0.1);
        assertThat(cosine.at(1)).isEqualTo(0.25);
        assertThat(cosine.at(4)).isEqualTo(1.0);
        assertThat(cosine.at(9)).isCloseTo(0.55, org.assertj.core.data.Offset.offset(1e-12));
        assertThat(cosine.at(14)).isCloseTo(0.1, org.assertj.core.data.Offset.offset(1e-12));
        var linear = new LrSchedule(ScheduleKind.LINEAR, 2.0, 0, 10, 0.0);
        assertThat(linear.at(5)).isCloseTo(1.0, org.assertj.core.data.Offset.offset(1e-12));
        assertThat(linear.at(10)).isCloseTo(0.0, org.assertj.core.data.Offset.offset(1e-12));
        var constant = new LrSchedule(ScheduleKind.CONSTANT, 3.0, 2, 10, 0.0);
        assertThat(constant.at(1)).isEqualTo(1.5);
        assertThat(constant.at(7)).isEqualTo(3.0);
    }
}
