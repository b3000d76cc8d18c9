package io.fsdp4j.optim;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.config.LossScaling;
import org.junit.jupiter.api.Test;

/** The loss scale's dynamics, step by step, as torch.amp.GradScaler's. */
class LossScalerTest {

    @Test
    void anOverflowHalvesTheScaleAndRestartsTheCount() {
        LossScaler scaler = new LossScaler(new LossScaling(LossScaling.Mode.DYNAMIC, 65536, 3));
        assertThat(scaler.scale()).isEqualTo(65536.0);
        scaler.update(true);
        scaler.update(true);
        assertThat(scaler.cleanSteps()).isEqualTo(2);
        scaler.update(false);
        assertThat(scaler.scale()).isEqualTo(32768.0);
        assertThat(scaler.cleanSteps()).isZero();
        scaler.update(false);
        assertThat(scaler.scale()).isEqualTo(16384.0);
    }

    @Test
    void growthIntervalCleanStepsInARowDoubleTheScale() {
        LossScaler scaler = new LossScaler(new LossScaling(LossScaling.Mode.DYNAMIC, 1024, 3));
        scaler.update(true);
        scaler.update(true);
        assertThat(scaler.scale()).isEqualTo(1024.0);
        scaler.update(true);
        assertThat(scaler.scale()).isEqualTo(2048.0);
        assertThat(scaler.cleanSteps()).isZero();
        scaler.update(true);
        scaler.update(true);
        scaler.update(false); // the count starts again: two clean steps before it do not carry over
        scaler.update(true);
        scaler.update(true);
        assertThat(scaler.scale()).isEqualTo(1024.0);
        scaler.update(true);
        assertThat(scaler.scale()).isEqualTo(2048.0);
    }

    @Test
    void aSkipIsTheScalesOverflowOnlyWithAFiniteLossAndAScaleOfAtLeastOne() {
        LossScaler scaler = new LossScaler(new LossScaling(LossScaling.Mode.DYNAMIC, 2, 2000));
        assertThat(scaler.isOverflow(3.5)).isTrue();
        assertThat(scaler.isOverflow(Double.NaN)).as("the forward overflowed").isFalse();
        scaler.update(false);
        assertThat(scaler.isOverflow(3.5)).as("at 1").isTrue();
        scaler.update(false);
        assertThat(scaler.scale()).isEqualTo(0.5);
        assertThat(scaler.isOverflow(3.5)).as("below 1").isFalse();
        assertThat(new LossScaler(new LossScaling(LossScaling.Mode.STATIC, 1024, 1)).isOverflow(3.5)).isFalse();
        assertThat(LossScaler.none().isOverflow(3.5)).isFalse();
    }

    @Test
    void staticAndNoScaleNeverChange() {
        LossScaler fixed = new LossScaler(new LossScaling(LossScaling.Mode.STATIC, 128, 1));
        LossScaler none = LossScaler.none();
        for (boolean finite : new boolean[] {false, true, true, false}) {
            fixed.update(finite);
            none.update(finite);
        }
        assertThat(fixed.scale()).isEqualTo(128.0);
        assertThat(fixed.isScaling()).isTrue();
        assertThat(fixed.isDynamic()).isFalse();
        assertThat(none.scale()).isEqualTo(1.0);
        assertThat(none.isScaling()).isFalse();
    }

    @Test
    void restoreContinuesADynamicScaleOnly() {
        LossScaler dynamic = new LossScaler(LossScaling.dynamic());
        dynamic.restore(512.0, 7);
        assertThat(dynamic.scale()).isEqualTo(512.0);
        assertThat(dynamic.cleanSteps()).isEqualTo(7);
        LossScaler fresh = new LossScaler(LossScaling.dynamic());
        fresh.restore(null, null); // a checkpoint without a scale: the initial one
        assertThat(fresh.scale()).isEqualTo(65536.0);
        LossScaler fixed = new LossScaler(new LossScaling(LossScaling.Mode.STATIC, 8, 1));
        fixed.restore(512.0, 7); // a static scale is the config's, whatever the checkpoint held
        assertThat(fixed.scale()).isEqualTo(8.0);
    }
}
