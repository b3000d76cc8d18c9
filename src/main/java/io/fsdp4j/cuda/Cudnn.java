package io.fsdp4j.cuda;

import static io.fsdp4j.cuda.Native.INT;
import static io.fsdp4j.cuda.Native.LONG;
import static io.fsdp4j.cuda.Native.PTR;
import static io.fsdp4j.cuda.Native.lazy;

import io.fsdp4j.cuda.NativeLibraries.Library;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.ArrayList;
import java.util.List;

/**
 * cuDNN's backend (graph) API: a handle on the current device, and the descriptors a graph is made of. Descriptors
 * are {@code long} addresses (the API's opaque pointers); attributes are set from host memory; every status is
 * checked and a failure is a {@link CudaException} naming the call, cuDNN's status and its last error message.
 * A {@link Descriptors} owns the descriptors of one graph and destroys them together.
 *
 * <p>Values of the enums below are cuDNN 9's ({@code cudnn_graph.h}), which keeps them from release to release.
 */
public final class Cudnn implements AutoCloseable {
    private static final Library LIB = Library.CUDNN;
    private static final MethodHandle cudnnGetVersion = lazy(LIB, "cudnnGetVersion", LONG);
    private static final MethodHandle cudnnGetErrorString = lazy(LIB, "cudnnGetErrorString", PTR, INT);
    private static final MethodHandle cudnnGetLastErrorString = lazy(LIB, "cudnnGetLastErrorString", null, PTR, LONG);
    private static final MethodHandle cudnnCreate = lazy(LIB, "cudnnCreate", INT, PTR);
    private static final MethodHandle cudnnDestroy = lazy(LIB, "cudnnDestroy", INT, LONG);
    private static final MethodHandle cudnnSetStream = lazy(LIB, "cudnnSetStream", INT, LONG, LONG);
    private static final MethodHandle cudnnBackendCreateDescriptor = lazy(LIB, "cudnnBackendCreateDescriptor",
            INT, INT, PTR);
    private static final MethodHandle cudnnBackendDestroyDescriptor = lazy(LIB, "cudnnBackendDestroyDescriptor",
            INT, LONG);
    private static final MethodHandle cudnnBackendFinalize = lazy(LIB, "cudnnBackendFinalize", INT, LONG);
    private static final MethodHandle cudnnBackendSetAttribute = lazy(LIB, "cudnnBackendSetAttribute",
            INT, LONG, INT, INT, LONG, PTR);
    private static final MethodHandle cudnnBackendGetAttribute = lazy(LIB, "cudnnBackendGetAttribute",
            INT, LONG, INT, INT, LONG, PTR, PTR);
    private static final MethodHandle cudnnBackendExecute = lazy(LIB, "cudnnBackendExecute", INT, LONG, LONG, LONG);

