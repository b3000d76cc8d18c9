package io.fsdp4j.backend.cpu;

import io.fsdp4j.backend.MemoryScope;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.HostStorage;
import java.lang.ref.SoftReference;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The CPU backend's memory scopes: what a thread allocates while a scope is entered goes back, when the scope
 * closes, to a pool of that thread's arrays, from which later allocations of the same type and length are served.
 * The engine gives each block's activations, each backward and each gathered unit a scope, so from the second step
 * on a step allocates next to nothing: no fresh zeroed memory each step, no collections, and arrays still warm in
 * the caches. Outside every scope an allocation is a new array, freed by the garbage collector as before.
 *
 * <p>A tensor must not be used after its scope has closed (as on a GPU, where the memory is freed). With
 * {@code poison} set (the test suite's {@code fsdp4j.poisonUnwritten}) a closing scope fills its arrays with NaN, so
 * that a use after close shows in every number computed from it. The pool keeps at most {@link #POOLED_BYTES} a
 * thread, each array softly reachable: the collector may still take pooled arrays when the heap runs short.
 */
public final class CpuMemory {
    /** The most bytes of arrays a thread's pool keeps (beyond it, closed scopes' arrays are left to the collector). */
    static final long POOLED_BYTES = Math.max(64L << 20, Runtime.getRuntime().maxMemory() / 8);

    private static final ThreadLocal<ArrayDeque<Scope>> ENTERED = ThreadLocal.withInitial(ArrayDeque::new);
    private static final ThreadLocal<Pool> POOL = ThreadLocal.withInitial(Pool::new);

    private CpuMemory() {}

    /** A new, empty scope. {@code poison}: fill arrays with NaN when it closes. */
    public static MemoryScope newScope(boolean poison) {
        return new Scope(poison);
    }

    /**
     * Storage for {@code elements} values of {@code dtype}: from this thread's pool when a scope is entered on it
     * (zeroed if asked, else as the last user left it), else a new array (zeroed).
     */
    public static HostStorage allocate(DType dtype, int elements, boolean zeroed) {
        Scope scope = ENTERED.get().peek();
        if (scope == null) {
            return HostStorage.allocate(dtype, elements);
        }
        HostStorage s = POOL.get().take(dtype, elements);
        if (s == null) {
            s = HostStorage.allocate(dtype, elements);
        } else if (zeroed) {
            switch (s) {
                case HostStorage.F32(float[] d) -> java.util.Arrays.fill(d, 0f);
                case HostStorage.Bf16(short[] d) -> java.util.Arrays.fill(d, (short) 0);
                case HostStorage.F16(short[] d) -> java.util.Arrays.fill(d, (short) 0);
                case HostStorage.I32(int[] d) -> java.util.Arrays.fill(d, 0);
            }
        }
        scope.owned.add(s);
        return s;
    }

    private static long bytes(HostStorage s) {
        return switch (s) {
            case HostStorage.F32(float[] d) -> 4L * d.length;
            case HostStorage.Bf16(short[] d) -> 2L * d.length;
            case HostStorage.F16(short[] d) -> 2L * d.length;
            case HostStorage.I32(int[] d) -> 4L * d.length;
        };
    }

    /** A thread's arrays by type and length, each softly held; their bytes counted against {@link #POOLED_BYTES}. */
    private static final class Pool {
        private final Map<Long, ArrayDeque<SoftReference<HostStorage>>> free = new HashMap<>();
        private long bytes;

        private static long key(DType dtype, int elements) {
            return (long) dtype.ordinal() << 32 | elements;
        }

        HostStorage take(DType dtype, int elements) {
            ArrayDeque<SoftReference<HostStorage>> q = free.get(key(dtype, elements));
            while (q != null && !q.isEmpty()) {
                HostStorage s = q.pop().get();
                if (s != null) {
                    bytes -= bytes(s);
                    return s;
                }
                bytes -= (long) elements * dtype.bytes(); // taken by the collector
            }
            return null;
        }

        void give(HostStorage s) {
            long b = bytes(s);
            if (bytes + b > POOLED_BYTES) {
                return;
            }
            DType dtype = switch (s) {
                case HostStorage.F32 f -> DType.F32;
                case HostStorage.Bf16 h -> DType.BF16;
                case HostStorage.F16 h -> DType.F16;
                case HostStorage.I32 i -> DType.I32;
            };
            free.computeIfAbsent(key(dtype, Math.toIntExact(s.capacity())), k -> new ArrayDeque<>())
                    .push(new SoftReference<>(s));
            bytes += b;
        }
    }

    private static final class Scope implements MemoryScope {
        private final boolean poison;
        private final List<HostStorage> owned = new ArrayList<>();
        private boolean closed;

        Scope(boolean poison) {
            this.poison = poison;
        }

        @Override
        public Entered enter() {
            ArrayDeque<Scope> stack = ENTERED.get();
            stack.push(this);
            return () -> {
                if (stack.peek() != this) {
                    throw new IllegalStateException("memory scopes must be left in reverse order of entry");
                }
                stack.pop();
            };
        }

        @Override
        public void close() {
            if (closed) {
                return;
            }
            closed = true;
            Pool pool = POOL.get();
            for (HostStorage s : owned) {
                if (poison) {
                    switch (s) {
                        case HostStorage.F32(float[] d) -> java.util.Arrays.fill(d, Float.NaN);
                        case HostStorage.Bf16(short[] d) -> java.util.Arrays.fill(d, (short) 0x7fc0);
                        case HostStorage.F16(short[] d) -> java.util.Arrays.fill(d, (short) 0x7e00); // fp16 NaN
                        case HostStorage.I32(int[] d) -> java.util.Arrays.fill(d, Integer.MIN_VALUE);
                    }
                }
                pool.give(s);
            }
            owned.clear();
        }
    }
}
