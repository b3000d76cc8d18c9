package io.fsdp4j.gpu;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.cuda.Cuda;
import io.fsdp4j.doctor.Doctor;
import io.fsdp4j.doctor.GpuHealth;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** {@code fsdp4j doctor}'s health tests on the GPUs: they run, the product is right, the rates are measured. */
@Tag("gpu")
class DoctorGpuTest {

    @Test
    @SuppressWarnings("unchecked")
    void healthTestsRunOnEveryVisibleGpu() {
        GpuTests.requireGpus(1);
        Doctor.Examination exam = Doctor.examine(true);
        exam.lines().forEach(System.out::println);
        assertThat(exam.verdict().status()).as(exam.verdict().reason()).isNotEqualTo("failed");
        var health = (Map<String, Object>) exam.json().get("health");
        var gemms = (List<Map<String, Object>>) health.get("gemm");
        var copies = (List<Map<String, Object>>) health.get("copy");
        assertThat(gemms).hasSize(Cuda.deviceCount());
        for (var g : gemms) {
            assertThat((Double) g.get("relative_error")).isLessThanOrEqualTo(1e-2);
            assertThat((Double) g.get("tflops")).isPositive();
        }
        copies.forEach(c -> assertThat((Double) c.get("tb_s")).isPositive());
        if (Cuda.deviceCount() >= 2) {
            assertThat((Double) ((Map<String, Object>) health.get("all_reduce")).get("bus_gb_s")).isPositive();
        }
        assertThat(exam.json().get("machine_gpus")).as("NVML answered").isNotNull();
    }

    @Test
    void theQuickTestAtJobStartPassesOnHealthyGpus() {
        GpuTests.requireGpus(1);
        GpuHealth.Quick quick = GpuHealth.quick();
        System.out.printf("quick health test: %.0f TFLOP/s, %.2f TB/s, problem: %s%n", quick.gemmFlops() / 1e12,
                quick.copyBytesPerSecond() / 1e12, quick.problem());
        assertThat(quick.problem()).isNull();
        assertThat(quick.gemmFlops()).isGreaterThan(100e12);
        assertThat(quick.copyBytesPerSecond()).isGreaterThan(1e12);
    }
}