    /** cudnnBackendDescriptorType_t. */
    public static final int POINTWISE_DESCRIPTOR = 0, ENGINE_DESCRIPTOR = 2, ENGINECFG_DESCRIPTOR = 3,
            ENGINEHEUR_DESCRIPTOR = 4, EXECUTION_PLAN_DESCRIPTOR = 5, OPERATION_POINTWISE_DESCRIPTOR = 13,
            OPERATIONGRAPH_DESCRIPTOR = 15, VARIANT_PACK_DESCRIPTOR = 16, TENSOR_DESCRIPTOR = 17,
            MATMUL_DESCRIPTOR = 18, OPERATION_MATMUL_DESCRIPTOR = 19, REDUCTION_DESCRIPTOR = 21,
            OPERATION_REDUCTION_DESCRIPTOR = 22, OPERATION_RESHAPE_DESCRIPTOR = 31;
    /** cudnnBackendAttributeName_t. */
    public static final int ATTR_POINTWISE_MODE = 0, ATTR_POINTWISE_MATH_PREC = 1, ATTR_POINTWISE_AXIS = 9,
            ATTR_ENGINEHEUR_MODE = 200, ATTR_ENGINEHEUR_OPERATION_GRAPH = 201, ATTR_ENGINEHEUR_RESULTS = 202,
            ATTR_ENGINECFG_ENGINE = 300, ATTR_EXECUTION_PLAN_HANDLE = 400, ATTR_EXECUTION_PLAN_ENGINE_CONFIG = 401,
            ATTR_EXECUTION_PLAN_WORKSPACE_SIZE = 402, ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR = 750,
            ATTR_OPERATION_POINTWISE_XDESC = 751, ATTR_OPERATION_POINTWISE_BDESC = 752,
            ATTR_OPERATION_POINTWISE_YDESC = 753, ATTR_OPERATION_POINTWISE_ALPHA1 = 754,
            ATTR_OPERATION_POINTWISE_ALPHA2 = 755, ATTR_OPERATION_POINTWISE_TDESC = 758,
            ATTR_OPERATIONGRAPH_HANDLE = 800, ATTR_OPERATIONGRAPH_OPS = 801, ATTR_TENSOR_BYTE_ALIGNMENT = 900,
            ATTR_TENSOR_DATA_TYPE = 901, ATTR_TENSOR_DIMENSIONS = 902, ATTR_TENSOR_STRIDES = 903,
            ATTR_TENSOR_UNIQUE_ID = 906, ATTR_TENSOR_IS_VIRTUAL = 907, ATTR_TENSOR_IS_BY_VALUE = 908,
            ATTR_VARIANT_PACK_UNIQUE_IDS = 1000, ATTR_VARIANT_PACK_DATA_POINTERS = 1001,
            ATTR_VARIANT_PACK_WORKSPACE = 1003, ATTR_ENGINE_GLOBAL_INDEX = 1301, ATTR_MATMUL_COMP_TYPE = 1500,
            ATTR_OPERATION_MATMUL_ADESC = 1520, ATTR_OPERATION_MATMUL_BDESC = 1521, ATTR_OPERATION_MATMUL_CDESC = 1522,
            ATTR_OPERATION_MATMUL_DESC = 1523, ATTR_REDUCTION_OPERATOR = 1600, ATTR_REDUCTION_COMP_TYPE = 1601,
            ATTR_OPERATION_REDUCTION_XDESC = 1610, ATTR_OPERATION_REDUCTION_YDESC = 1611,
            ATTR_OPERATION_REDUCTION_DESC = 1612, ATTR_OPERATION_RESHAPE_XDESC = 2200,
            ATTR_OPERATION_RESHAPE_YDESC = 2201;
    /** cudnnBackendAttributeType_t. */
    public static final int TYPE_HANDLE = 0, TYPE_DATA_TYPE = 1, TYPE_BOOLEAN = 2, TYPE_INT64 = 3, TYPE_FLOAT = 4,
            TYPE_VOID_PTR = 6, TYPE_HEUR_MODE = 8, TYPE_POINTWISE_MODE = 14, TYPE_BACKEND_DESCRIPTOR = 15,
            TYPE_REDUCTION_OPERATOR_TYPE = 18;
    /** cudnnDataType_t. */
    public static final int DATA_FLOAT = 0, DATA_INT32 = 4, DATA_BFLOAT16 = 9, DATA_BOOLEAN = 11;
    /** cudnnPointwiseMode_t. */
    public static final int POINTWISE_ADD = 0, POINTWISE_MUL = 1, POINTWISE_DIV = 6, POINTWISE_SUB = 9,
            POINTWISE_EXP = 13, POINTWISE_LOG = 15, POINTWISE_IDENTITY = 21, POINTWISE_CMP_GT = 302,
            POINTWISE_CMP_GE = 303, POINTWISE_GEN_INDEX = 501, POINTWISE_BINARY_SELECT = 601;
    /** cudnnReduceTensorOp_t. */
    public static final int REDUCE_ADD = 0, REDUCE_MAX = 3;
    /** cudnnBackendHeurMode_t. */
    public static final int HEUR_MODE_A = 3;

    private final long handle;
    private final int device;
    private long stream = -1;
    private boolean closed;

