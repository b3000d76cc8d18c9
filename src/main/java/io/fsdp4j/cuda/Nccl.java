package io.fsdp4j.cuda;

import static io.fsdp4j.cuda.Native.INT;
import static io.fsdp4j.cuda.Native.LONG;
import static io.fsdp4j.cuda.Native.PTR;
import static io.fsdp4j.cuda.Native.lazy;

import io.fsdp4j.cuda.NativeLibraries.Library;
import io.fsdp4j.tensor.DType;
import java.lang.foreign.Arena;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * NCCL: unique ids, communicator creation and group calls; the collectives are on {@link NcclComm}. One rank per
 * GPU; ranks of one process are threads, each of which calls {@link Cuda#setDevice} and then {@link #initRank}
 * with the shared id, concurrently (initRank blocks until every rank has joined).
 */
public final class Nccl {
    private Nccl() {}

    /** ncclUniqueId: 128 opaque bytes, passed by value. */
    static final int UNIQUE_ID_BYTES = 128;
    static final StructLayout UNIQUE_ID = MemoryLayout.structLayout(
            MemoryLayout.sequenceLayout(UNIQUE_ID_BYTES, ValueLayout.JAVA_BYTE).withName("internal"));

    static final Library LIB = Library.NCCL;
    private static final MethodHandle ncclGetVersion = lazy(LIB, "ncclGetVersion", INT, PTR);
    private static final MethodHandle ncclGetUniqueId = lazy(LIB, "ncclGetUniqueId", INT, PTR);
    private static final MethodHandle ncclCommInitRank = lazy(LIB, "ncclCommInitRank", INT, PTR, INT, UNIQUE_ID, INT);
    private static final MethodHandle ncclGroupStart = lazy(LIB, "ncclGroupStart", INT);
    private static final MethodHandle ncclGroupEnd = lazy(LIB, "ncclGroupEnd", INT);
    private static final MethodHandle ncclGetErrorString = lazy(LIB, "ncclGetErrorString", PTR, INT);
    private static final MethodHandle ncclGetLastError = lazy(LIB, "ncclGetLastError", PTR, LONG);

    /** ncclDataType_t. */
    public enum DataType {
        INT8(0), UINT8(1), INT32(2), UINT32(3), INT64(4), UINT64(5), FLOAT16(6), FLOAT32(7), FLOAT64(8), BFLOAT16(9);

        final int code;

        DataType(int code) {
            this.code = code;
        }

        public static DataType of(DType dtype) {
            return switch (dtype) {
                case F32 -> FLOAT32;
                case BF16 -> BFLOAT16;
                case F16 -> FLOAT16;
                case I32 -> INT32;
            };
        }
    }

    /** ncclRedOp_t. */
    public enum RedOp {
        SUM(0), PROD(1), MAX(2), MIN(3), AVG(4);

        final int code;

        RedOp(int code) {
            this.code = code;
        }
    }

    /** NCCL_VERSION_CODE of the library loaded, e.g. 22809 for 2.28.9. */
    public static int version() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(INT);
            check("ncclGetVersion", (int) ncclGetVersion.invokeExact(out), 0);
            return out.get(INT, 0);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** "2.28.9" for 22809. */
    public static String versionString(int code) {
        return code / 10000 + "." + code / 100 % 100 + "." + code % 100;
    }

    /** A new id for one communicator: made by one rank and given to all (in a process, or through rendezvous). */
    public static byte[] uniqueId() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment id = arena.allocate(UNIQUE_ID);
            check("ncclGetUniqueId", (int) ncclGetUniqueId.invokeExact(id), 0);
            return id.toArray(ValueLayout.JAVA_BYTE);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /**
     * Joins communicator {@code id} as {@code rank} of {@code size}, on the calling thread's current device.
     * Blocks until all ranks have joined: call it from every rank's thread at once (or within a group).
     */
    public static NcclComm initRank(byte[] id, int size, int rank) {
        if (id.length != UNIQUE_ID_BYTES) {
            throw new IllegalArgumentException("an NCCL unique id has " + UNIQUE_ID_BYTES + " bytes, not " + id.length);
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(PTR);
            MemorySegment idValue = arena.allocate(UNIQUE_ID);
            idValue.copyFrom(MemorySegment.ofArray(id));
            check("ncclCommInitRank(rank " + rank + " of " + size + ")",
                    (int) ncclCommInitRank.invokeExact(out, size, idValue, rank), 0);
            return new NcclComm(out.get(LONG, 0), rank, size, Cuda.getDevice());
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** Starts a group: the collectives until {@link #groupEnd} are launched together. */
    public static void groupStart() {
        try {
            check("ncclGroupStart", (int) ncclGroupStart.invokeExact(), 0);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public static void groupEnd() {
        try {
            check("ncclGroupEnd", (int) ncclGroupEnd.invokeExact(), 0);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** Throws a {@link CudaException} with NCCL's error string (and its last error for {@code comm}, if any). */
    static void check(String function, int status, long comm) {
        if (status == 0) {
            return;
        }
        String text = "ncclResult_t " + status;
        try {
            text = Native.string((MemorySegment) ncclGetErrorString.invokeExact(status)) + " (" + text + ")";
            String last = Native.string((MemorySegment) ncclGetLastError.invokeExact(comm));
            if (!last.isBlank()) {
                text += ": " + last.strip();
            }
        } catch (Throwable t) {
            // keep what we have (ncclGetLastError is missing before NCCL 2.13)
        }
        throw new CudaException(function, status, text);
    }
}
