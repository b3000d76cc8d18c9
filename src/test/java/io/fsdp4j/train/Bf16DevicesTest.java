package io.fsdp4j.train;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.config.Precision;
import io.fsdp4j.cuda.Cuda;
import java.util.List;
import org.junit.jupiter.api.Test;

/** bf16 on GPUs without bf16 products (V100, T4) is refused before the job starts, naming fp16 instead. */
class Bf16DevicesTest {
    private static final Cuda.DeviceProperties H100 = new Cuda.DeviceProperties(0, "NVIDIA H100 80GB HBM3", 9, 0, 132,
            80L << 30, 232448);
    private static final Cuda.DeviceProperties V100 = new Cuda.DeviceProperties(1, "Tesla V100-SXM2-32GB", 7, 0, 80,
            32L << 30, 98304);

    @Test
    void bf16IsRefusedOnAGpuBeforeSm80() {
        assertThat(JobSetup.bf16Refusal(Precision.BF16, List.of(H100, V100))).contains("fsdp.param_dtype=bf16: GPU 1 "
                + "(Tesla V100-SXM2-32GB, sm_70) has no bf16 matrix products (they need sm_80 or later); set "
                + "fsdp.param_dtype=fp16 (with dynamic loss scaling) or fp32");
    }

    @Test
    void fp16AndFp32RunThereAndBf16OnHopper() {
        assertThat(JobSetup.bf16Refusal(Precision.FP16, List.of(V100))).isEmpty();
        assertThat(JobSetup.bf16Refusal(Precision.FP32, List.of(V100))).isEmpty();
        assertThat(JobSetup.bf16Refusal(Precision.BF16, List.of(H100))).isEmpty();
    }
}
