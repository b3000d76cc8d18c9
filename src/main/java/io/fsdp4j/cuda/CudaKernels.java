package io.fsdp4j.cuda;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * fsdp4j's own CUDA kernels, from the sources under {@code src/main/resources/kernels} (each file's header gives
 * every kernel's launch contract): compiled for this device by NVRTC on first use (cached on disk by
 * {@link Nvrtc}) and loaded once per backend. What the files share is one header, {@code common.cuh}, handed to
 * NVRTC with every program ({@link #program}).
 */
public final class CudaKernels implements AutoCloseable {
    /** The headers a kernel file may include ({@code #include "name"}), all handed to NVRTC with each file. */
    static final List<String> HEADERS = List.of("common.cuh");

    private final Map<String, CudaModule> modules = new HashMap<>();
    private final Map<String, Kernel> kernels = new HashMap<>();
    private final Map<Kernel, Integer> sharedLimits = new HashMap<>();

    /** Kernel {@code name} of source file {@code file} (without .cu). */
    public synchronized Kernel get(String file, String name) {
        return kernels.computeIfAbsent(file + "/" + name, k -> module(file).kernel(name));
    }

    /** Kernel with its dynamic shared-memory limit raised to at least {@code bytes} (needed above 48 KiB). */
    public synchronized Kernel withShared(String file, String name, int bytes) {
        Kernel k = get(file, name);
        if (bytes > 48 * 1024 && sharedLimits.getOrDefault(k, 0) < bytes) {
            k.setMaxDynamicSharedMemory(bytes);
            sharedLimits.put(k, bytes);
        }
        return k;
    }

    private CudaModule module(String file) {
        return modules.computeIfAbsent(file, f -> CudaModule.load(Nvrtc.compile(program(f), options(f))));
    }

    /**
     * How file {@code file} compiles: for this device's architecture, but files named {@code *_sm90} (wgmma,
     * setmaxnreg: Hopper's own instructions) for sm_90a, which only a GPU of compute capability 9.0 runs.
     */
    static Nvrtc.Options options(String file) {
        Nvrtc.Options device = Nvrtc.Options.forDevice(Cuda.getDevice());
        return file.endsWith("_sm90")
                ? new Nvrtc.Options("sm_90a", device.fastMath(), device.cudaIncludes(), device.extra())
                : device;
    }

    /** Kernel file {@code file} (without .cu) with its headers, exactly as NVRTC receives it. */
    static Nvrtc.Program program(String file) {
        var headers = new LinkedHashMap<String, String>();
        for (String header : HEADERS) {
            headers.put(header, resource(header));
        }
        return new Nvrtc.Program(file + ".cu", resource(file + ".cu"), headers);
    }

    private static String resource(String name) {
        try (InputStream in = CudaKernels.class.getResourceAsStream("/kernels/" + name)) {
            if (in == null) {
                throw new IllegalStateException("kernel source kernels/" + name + " is missing from the build");
            }
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Override
    public synchronized void close() {
        modules.values().forEach(CudaModule::close);
        modules.clear();
        kernels.clear();
    }
}
