package io.fsdp4j.backend;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.DeviceStorage;
import io.fsdp4j.tensor.Fp8;
import io.fsdp4j.tensor.Tensor;
import org.junit.jupiter.api.Test;

/** How a store ({@link Fp8Casts}) knows a tensor again. No GPU: device storages are records, made here. */
class Fp8CastsTest {
    private static Tensor onDevice(long address) {
        return new Tensor(DType.BF16, new int[] {16, 32}, new DeviceStorage(address, 512, DType.BF16, 0), 0);
    }

    /**
     * A view made again of the same tensor finds what was kept for it, in the format it was kept in; a later
     * allocation at the same address (a storage equal as a record, another object) does not: the caching allocator
     * hands a freed tensor's address to the next tensor of its size, and that tensor's elements are not the first's.
     */
    @Test
    void aTensorIsKnownByItsAllocationNotItsAddress() {
        Fp8Casts casts = Fp8Casts.amaxesOnly(true);
        Tensor x = onDevice(1 << 20);
        casts.keep(x, Fp8.E4M3, "x's amax");
        assertThat(casts.find(x.view(0, 16, 32), Fp8.E4M3, String.class, s -> true)).isEqualTo("x's amax");
        assertThat(casts.find(x, Fp8.E5M2, String.class, s -> true)).isNull();
        Tensor later = onDevice(1 << 20);
        assertThat(later.storage()).isEqualTo(x.storage());
        assertThat(casts.find(later, Fp8.E4M3, String.class, s -> true)).isNull();
        assertThat(casts.castsReused()).isEqualTo(1);
    }
}
