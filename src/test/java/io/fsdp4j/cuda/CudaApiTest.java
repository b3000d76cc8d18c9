package io.fsdp4j.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.fsdp4j.tensor.DType;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The parts of the native layer that need no GPU, and a few GPU checks that skip (visibly) without one. */
class CudaApiTest {

    @Test
    void sizeClassesRoundTo512BytesThenTo2MiB() {
        assertThat(DeviceAllocator.sizeClass(1)).isEqualTo(512);
        assertThat(DeviceAllocator.sizeClass(512)).isEqualTo(512);
        assertThat(DeviceAllocator.sizeClass(513)).isEqualTo(1024);
        assertThat(DeviceAllocator.sizeClass((1 << 20) - 1)).isEqualTo(1 << 20);
        assertThat(DeviceAllocator.sizeClass(1 << 20)).isEqualTo(2 << 20);
        assertThat(DeviceAllocator.sizeClass(3 << 20)).isEqualTo(4 << 20);
    }

    @Test
    void nvrtcCommandLine() {
        var options = new Nvrtc.Options("sm_90", false, false, List.of("-lineinfo"));
        assertThat(options.commandLine()).startsWith("--gpu-architecture=sm_90", "-std=c++17").endsWith("-lineinfo")
                .doesNotContain("--use_fast_math");
        assertThat(options.withFastMath().commandLine()).contains("--use_fast_math");
        assertThat(options.commandLine()).noneMatch(arg -> arg.startsWith("--include-path"));
    }

    @Test
    void kernelArgumentsOfAnUnknownTypeAreRefusedBeforeAnyNativeCall() {
        var kernel = new Kernel("k", 0, 0);
        assertThatThrownBy(() -> kernel.launch(1, 1, 0, 0L, 1L, "text"))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("argument 1 of k has type String");
        assertThatThrownBy(() -> Kernel.Dim3.of(0)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void exceptionNamesTheFunction() {
        var e = new CudaException("cudaMalloc", 2, "out of memory (cudaErrorMemoryAllocation = 2)");
        assertThat(e).hasMessage("cudaMalloc: out of memory (cudaErrorMemoryAllocation = 2)");
        assertThat(e.function()).isEqualTo("cudaMalloc");
        assertThat(e.status()).isEqualTo(2);
    }

    @Test
    void ncclTypesFollowDTypes() {
        assertThat(Nccl.DataType.of(DType.BF16).code).isEqualTo(9);
        assertThat(Nccl.DataType.of(DType.F32).code).isEqualTo(7);
        assertThat(Nccl.UNIQUE_ID.byteSize()).isEqualTo(128);
    }

    // ---- on a GPU only ------------------------------------------------------------------------------

    private static void assumeGpu() {
        assumeTrue(NativeLibraries.cudaAvailable(), () -> "no CUDA GPU: " + NativeLibraries.whyCudaUnavailable().orElse(""));
    }

    @Test
    void gpuCopyRoundTrip() {
        assumeGpu();
        Cuda.setDevice(0);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment host = arena.allocate(4096), back = arena.allocate(4096);
            for (int i = 0; i < 1024; i++) {
                host.setAtIndex(ValueLayout.JAVA_FLOAT, i, i * 0.5f);
            }
            long device = Cuda.malloc(4096);
            try {
                Cuda.copyToDevice(device, host, 4096);
                Cuda.copyToHost(back, device, 4096);
            } finally {
                Cuda.free(device);
            }
            assertThat(back.mismatch(host)).isEqualTo(-1);
        }
    }

    @Test
    void gpuAllocatorReusesBlocks() {
        assumeGpu();
        Cuda.setDevice(0);
        try (var allocator = new DeviceAllocator()) {
            for (int i = 0; i < 5; i++) {
                long a = allocator.allocate(1000), b = allocator.allocate(5 << 20);
                allocator.free(a);
                allocator.free(b);
            }
            assertThat(allocator.mallocCount()).isEqualTo(2);
            assertThat(allocator.peakAllocatedBytes()).isEqualTo(1024 + (6 << 20));
        }
    }
}
