package io.fsdp4j.cuda;

import static io.fsdp4j.cuda.Native.INT;
import static io.fsdp4j.cuda.Native.LONG;
import static io.fsdp4j.cuda.Native.PTR;
import static io.fsdp4j.cuda.Native.lazy;

import io.fsdp4j.UserError;
import io.fsdp4j.cuda.NativeLibraries.Library;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * The CUDA runtime API ({@code libcudart}), and the few driver-API calls ({@code libcuda}) that the runtime lacks:
 * devices, memory, copies, streams, events. Device pointers, streams and events are {@code long} handles (see
 * {@link CudaStream} and {@link CudaEvent} for owning wrappers). The current device is per host thread: call
 * {@link #setDevice} first in every thread that works on a GPU.
 */
@SuppressWarnings("restricted") // the native layer: loading libraries and making downcalls is its job
public final class Cuda {
    private Cuda() {}

    /** cudaMemcpyKind. */
    private static final int H2D = 1, D2H = 2, D2D = 3;
    /** cudaDeviceAttr. */
    private static final int ATTR_SM_COUNT = 16, ATTR_CC_MAJOR = 75, ATTR_CC_MINOR = 76, ATTR_SMEM_OPTIN = 97;
    private static final int STREAM_NON_BLOCKING = 1, EVENT_DISABLE_TIMING = 2;
    /** The legacy default stream (handle 0): what the synchronous copies use, then wait for. */
    private static final long LEGACY_STREAM = 0L;
    private static final int ERROR_INSUFFICIENT_DRIVER = 35, ERROR_NOT_READY = 600;

    // ---- runtime functions --------------------------------------------------------------------------
    private static final Library RT = Library.CUDART;
    private static final MethodHandle cudaGetDeviceCount = lazy(RT, "cudaGetDeviceCount", INT, PTR);
    private static final MethodHandle cudaSetDevice = lazy(RT, "cudaSetDevice", INT, INT);
    private static final MethodHandle cudaGetDevice = lazy(RT, "cudaGetDevice", INT, PTR);
    private static final MethodHandle cudaDeviceGetAttribute = lazy(RT, "cudaDeviceGetAttribute", INT, PTR, INT, INT);
    private static final MethodHandle cudaMalloc = lazy(RT, "cudaMalloc", INT, PTR, LONG);
    private static final MethodHandle cudaFree = lazy(RT, "cudaFree", INT, LONG);
    private static final MethodHandle cudaMallocHost = lazy(RT, "cudaMallocHost", INT, PTR, LONG);
    private static final MethodHandle cudaFreeHost = lazy(RT, "cudaFreeHost", INT, LONG);
    private static final MethodHandle cudaMemcpy = lazy(RT, "cudaMemcpy", INT, LONG, LONG, LONG, INT);
    private static final MethodHandle cudaMemcpyAsync = lazy(RT, "cudaMemcpyAsync", INT, LONG, LONG, LONG, INT, LONG);
    private static final MethodHandle cudaMemsetAsync = lazy(RT, "cudaMemsetAsync", INT, LONG, INT, LONG, LONG);
    private static final MethodHandle cudaStreamCreateWithFlags = lazy(RT, "cudaStreamCreateWithFlags", INT, PTR, INT);
    private static final MethodHandle cudaStreamDestroy = lazy(RT, "cudaStreamDestroy", INT, LONG);
    private static final MethodHandle cudaStreamSynchronize = lazy(RT, "cudaStreamSynchronize", INT, LONG);
    private static final MethodHandle cudaStreamWaitEvent = lazy(RT, "cudaStreamWaitEvent", INT, LONG, LONG, INT);
    private static final MethodHandle cudaEventCreateWithFlags = lazy(RT, "cudaEventCreateWithFlags", INT, PTR, INT);
    private static final MethodHandle cudaEventRecord = lazy(RT, "cudaEventRecord", INT, LONG, LONG);
    private static final MethodHandle cudaEventSynchronize = lazy(RT, "cudaEventSynchronize", INT, LONG);
    private static final MethodHandle cudaEventQuery = lazy(RT, "cudaEventQuery", INT, LONG);
    private static final MethodHandle cudaEventElapsedTime = lazy(RT, "cudaEventElapsedTime", INT, PTR, LONG, LONG);
    private static final MethodHandle cudaEventDestroy = lazy(RT, "cudaEventDestroy", INT, LONG);
    private static final MethodHandle cudaDeviceSynchronize = lazy(RT, "cudaDeviceSynchronize", INT);
    private static final MethodHandle cudaMemGetInfo = lazy(RT, "cudaMemGetInfo", INT, PTR, PTR);
    private static final MethodHandle cudaDriverGetVersion = lazy(RT, "cudaDriverGetVersion", INT, PTR);
    private static final MethodHandle cudaRuntimeGetVersion = lazy(RT, "cudaRuntimeGetVersion", INT, PTR);
    private static final MethodHandle cudaGetErrorString = lazy(RT, "cudaGetErrorString", PTR, INT);
    private static final MethodHandle cudaGetErrorName = lazy(RT, "cudaGetErrorName", PTR, INT);
    private static final MethodHandle cudaGetLastError = lazy(RT, "cudaGetLastError", INT);

    // ---- driver functions ---------------------------------------------------------------------------
    private static final Library DRV = Library.DRIVER;
    private static final MethodHandle cuInit = lazy(DRV, "cuInit", INT, INT);
    private static final MethodHandle cuDeviceGet = lazy(DRV, "cuDeviceGet", INT, PTR, INT);
    private static final MethodHandle cuDeviceGetName = lazy(DRV, "cuDeviceGetName", INT, PTR, INT, INT);
    private static final MethodHandle cuDeviceTotalMem = lazy(DRV, "cuDeviceTotalMem_v2", INT, PTR, INT);
    private static final MethodHandle cuCtxGetCurrent = lazy(DRV, "cuCtxGetCurrent", INT, PTR);
    private static final MethodHandle cuGetErrorString = lazy(DRV, "cuGetErrorString", INT, INT, PTR);
    private static final MethodHandle cuGetErrorName = lazy(DRV, "cuGetErrorName", INT, INT, PTR);

    private static volatile boolean driverInitialized;

    /** What {@link #properties} reports about a device. */
    public record DeviceProperties(int device, String name, int major, int minor, int smCount, long totalMemory,
                                   int maxSharedMemoryPerBlockOptin) {
        /** The NVRTC/nvcc architecture name, e.g. {@code sm_90}. */
        public String arch() {
            return "sm_" + major + minor;
        }

        @Override
        public String toString() {
            return "%d: %s, %s, %d SMs, %.1f GiB, %d KiB shared/block".formatted(device, name, arch(), smCount,
                    totalMemory / (double) (1L << 30), maxSharedMemoryPerBlockOptin / 1024);
        }
    }

    /** Free and total device memory of the current device, in bytes. */
    public record MemInfo(long free, long total) {}

    // ---- devices ------------------------------------------------------------------------------------

    /** The number of visible devices; 0 (not an error) when the driver sees none. */
    public static int deviceCount() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(INT);
            int status = (int) cudaGetDeviceCount.invokeExact(out);
            if (status == 100) { // cudaErrorNoDevice
                clearLastError();
                return 0;
            }
            check("cudaGetDeviceCount", status);
            return out.get(INT, 0);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** Makes {@code device} current for the calling thread (and its primary context, for driver calls). */
    public static void setDevice(int device) {
        try {
            check("cudaSetDevice(" + device + ")", (int) cudaSetDevice.invokeExact(device));
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** The calling thread's current device. */
    public static int getDevice() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(INT);
            check("cudaGetDevice", (int) cudaGetDevice.invokeExact(out));
            return out.get(INT, 0);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public static DeviceProperties properties(int device) {
        initDriver();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment dev = arena.allocate(INT);
            checkDriver("cuDeviceGet", (int) cuDeviceGet.invokeExact(dev, device));
            int handle = dev.get(INT, 0);
            MemorySegment name = arena.allocate(256);
            checkDriver("cuDeviceGetName", (int) cuDeviceGetName.invokeExact(name, 256, handle));
            MemorySegment bytes = arena.allocate(LONG);
            checkDriver("cuDeviceTotalMem", (int) cuDeviceTotalMem.invokeExact(bytes, handle));
            return new DeviceProperties(device, name.getString(0), attribute(ATTR_CC_MAJOR, device),
                    attribute(ATTR_CC_MINOR, device), attribute(ATTR_SM_COUNT, device), bytes.get(LONG, 0),
                    attribute(ATTR_SMEM_OPTIN, device));
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** cudaDeviceGetAttribute; {@code attribute} is a cudaDeviceAttr value. */
    public static int attribute(int attribute, int device) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(INT);
            check("cudaDeviceGetAttribute(" + attribute + ")", (int) cudaDeviceGetAttribute.invokeExact(out, attribute, device));
            return out.get(INT, 0);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public static void deviceSynchronize() {
        try {
            check("cudaDeviceSynchronize", (int) cudaDeviceSynchronize.invokeExact());
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public static MemInfo memGetInfo() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment free = arena.allocate(LONG), total = arena.allocate(LONG);
            check("cudaMemGetInfo", (int) cudaMemGetInfo.invokeExact(free, total));
            return new MemInfo(free.get(LONG, 0), total.get(LONG, 0));
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    // ---- versions -----------------------------------------------------------------------------------

    /** The CUDA version the driver supports, e.g. 13000 for 13.0; 0 when no driver is installed. */
    public static int driverVersion() {
        return version(cudaDriverGetVersion, "cudaDriverGetVersion");
    }

    /** The version of the CUDA runtime library loaded, e.g. 13000. */
    public static int runtimeVersion() {
        return version(cudaRuntimeGetVersion, "cudaRuntimeGetVersion");
    }

    private static int version(MethodHandle handle, String name) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(INT);
            check(name, (int) handle.invokeExact(out));
            return out.get(INT, 0);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** "13.0" for 13000. */
    public static String versionString(int version) {
        return version / 1000 + "." + version % 1000 / 10;
    }

    /** A {@link UserError} unless the driver supports the loaded runtime's CUDA version. */
    public static void checkDriverVersion() {
        int driver = driverVersion(), runtime = runtimeVersion();
        if (driver < runtime) {
            throw new UserError(driverTooOld(driver, runtime));
        }
    }

    private static String driverTooOld(int driver, int runtime) {
        String loaded = NativeLibraries.find(RT).map(Object::toString).orElse("libcudart");
        return (driver == 0 ? "no NVIDIA driver is installed" : "the NVIDIA driver supports CUDA " + versionString(driver))
                + " but the CUDA runtime found (" + loaded + ") is CUDA " + versionString(runtime)
                + ": install a driver for CUDA " + versionString(runtime) + " or newer, or set "
                + NativeLibraries.ENV + " to a folder with a CUDA runtime the driver supports";
    }

    // ---- memory -------------------------------------------------------------------------------------

    /** cudaMalloc on the current device; see {@link DeviceAllocator} for the caching allocator. */
    public static long malloc(long bytes) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(PTR);
            check("cudaMalloc(" + bytes + " bytes)", (int) cudaMalloc.invokeExact(out, bytes));
            return out.get(LONG, 0);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public static void free(long devicePointer) {
        try {
            check("cudaFree", (int) cudaFree.invokeExact(devicePointer));
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** Page-locked host memory (fast and truly asynchronous copies); free with {@link #freeHost}. */
    public static MemorySegment mallocHost(long bytes) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(PTR);
            check("cudaMallocHost(" + bytes + " bytes)", (int) cudaMallocHost.invokeExact(out, bytes));
            return MemorySegment.ofAddress(out.get(LONG, 0)).reinterpret(bytes);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public static void freeHost(MemorySegment pinned) {
        try {
            check("cudaFreeHost", (int) cudaFreeHost.invokeExact(pinned.address()));
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /**
     * Host to device, complete when this returns. {@code src} must be native (off-heap) memory. (A plain
     * {@code cudaMemcpy} from pageable memory may return before its DMA lands, and fsdp4j's streams are non-blocking,
     * so work queued on them next could read the old bytes: the copy goes on the legacy stream, which is then waited
     * for.)
     */
    public static void copyToDevice(long dst, MemorySegment src, long bytes) {
        memcpyAsync("cudaMemcpyAsync(H2D)", dst, host(src, bytes), bytes, H2D, LEGACY_STREAM);
        streamSynchronize(LEGACY_STREAM);
    }

    /** Device to host, synchronous. {@code dst} must be native (off-heap) memory. */
    public static void copyToHost(MemorySegment dst, long src, long bytes) {
        memcpy("cudaMemcpy(D2H)", host(dst, bytes), src, bytes, D2H);
    }

    /** Device to device, complete when this returns (a plain {@code cudaMemcpy} D2D does not wait for it). */
    public static void copyOnDevice(long dst, long src, long bytes) {
        memcpyAsync("cudaMemcpyAsync(D2D)", dst, src, bytes, D2D, LEGACY_STREAM);
        streamSynchronize(LEGACY_STREAM);
    }

    /** Host to device on {@code stream}; {@code src} must stay untouched until the stream passes the copy. */
    public static void copyToDeviceAsync(long dst, MemorySegment src, long bytes, long stream) {
        memcpyAsync("cudaMemcpyAsync(H2D)", dst, host(src, bytes), bytes, H2D, stream);
    }

    /** Device to host on {@code stream}; {@code dst} holds the data once the stream passes the copy. */
    public static void copyToHostAsync(MemorySegment dst, long src, long bytes, long stream) {
        memcpyAsync("cudaMemcpyAsync(D2H)", host(dst, bytes), src, bytes, D2H, stream);
    }

    /** Device to device on {@code stream}. */
    public static void copyOnDeviceAsync(long dst, long src, long bytes, long stream) {
        OpTimeline.around("memcpy device to device", stream,
                () -> memcpyAsync("cudaMemcpyAsync(D2D)", dst, src, bytes, D2D, stream));
    }

    /** Sets {@code bytes} bytes at {@code dst} to {@code value} (its low byte) on {@code stream}. */
    public static void memsetAsync(long dst, int value, long bytes, long stream) {
        OpTimeline.around("memset", stream, () -> {
            try {
                check("cudaMemsetAsync", (int) cudaMemsetAsync.invokeExact(dst, value, bytes, stream));
            } catch (Throwable t) {
                throw Native.rethrow(t);
            }
        });
    }

    private static long host(MemorySegment segment, long bytes) {
        if (!segment.isNative()) {
            throw new IllegalArgumentException("host memory for a CUDA copy must be native (allocated by an Arena)");
        }
        if (segment.byteSize() < bytes) {
            throw new IndexOutOfBoundsException("copy of " + bytes + " bytes with a host segment of " + segment.byteSize());
        }
        return segment.address();
    }

    private static void memcpy(String name, long dst, long src, long bytes, int kind) {
        try {
            check(name, (int) cudaMemcpy.invokeExact(dst, src, bytes, kind));
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    private static void memcpyAsync(String name, long dst, long src, long bytes, int kind, long stream) {
        try {
            check(name, (int) cudaMemcpyAsync.invokeExact(dst, src, bytes, kind, stream));
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    // ---- streams and events -------------------------------------------------------------------------

    /** A new stream that does not synchronise with the legacy default stream. */
    public static long streamCreate() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(PTR);
            check("cudaStreamCreateWithFlags", (int) cudaStreamCreateWithFlags.invokeExact(out, STREAM_NON_BLOCKING));
            return out.get(LONG, 0);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public static void streamDestroy(long stream) {
        call("cudaStreamDestroy", cudaStreamDestroy, stream);
    }

    public static void streamSynchronize(long stream) {
        call("cudaStreamSynchronize", cudaStreamSynchronize, stream);
    }

    /** Work queued on {@code stream} after this waits for {@code event}'s last record; the host does not wait. */
    public static void streamWaitEvent(long stream, long event) {
        try {
            check("cudaStreamWaitEvent", (int) cudaStreamWaitEvent.invokeExact(stream, event, 0));
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** A new event; {@code timing} false makes a lighter event for ordering only. */
    public static long eventCreate(boolean timing) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(PTR);
            check("cudaEventCreateWithFlags",
                    (int) cudaEventCreateWithFlags.invokeExact(out, timing ? 0 : EVENT_DISABLE_TIMING));
            return out.get(LONG, 0);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public static void eventRecord(long event, long stream) {
        try {
            check("cudaEventRecord", (int) cudaEventRecord.invokeExact(event, stream));
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public static void eventSynchronize(long event) {
        call("cudaEventSynchronize", cudaEventSynchronize, event);
    }

    /** Whether the work before the event's last record has finished (never blocks). */
    public static boolean eventQuery(long event) {
        try {
            int status = (int) cudaEventQuery.invokeExact(event);
            if (status == ERROR_NOT_READY) {
                return false;
            }
            check("cudaEventQuery", status);
            return true;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** Milliseconds between two recorded (and completed) timing events. */
    public static float eventElapsedMs(long start, long end) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(ValueLayout.JAVA_FLOAT);
            check("cudaEventElapsedTime", (int) cudaEventElapsedTime.invokeExact(out, start, end));
            return out.get(ValueLayout.JAVA_FLOAT, 0);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public static void eventDestroy(long event) {
        call("cudaEventDestroy", cudaEventDestroy, event);
    }

    private static void call(String name, MethodHandle handle, long argument) {
        try {
            check(name, (int) handle.invokeExact(argument));
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    // ---- driver API ---------------------------------------------------------------------------------

    /** cuInit, once per process (the runtime does it too; driver calls need it before anything else). */
    static void initDriver() {
        if (driverInitialized) {
            return;
        }
        synchronized (Cuda.class) {
            if (!driverInitialized) {
                try {
                    checkDriver("cuInit", (int) cuInit.invokeExact(0));
                } catch (Throwable t) {
                    throw Native.rethrow(t);
                }
                driverInitialized = true;
            }
        }
    }

    /**
     * Makes sure the calling thread has a current context for driver-API calls: the primary context of its
     * current device, which {@link #setDevice} (or any runtime call) makes current.
     */
    static void ensureContext() {
        initDriver();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment ctx = arena.allocate(PTR);
            checkDriver("cuCtxGetCurrent", (int) cuCtxGetCurrent.invokeExact(ctx));
            if (ctx.get(LONG, 0) == 0) {
                setDevice(getDevice()); // makes the device's primary context current in this thread
                free(0L); // a no-op that initialises the runtime (and so the context) where setDevice did not
            }
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    // ---- status checks ------------------------------------------------------------------------------

    /** Throws a {@link CudaException} (a {@link UserError} for a driver too old) unless {@code status} is 0. */
    static void check(String function, int status) {
        if (status == 0) {
            return;
        }
        if (status == ERROR_INSUFFICIENT_DRIVER) {
            throw new UserError(driverTooOld(driverVersion(), runtimeVersion()));
        }
        throw new CudaException(function, status, errorString(status));
    }

    /** "out of memory (cudaErrorMemoryAllocation = 2)". */
    static String errorString(int status) {
        try {
            return Native.string((MemorySegment) cudaGetErrorString.invokeExact(status)) + " ("
                    + Native.string((MemorySegment) cudaGetErrorName.invokeExact(status)) + " = " + status + ")";
        } catch (Throwable t) {
            return "cudaError_t " + status;
        }
    }

    /** Clears the runtime's sticky last error after a failure that was handled. */
    static void clearLastError() {
        try {
            int ignored = (int) cudaGetLastError.invokeExact();
        } catch (Throwable ignored) {
            // nothing to clear
        }
    }

    /** As {@link #check}, for a driver-API CUresult. */
    static void checkDriver(String function, int status) {
        if (status == 0) {
            return;
        }
        String text = "CUresult " + status;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment str = arena.allocate(PTR), name = arena.allocate(PTR);
            if ((int) cuGetErrorString.invokeExact(status, str) == 0 && (int) cuGetErrorName.invokeExact(status, name) == 0) {
                text = Native.string(str.get(PTR, 0)) + " (" + Native.string(name.get(PTR, 0)) + " = " + status + ")";
            }
        } catch (Throwable ignored) {
            // keep the number
        }
        throw new CudaException(function, status, text);
    }
}
