package io.fsdp4j.backend;

import static io.fsdp4j.backend.CudaBackend.ptr;

import io.fsdp4j.cuda.Cuda;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Storage;
import io.fsdp4j.tensor.Tensor;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.LongSupplier;

/**
 * The largest magnitudes (amax) of bf16 weights that fp8's casts ({@link CudaLinear}) would otherwise read every
 * weight for. With {@code fsdp.param_copy: kept}, AdamW writes each master shard's bf16 copy; in the same pass
 * (adamw_f32_segments_bf16_amax) it can write each parameter's amax of the values it wrote. Where a shard is its whole
 * unit (one rank), that copy is what the blocks compute with, and a cast of a weight in it takes its amax from here
 * instead of an amax pass over the weight: the same value (the largest magnitude of the same bf16 values), and under
 * full activation checkpointing two passes over every weight fewer a step (the forward's and the recompute's).
 *
 * <p>AdamW keeps amaxes only once an fp8 cast has asked ({@link #want}), and a copy's are known until anything else
 * writes it ({@link #forget}: {@link CudaBackend#copy} and {@link CudaBackend#fill}, the rounding of a loaded master).
 * A weight is known by its storage, its offset from the copy's start and its length: one parameter, or several that
 * lie one after the other (a fused q|k|v or gate|up view), whose amax is the largest of theirs. One rank's thread.
 */
final class KnownAmax implements AutoCloseable {
    /** A kept copy AdamW wrote: where it starts in its storage, its parameters, their amaxes, whether current. */
    private record Copy(long start, List<AdamWSegment> segments, Tensor amax, boolean current) {}

    private final CudaMemory memory;
    private final CudaLaunches launches;
    private final long stream;
    /** Where the amax slots live: as long as the backend (a handful of floats a unit). */
    private final MemoryScope slots;
    private final Map<Storage, Copy> copies = new HashMap<>();
    private boolean wanted;
    private long taken;

    KnownAmax(CudaMemory memory, CudaLaunches launches) {
        this.memory = memory;
        this.launches = launches;
        this.stream = launches.stream();
        this.slots = memory.newScope();
    }

    /** An fp8 cast of a bf16 tensor ran: AdamW's passes keep amaxes from now on. */
    void want() {
        wanted = true;
    }

    /** Whether AdamW should keep the amaxes of the bf16 copy it writes. */
    boolean wanted() {
        return wanted;
    }

    /**
     * Zeroed slots, one for each of {@code segments}, for the AdamW pass about to write {@code rounded} (queued next on
     * the stream) to put its parameters' amaxes in; known from then on, until {@link #forget}.
     */
    Tensor slotsFor(Tensor rounded, List<AdamWSegment> segments) {
        Copy old = copies.get(rounded.storage());
        Tensor amax = old != null && old.amax().numel() >= segments.size() ? old.amax() : null;
        if (amax == null) {
            try (var entered = slots.enter()) {
                amax = memory.allocateForWrite(DType.F32, segments.size());
            }
        }
        Cuda.memsetAsync(ptr(amax), 0, (long) segments.size() * Float.BYTES, stream);
        copies.put(rounded.storage(), new Copy(rounded.offset(), List.copyOf(segments), amax, true));
        return amax;
    }

    /** {@code written} is being written by something other than AdamW's pass: its amaxes are no longer known. */
    void forget(Tensor written) {
        Copy c = copies.get(written.storage());
        if (c != null && c.current()) {
            copies.put(written.storage(), new Copy(c.start(), c.segments(), c.amax(), false));
        }
    }

    /**
     * The device address of {@code t}'s amax as the bits of a float (fp8_amax's form), written into a zeroed float
     * from {@code scratch} where t spans several parameters; 0 where it is not known (then the cast reads t).
     */
    long of(Tensor t, LongSupplier scratch) {
        Copy c = copies.get(t.storage());
        if (c == null || !c.current() || t.dtype() != DType.BF16) {
            return 0;
        }
        long at = t.offset() - c.start(), end = at + t.numel();
        List<AdamWSegment> segments = c.segments();
        for (int i = 0; i < segments.size(); i++) {
            if (segments.get(i).offset() != at) {
                continue;
            }
            int last = i;
            long covered = segments.get(i).offset() + (long) segments.get(i).length();
            while (covered < end && last + 1 < segments.size() && segments.get(last + 1).offset() == covered) {
                last++;
                covered += segments.get(last).length();
            }
            if (covered != end) {
                return 0;
            }
            taken++;
            long first = ptr(c.amax()) + (long) i * Float.BYTES;
            if (last == i) {
                return first;
            }
            // several parameters: the largest of their amaxes (non-negative floats' bits), one small launch
            long into = scratch.getAsLong();
            launches.launch("fp8", "fp8_amax_f32", 1, 256, into, first, (long) (last - i + 1));
            return into;
        }
        return 0;
    }

    /** How many casts took a known amax instead of reading their tensor (tests). */
    long taken() {
        return taken;
    }

    @Override
    public void close() {
        slots.close();
    }
}
