package io.fsdp4j.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeFalse;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.fsdp4j.UserError;
import io.fsdp4j.cuda.NativeLibraries.Library;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class NativeLibrariesTest {
    @TempDir
    Path dir;

    private static boolean gpuMachine() {
        return Files.exists(Path.of("/dev/nvidiactl")) || Files.exists(Path.of("/dev/nvidia0"));
    }

    @Test
    void cudaAvailableIsFalseQuicklyWithoutAGpu() {
        assumeFalse(gpuMachine(), "this machine has an NVIDIA device");
        long start = System.nanoTime();
        boolean available = NativeLibraries.cudaAvailable();
        long millis = (System.nanoTime() - start) / 1_000_000;
        assertThat(available).isFalse();
        assertThat(millis).isLessThan(5_000);
        assertThat(NativeLibraries.whyCudaUnavailable()).hasValueSatisfying(reason -> assertThat(reason).doesNotContain("\n"));
        assertThat(NativeLibraries.cudaAvailable()).isFalse(); // cached, and still no exception
    }

    @Test
    void aMissingLibraryIsOneLineNamingTheVariable() {
        String message = NativeLibraries.missingMessage(Library.NCCL);
        assertThat(message).contains("libnccl.so.2", "NCCL", NativeLibraries.ENV).doesNotContain("\n");
    }

    @Test
    void requireThrowsTheUserErrorForAMissingLibrary() {
        assumeTrue(NativeLibraries.find(Library.DRIVER).isEmpty(), "the driver is installed here");
        assertThatThrownBy(() -> NativeLibraries.require(Library.DRIVER))
                .isInstanceOf(UserError.class)
                .hasMessageContaining("libcuda.so.1")
                .hasMessageContaining(NativeLibraries.ENV)
                .hasMessageNotContaining("\n");
    }

    @Test
    void aCallIntoAMissingLibraryIsTheUserError() {
        assumeTrue(NativeLibraries.find(Library.NCCL).isEmpty(), "NCCL is installed here");
        assertThatThrownBy(Nccl::version).isInstanceOf(UserError.class).hasMessageContaining(NativeLibraries.ENV);
        // the lazy handle stays unlinked and answers the same way again
        assertThatThrownBy(Nccl::version).isInstanceOf(UserError.class);
    }

    @Test
    void overrideFoldersComeFirst() throws IOException {
        Path folder = Files.createDirectories(dir.resolve("libs"));
        Files.writeString(folder.resolve("libnvrtc.so.13"), "not really");
        System.setProperty(NativeLibraries.PROPERTY, "/nonexistent/folder:" + folder);
        try {
            assertThat(NativeLibraries.overrideFolders()).contains(folder);
            assertThat(NativeLibraries.searchPath().getFirst()).isEqualTo(folder.toRealPath());
            Path expected = folder.toRealPath().resolve("libnvrtc.so.13");
            assertThat(NativeLibraries.search(Library.NVRTC)).hasValueSatisfying(
                    location -> assertThat(location.file()).isEqualTo(expected));
        } finally {
            System.clearProperty(NativeLibraries.PROPERTY);
        }
    }

    @Test
    void cudnnIsLookedForAsLibcudnnSo9AndNamedWhenMissing() throws IOException {
        assertThat(NativeLibraries.missingMessage(Library.CUDNN)).contains("libcudnn.so.9", "cuDNN",
                NativeLibraries.ENV).doesNotContain("\n");
        Path folder = Files.createDirectories(dir.resolve("nvidia/cudnn/lib")); // as the nvidia-cudnn wheel lays it out
        Files.writeString(folder.resolve("libcudnn.so.9"), "not really");
        Path expected = folder.toRealPath().resolve("libcudnn.so.9");
        System.setProperty(NativeLibraries.PROPERTY, folder.toString());
        try {
            assertThat(NativeLibraries.search(Library.CUDNN)).hasValueSatisfying(location -> assertThat(
                    location.file()).isEqualTo(expected));
        } finally {
            System.clearProperty(NativeLibraries.PROPERTY);
        }
    }

    @Test
    void globListsNewestVersionFirst() throws IOException {
        for (String version : new String[] {"cuda-12.9", "cuda-12.10", "cuda-11.8", "cuda-13.0"}) {
            Files.createDirectories(dir.resolve(version).resolve("lib64"));
        }
        Files.createDirectories(dir.resolve("cuda-14.0")); // no lib64
        assertThat(NativeLibraries.glob(dir + "/cuda-*/lib64")).extracting(p -> p.getParent().getFileName().toString())
                .containsExactly("cuda-13.0", "cuda-12.10", "cuda-12.9", "cuda-11.8");
    }

    @Test
    void ncclVersionFromTheFileNameOrTheWheel() throws IOException {
        Path distro = Files.createDirectories(dir.resolve("usr/lib"));
        Files.writeString(distro.resolve("libnccl.so.2.28.3"), "x");
        Files.createSymbolicLink(distro.resolve("libnccl.so.2"), Path.of("libnccl.so.2.28.3"));
        assertThat(NativeLibraries.ncclVersionOf(distro.resolve("libnccl.so.2"))).isEqualTo(22803);

        Path site = dir.resolve("venv/lib/python3.12/site-packages");
        Path lib = Files.createDirectories(site.resolve("nvidia/nccl/lib"));
        Files.writeString(lib.resolve("libnccl.so.2"), "x");
        Files.createDirectories(site.resolve("nvidia_nccl_cu13-2.28.9.dist-info"));
        assertThat(NativeLibraries.ncclVersionOf(lib.resolve("libnccl.so.2"))).isEqualTo(22809);
    }
}
