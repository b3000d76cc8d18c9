package io.fsdp4j.backend;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.backend.CudaBackend.KernelSet;
import org.junit.jupiter.api.Test;

/** Which attention kernels each {@link KernelSet} runs on each GPU generation (no GPU needed). */
class CudaKernelSetTest {
    @Test
    void autoFollowsTheArchitecture() {
        assertThat(KernelSet.AUTO.simpleOn(7)).isTrue();
        assertThat(KernelSet.AUTO.simpleOn(8)).isFalse();
        assertThat(KernelSet.AUTO.hopperOn(8)).isFalse();
        assertThat(KernelSet.AUTO.hopperOn(9)).isTrue();
        assertThat(KernelSet.AUTO.hopperOn(10)).isFalse(); // sm_90a code runs on compute capability 9.0 only
    }

    @Test
    void sm80KeepsTheTiledKernelsOnHopperAndSm70TheSimpleOnes() {
        assertThat(KernelSet.SM80.hopperOn(9)).isFalse();
        assertThat(KernelSet.SM80.simpleOn(9)).isFalse();
        assertThat(KernelSet.SM80.simpleOn(7)).isTrue();
        assertThat(KernelSet.SM70.hopperOn(9)).isFalse();
        assertThat(KernelSet.SM70.simpleOn(9)).isTrue();
    }

    @Test
    void parsesTheThreeNames() {
        assertThat(KernelSet.parse(" SM80 ")).isEqualTo(KernelSet.SM80);
        assertThat(KernelSet.parse("sm70")).isEqualTo(KernelSet.SM70);
        assertThat(KernelSet.parse("")).isEqualTo(KernelSet.AUTO);
        assertThatThrownBy(() -> KernelSet.parse("sm90")).hasMessageContaining("must be auto, sm80 or sm70");
    }
}