    /** A handle on the current device. */
    public Cudnn() {
        this.device = Cuda.getDevice();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(PTR);
            check("cudnnCreate", (int) cudnnCreate.invokeExact(out));
            this.handle = out.get(LONG, 0);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** Whether libcudnn.so.9 is on the search path (nothing is loaded). */
    public static boolean found() {
        return NativeLibraries.find(LIB).isPresent();
    }

    /** cudnnGetVersion: major * 10000 + minor * 100 + patch, e.g. 91400 for 9.14.0. */
    public static long version() {
        try {
            return (long) cudnnGetVersion.invokeExact();
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** The version as people write it: 9.14.0. */
    public static String versionString(long version) {
        return version / 10000 + "." + version / 100 % 100 + "." + version % 100;
    }

    public long handle() {
        return handle;
    }

    public int device() {
        return device;
    }

    /** Runs what this handle executes on {@code stream} (set only when it changes). */
    public void setStream(long stream) {
        if (stream != this.stream) {
            try {
                check("cudnnSetStream", (int) cudnnSetStream.invokeExact(handle, stream));
            } catch (Throwable t) {
                throw Native.rethrow(t);
            }
            this.stream = stream;
        }
    }

    /** cudnnBackendExecute of a finalized plan with a finalized variant pack. */
    public void execute(long plan, long variantPack) {
        try {
            check("cudnnBackendExecute", (int) cudnnBackendExecute.invokeExact(handle, plan, variantPack));
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    @Override
    public void close() {
        if (!closed) {
            closed = true;
            try {
                check("cudnnDestroy", (int) cudnnDestroy.invokeExact(handle));
            } catch (Throwable t) {
                throw Native.rethrow(t);
            }
        }
    }

    // ---- descriptors --------------------------------------------------------------------------------

    /**
     * The descriptors of one graph (and its plan), destroyed together, last made first. Not thread-safe, but may be
     * closed on another thread than the one that made it (a backend is closed where its owner is).
     */
    public static final class Descriptors implements AutoCloseable {
        private final List<Long> owned = new ArrayList<>();
        private final Arena arena = Arena.ofShared();

        /** A new descriptor of {@code type}, owned by this set. */
        public long make(int type) {
            long d = create(type);
            owned.add(d);
            return d;
        }

        /** Takes {@code descriptor} into this set (destroyed with it). */
        public long own(long descriptor) {
            owned.add(descriptor);
            return descriptor;
        }

        public void setLongs(long d, int attribute, long... values) {
            set(d, attribute, TYPE_INT64, values.length, arena.allocateFrom(ValueLayout.JAVA_LONG, values));
        }

        public void setDescriptors(long d, int attribute, long... values) {
            set(d, attribute, TYPE_BACKEND_DESCRIPTOR, values.length, arena.allocateFrom(ValueLayout.JAVA_LONG, values));
        }

        /** An attribute of an enum type (data type, pointwise mode, reduction operator, heuristics mode). */
        public void setEnum(long d, int attribute, int type, int value) {
            set(d, attribute, type, 1, arena.allocateFrom(ValueLayout.JAVA_INT, value));
        }

        public void setBoolean(long d, int attribute, boolean value) {
            set(d, attribute, TYPE_BOOLEAN, 1, arena.allocateFrom(ValueLayout.JAVA_BYTE, (byte) (value ? 1 : 0)));
        }

        public void setFloat(long d, int attribute, float value) {
            set(d, attribute, TYPE_FLOAT, 1, arena.allocateFrom(ValueLayout.JAVA_FLOAT, value));
        }

        public void setHandle(long d, int attribute, long handle) {
            set(d, attribute, TYPE_HANDLE, 1, arena.allocateFrom(ValueLayout.JAVA_LONG, handle));
        }

        @Override
        public void close() {
            for (int i = owned.size() - 1; i >= 0; i--) {
                destroy(owned.get(i));
            }
            owned.clear();
            arena.close();
        }
    }

    /** cudnnBackendCreateDescriptor; the caller destroys it ({@link #destroy}) or gives it to a {@link Descriptors}. */
    public static long create(int type) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(PTR);
            check("cudnnBackendCreateDescriptor(" + type + ")", (int) cudnnBackendCreateDescriptor.invokeExact(type, out));
            return out.get(LONG, 0);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public static void destroy(long descriptor) {
        try {
            int ignored = (int) cudnnBackendDestroyDescriptor.invokeExact(descriptor); // at teardown: nothing to do
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** cudnnBackendSetAttribute of {@code count} elements of {@code type} at {@code values}. */
    public static void set(long d, int attribute, int type, long count, MemorySegment values) {
        try {
            check("cudnnBackendSetAttribute(" + attribute + ")",
                    (int) cudnnBackendSetAttribute.invokeExact(d, attribute, type, count, values));
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** cudnnBackendFinalize; {@code what} names the descriptor in an error. */
    public static void finalize(long d, String what) {
        try {
            check("cudnnBackendFinalize(" + what + ")", (int) cudnnBackendFinalize.invokeExact(d));
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** cudnnBackendFinalize's status, unchecked (0: success): for trying engine configs one after another. */
    public static int tryFinalize(long d) {
        try {
            return (int) cudnnBackendFinalize.invokeExact(d);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /**
     * cudnnBackendGetAttribute: up to {@code capacity} elements of {@code type} into {@code out} (null with capacity
     * 0 asks for the count); returns how many there are.
     */
    public static long get(long d, int attribute, int type, long capacity, MemorySegment out) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment count = arena.allocate(LONG);
            MemorySegment values = out == null ? MemorySegment.NULL : out; // typed: invokeExact takes exact types
            check("cudnnBackendGetAttribute(" + attribute + ")", (int) cudnnBackendGetAttribute.invokeExact(d,
                    attribute, type, capacity, count, values));
            return count.get(LONG, 0);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    // ---- errors -------------------------------------------------------------------------------------

    static void check(String what, int status) {
        if (status != 0) {
            throw new CudaException(what, status, errorString(status) + lastError());
        }
    }

    /** cudnnGetErrorString of a status. */
    public static String errorString(int status) {
        try {
            return Native.string((MemorySegment) cudnnGetErrorString.invokeExact(status));
        } catch (Throwable t) {
            return "cuDNN status " + status;
        }
    }

    /** cudnnGetLastErrorString, as " (message)", or "" when there is none. */
    public static String lastError() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment buffer = arena.allocate(1024);
            cudnnGetLastErrorString.invokeExact(buffer, 1024L);
            String message = buffer.getString(0).strip();
            return message.isEmpty() ? "" : " (" + message + ")";
        } catch (Throwable t) {
            return "";
        }
    }
}
