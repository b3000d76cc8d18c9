package io.fsdp4j.cuda;

import static io.fsdp4j.cuda.Native.INT;
import static io.fsdp4j.cuda.Native.LONG;
import static io.fsdp4j.cuda.Native.PTR;
import static io.fsdp4j.cuda.Native.lazy;

import io.fsdp4j.cuda.NativeLibraries.Library;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

/**
 * A loaded CUBIN (driver API {@code cuModuleLoadData}) in the primary context of the calling thread's current
 * device; its {@link Kernel}s launch only on that device. Unloading it ({@link #close}) invalidates its kernels.
 */
public final class CudaModule implements AutoCloseable {
    private static final Library DRV = Library.DRIVER;
    private static final MethodHandle cuModuleLoadData = lazy(DRV, "cuModuleLoadData", INT, PTR, PTR);
    private static final MethodHandle cuModuleGetFunction = lazy(DRV, "cuModuleGetFunction", INT, PTR, LONG, PTR);
    private static final MethodHandle cuModuleUnload = lazy(DRV, "cuModuleUnload", INT, LONG);

    private final long handle;
    private final int device;
    private boolean closed;

    private CudaModule(long handle, int device) {
        this.handle = handle;
        this.device = device;
    }

    /** Loads {@code cubin} into the current device's primary context. */
    public static CudaModule load(byte[] cubin) {
        Cuda.ensureContext();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment image = arena.allocate(cubin.length + 1L, 16);
            image.copyFrom(MemorySegment.ofArray(cubin));
            MemorySegment out = arena.allocate(PTR);
            Cuda.checkDriver("cuModuleLoadData", (int) cuModuleLoadData.invokeExact(out, image));
            return new CudaModule(out.get(LONG, 0), Cuda.getDevice());
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** Compiles {@code source} with NVRTC for the current device (cached on disk) and loads it. */
    public static CudaModule compile(String source, String name) {
        return compile(Nvrtc.Program.of(source, name));
    }

    /** Compiles {@code program} (with its headers) with NVRTC for the current device (cached on disk) and loads it. */
    public static CudaModule compile(Nvrtc.Program program) {
        return load(Nvrtc.compile(program, Nvrtc.Options.forDevice(Cuda.getDevice())));
    }

    /** The {@code extern "C" __global__} function {@code name}. */
    public Kernel kernel(String name) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(PTR);
            Cuda.checkDriver("cuModuleGetFunction(" + name + ")",
                    (int) cuModuleGetFunction.invokeExact(out, handle, arena.allocateFrom(name)));
            return new Kernel(name, out.get(LONG, 0), device);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public int device() {
        return device;
    }

    @Override
    public void close() {
        if (!closed) {
            closed = true;
            try {
                Cuda.checkDriver("cuModuleUnload", (int) cuModuleUnload.invokeExact(handle));
            } catch (Throwable t) {
                throw Native.rethrow(t);
            }
        }
    }
}
