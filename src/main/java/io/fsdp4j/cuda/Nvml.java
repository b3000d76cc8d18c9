package io.fsdp4j.cuda;

import static io.fsdp4j.cuda.Native.INT;
import static io.fsdp4j.cuda.Native.LONG;
import static io.fsdp4j.cuda.Native.PTR;

import io.fsdp4j.cuda.NativeLibraries.Library;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.util.ArrayList;
import java.util.List;

/**
 * The few NVML (NVIDIA management library, shipped with the driver) calls {@code fsdp4j doctor} makes: the driver's
 * version, and for every GPU of the machine (whatever {@code CUDA_VISIBLE_DEVICES} hides from CUDA) its memory
 * and the processes holding some of it, and its active NVLink links. NVML numbers GPUs in PCI order, which may
 * differ from CUDA's. Each call needs {@link #init} first; {@link #shutdown} pairs with it.
 */
public final class Nvml {
    private static final int SUCCESS = 0, INSUFFICIENT_SIZE = 7;
    private static final int MAX_NVLINKS = 18; // NVML_NVLINK_MAX_LINKS
    private static final long PROCESS_INFO_BYTES = 24; // nvmlProcessInfo_t: uint pid, u64 used, uint gi, uint ci
    private static final long NOT_AVAILABLE = -1L; // NVML_VALUE_NOT_AVAILABLE (unsigned long long all ones)

    private static final MethodHandle nvmlInit = Native.lazy(Library.NVML, "nvmlInit_v2", INT);
    private static final MethodHandle nvmlShutdown = Native.lazy(Library.NVML, "nvmlShutdown", INT);
    private static final MethodHandle nvmlErrorString = Native.lazy(Library.NVML, "nvmlErrorString", PTR, INT);
    private static final MethodHandle nvmlSystemGetDriverVersion =
            Native.lazy(Library.NVML, "nvmlSystemGetDriverVersion", INT, PTR, INT);
    private static final MethodHandle nvmlDeviceGetCount = Native.lazy(Library.NVML, "nvmlDeviceGetCount_v2", INT, PTR);
    private static final MethodHandle nvmlDeviceGetHandleByIndex =
            Native.lazy(Library.NVML, "nvmlDeviceGetHandleByIndex_v2", INT, INT, PTR);
    private static final MethodHandle nvmlDeviceGetName = Native.lazy(Library.NVML, "nvmlDeviceGetName", INT, PTR, PTR, INT);
    private static final MethodHandle nvmlDeviceGetMemoryInfo =
            Native.lazy(Library.NVML, "nvmlDeviceGetMemoryInfo", INT, PTR, PTR);
    private static final MethodHandle nvmlDeviceGetComputeRunningProcesses =
            Native.lazy(Library.NVML, "nvmlDeviceGetComputeRunningProcesses_v3", INT, PTR, PTR, PTR);
    private static final MethodHandle nvmlDeviceGetNvLinkState =
            Native.lazy(Library.NVML, "nvmlDeviceGetNvLinkState", INT, PTR, INT, PTR);

    private Nvml() {}

    /** A process using a GPU; {@code usedBytes} -1 when NVML may not tell (another container, no permission). */
    public record GpuProcess(int pid, long usedBytes) {}

    /** One GPU as NVML sees it; {@code nvlinks}: active NVLink links (0 without NVLink). */
    public record Gpu(int index, String name, long totalBytes, long freeBytes, long usedBytes,
                      List<GpuProcess> processes, int nvlinks) {}

    public static void init() {
        call("nvmlInit_v2", () -> (int) nvmlInit.invokeExact());
    }

    public static void shutdown() {
        call("nvmlShutdown", () -> (int) nvmlShutdown.invokeExact());
    }

    /** The driver's version, e.g. {@code 580.159.04}. */
    public static String driverVersion() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment text = arena.allocate(96);
            call("nvmlSystemGetDriverVersion", () -> (int) nvmlSystemGetDriverVersion.invokeExact(text, 96));
            return text.getString(0);
        }
    }

    /** Every GPU of the machine, in NVML's order. */
    public static List<Gpu> gpus() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment count = arena.allocate(INT);
            call("nvmlDeviceGetCount_v2", () -> (int) nvmlDeviceGetCount.invokeExact(count));
            List<Gpu> gpus = new ArrayList<>();
            for (int i = 0; i < count.get(INT, 0); i++) {
                gpus.add(gpu(arena, i));
            }
            return gpus;
        }
    }

    private static Gpu gpu(Arena arena, int index) {
        MemorySegment handleOut = arena.allocate(PTR);
        call("nvmlDeviceGetHandleByIndex_v2", () -> (int) nvmlDeviceGetHandleByIndex.invokeExact(index, handleOut));
        MemorySegment device = handleOut.get(PTR, 0);
        MemorySegment name = arena.allocate(96);
        call("nvmlDeviceGetName", () -> (int) nvmlDeviceGetName.invokeExact(device, name, 96));
        MemorySegment memory = arena.allocate(3 * LONG.byteSize(), 8); // nvmlMemory_t: total, free, used
        call("nvmlDeviceGetMemoryInfo", () -> (int) nvmlDeviceGetMemoryInfo.invokeExact(device, memory));
        return new Gpu(index, name.getString(0), memory.get(LONG, 0), memory.get(LONG, 8), memory.get(LONG, 16),
                processes(arena, device), nvlinks(arena, device));
    }

    private static List<GpuProcess> processes(Arena arena, MemorySegment device) {
        int capacity = 64;
        while (true) {
            MemorySegment count = arena.allocate(INT);
            count.set(INT, 0, capacity);
            MemorySegment infos = arena.allocate(PROCESS_INFO_BYTES * capacity, 8);
            int status;
            try {
                status = (int) nvmlDeviceGetComputeRunningProcesses.invokeExact(device, count, infos);
            } catch (Throwable t) {
                throw Native.rethrow(t);
            }
            if (status == INSUFFICIENT_SIZE && capacity < 4096) {
                capacity = Math.max(capacity * 2, count.get(INT, 0));
                continue;
            }
            check("nvmlDeviceGetComputeRunningProcesses_v3", status);
            List<GpuProcess> processes = new ArrayList<>();
            for (int i = 0; i < count.get(INT, 0); i++) {
                long used = infos.get(LONG, i * PROCESS_INFO_BYTES + 8);
                processes.add(new GpuProcess(infos.get(INT, i * PROCESS_INFO_BYTES), used == NOT_AVAILABLE ? -1 : used));
            }
            return processes;
        }
    }

    /** Links reported active; links NVML says do not exist (or cannot be asked about) count as inactive. */
    private static int nvlinks(Arena arena, MemorySegment device) {
        MemorySegment state = arena.allocate(INT);
        int active = 0;
        for (int link = 0; link < MAX_NVLINKS; link++) {
            int status;
            try {
                status = (int) nvmlDeviceGetNvLinkState.invokeExact(device, link, state);
            } catch (Throwable t) {
                throw Native.rethrow(t);
            }
            if (status == SUCCESS && state.get(INT, 0) == 1) {
                active++;
            }
        }
        return active;
    }

    private interface Call {
        int run() throws Throwable;
    }

    private static void call(String function, Call call) {
        int status;
        try {
            status = call.run();
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
        check(function, status);
    }

    private static void check(String function, int status) {
        if (status != SUCCESS) {
            String message;
            try {
                message = Native.string((MemorySegment) nvmlErrorString.invokeExact(status));
            } catch (Throwable t) {
                message = "error " + status;
            }
            throw new CudaException(function, status, message + " (nvmlReturn_t = " + status + ")");
        }
    }
}
