package io.fsdp4j.backend.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.backend.MemoryScope;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.HostStorage;
import org.junit.jupiter.api.Test;

/**
 * Memory scopes on the CPU: a closed scope's arrays serve later allocations of the same type and length on that
 * thread (zeroed when asked), poisoned with NaN on close when asked; outside every scope each allocation is new.
 */
class CpuMemoryTest {
    private static float[] floats(HostStorage s) {
        return ((HostStorage.F32) s).data();
    }

    @Test
    void aClosedScopesArraysAreReused() {
        float[] first, second;
        try (MemoryScope scope = CpuMemory.newScope(false); var entered = scope.enter()) {
            first = floats(CpuMemory.allocate(DType.F32, 1000, false));
            first[3] = 7f;
        }
        try (MemoryScope scope = CpuMemory.newScope(false); var entered = scope.enter()) {
            HostStorage other = CpuMemory.allocate(DType.F32, 999, false); // another length: a new array
            assertThat(floats(other)).isNotSameAs(first);
            float[] again = floats(CpuMemory.allocate(DType.F32, 1000, false));
            assertThat(again).isSameAs(first);
            assertThat(again[3]).isEqualTo(7f); // as the last user left it
            second = floats(CpuMemory.allocate(DType.F32, 1000, false));
            assertThat(second).isNotSameAs(first); // taken already
            second[5] = 3f;
        }
        try (MemoryScope scope = CpuMemory.newScope(false); var entered = scope.enter()) {
            float[] zeroed = floats(CpuMemory.allocate(DType.F32, 1000, true));
            assertThat(zeroed).isSameAs(second).containsOnly(0f); // the last one freed, zeroed
            HostStorage ints = CpuMemory.allocate(DType.I32, 1000, true); // another type: never a float array
            assertThat(ints).isInstanceOf(HostStorage.I32.class);
        }
    }

    @Test
    void aPoisonedScopeFillsItsArraysWithNanOnClose() {
        float[] kept;
        try (MemoryScope scope = CpuMemory.newScope(true); var entered = scope.enter()) {
            kept = floats(CpuMemory.allocate(DType.F32, 64, true));
            assertThat(kept).containsOnly(0f);
        }
        for (float v : kept) {
            assertThat(v).isNaN();
        }
    }

    @Test
    void outsideEveryScopeAllocationsAreNewAndInnerScopesComeFirst() {
        float[] outer, inner;
        try (MemoryScope o = CpuMemory.newScope(false)) {
            try (var entered = o.enter()) {
                outer = floats(CpuMemory.allocate(DType.F32, 77, false));
                try (MemoryScope i = CpuMemory.newScope(false); var in = i.enter()) {
                    inner = floats(CpuMemory.allocate(DType.F32, 77, false));
                }
                // the inner scope's array is free again; the outer one's is not
                assertThat(floats(CpuMemory.allocate(DType.F32, 77, false))).isSameAs(inner).isNotSameAs(outer);
            }
        }
        float[] a = floats(CpuMemory.allocate(DType.F32, 77, false)), b = floats(CpuMemory.allocate(DType.F32, 77, false));
        assertThat(a).isNotSameAs(b).isNotSameAs(outer).isNotSameAs(inner);
    }

    @Test
    void scopesAreLeftInReverseOrder() {
        MemoryScope a = CpuMemory.newScope(false), b = CpuMemory.newScope(false);
        var inA = a.enter();
        var inB = b.enter();
        assertThatThrownBy(inA::close).isInstanceOf(IllegalStateException.class);
        inB.close();
        inA.close();
    }
}
