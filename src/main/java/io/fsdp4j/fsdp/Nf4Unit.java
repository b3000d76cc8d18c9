package io.fsdp4j.fsdp;

import io.fsdp4j.backend.Backend;
import io.fsdp4j.backend.MemoryScope;
import io.fsdp4j.backend.OutOfDeviceMemory;
import io.fsdp4j.comm.ProcessGroup;
import io.fsdp4j.config.Precision;
import io.fsdp4j.model.ParamSource;
import io.fsdp4j.model.ParamSpec;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Nf4;
import io.fsdp4j.tensor.Tensor;
import java.util.ArrayList;
import java.util.List;

/**
 * A block's frozen base under QLoRA ({@code lora.quantize: nf4}): the same layout as a frozen base
 * ({@link #layout}: norms, weights and biases where the model puts them), held in two parts, each sharded over the
 * shard group on its own:
 * <ul>
 *   <li>the block's linear weights (its {@code MATRIX} parameters, in layout order, one stream of Q elements) in NF4
 *       as bitsandbytes stores them ({@link Nf4}): packed codes, two a byte (I32 words, 8 a block of 64), and an fp32
 *       absmax per block. A shard is a run of whole blocks: rank s holds blocks [s * P, (s + 1) * P), P =
 *       ceil(Q / 64 / S), padded with zero blocks past the stream's end;</li>
 *   <li>everything else (norms, biases) as a frozen {@link ShardedUnit} in {@code fsdp.param_dtype}.</li>
 * </ul>
 * Every weight of a quantized block holds a multiple of 64 elements ({@link #quantizable}), so the stream's blocks
 * are those bitsandbytes makes of each weight alone. The codes and absmax are quantized when the base is loaded, by
 * each rank from its own blocks only. A gather moves the packed codes (a quarter of bf16's bytes) and the absmax,
 * then dequantizes each weight into its place in the block's buffer, in {@code fsdp.param_dtype}.
 */
public final class Nf4Unit implements FsdpUnit {
    private final UnitLayout layout;
    private final Backend backend;
    private final ProcessGroup shardGroup;
    /** The quantized weights, in layout order; the stream's element q of weight i is at streamStart[i] + q. */
    private final List<ParamSpec> quantized;
    private final long[] streamStart;
    private final int blocksPerShard;
    /** This rank's blocks: codes (I32, 8 words a block) and absmax (F32, one a block). */
    private final Tensor codes, absmax;
    /** The norms and biases, frozen, back to back in layout order. */
    private final ShardedUnit rest;
    private MemoryScope packedScope;
    private Tensor allCodes, allAbsmax;
    private ProcessGroup.Pending codesGather, absmaxGather;
    private MemoryScope fullScope;
    private Tensor full;

    /**
     * The base of unit {@code unit} of {@code source}, quantized on this rank: its blocks read from
     * {@code source} and quantized, its norms and biases loaded as a frozen shard in {@code restDtype}.
     */
    Nf4Unit(UnitLayout layout, Backend backend, ProcessGroup shardGroup, ProcessGroup replicateGroup,
            DType restDtype, ParamSource source, int unit) {
        String problem = quantizable(layout);
        if (problem != null) {
            throw new IllegalArgumentException(problem);
        }
        this.layout = layout;
        this.backend = backend;
        this.shardGroup = shardGroup;
        List<ParamSpec> weights = new ArrayList<>(), others = new ArrayList<>();
        long[] starts = new long[layout.params().size()];
        long streamNumel = 0, restNumel = 0;
        for (ParamSpec p : layout.params()) {
            if (p.kind() == ParamSpec.Kind.MATRIX) {
                starts[weights.size()] = streamNumel;
                weights.add(p);
                streamNumel += p.numel();
            } else {
                others.add(new ParamSpec(p.name(), restNumel, p.shape(), p.kind()));
                restNumel += p.numel();
            }
        }
        this.quantized = List.copyOf(weights);
        this.streamStart = java.util.Arrays.copyOf(starts, weights.size());
        long blocks = streamNumel / Nf4.BLOCK;
        this.blocksPerShard = Math.toIntExact((blocks + shardGroup.size() - 1) / shardGroup.size());
        long firstBlock = (long) shardGroup.rank() * blocksPerShard;
        int owned = (int) Math.max(0, Math.min(blocksPerShard, blocks - firstBlock));
        int[] packed = new int[blocksPerShard * Nf4.WORDS_PER_BLOCK];
        float[] scales = new float[blocksPerShard];
        if (owned > 0) {
            float[] values = new float[owned * Nf4.BLOCK];
            readStream(source, unit, firstBlock * Nf4.BLOCK, values);
            Nf4.quantize(values, 0, owned, packed, 0, scales, 0);
        }
        try {
            this.codes = backend.allocate(DType.I32, packed.length);
            this.absmax = backend.allocate(DType.F32, blocksPerShard);
        } catch (OutOfDeviceMemory e) {
            throw e.naming("the NF4 shard of unit " + layout.name());
        }
        try (var staging = backend.newScope(); var entered = staging.enter()) {
            backend.copy(backend.uploadInts(packed, packed.length), codes);
            backend.copy(backend.upload(scales, scales.length), absmax);
        }
        UnitLayout restLayout = new UnitLayout(layout.name() + ".rest", others, restNumel);
        this.rest = new ShardedUnit(restLayout, backend, shardGroup, replicateGroup,
                new ShardedUnit.Holding.Frozen(restDtype));
        int restOwned = rest.ownedParamElements();
        if (restOwned > 0) {
            float[] values = new float[restOwned];
            readRest(source, unit, restLayout, rest.shardStart(), values);
            rest.loadMaster(values);
        }
    }

    /**
     * Why a base of this layout cannot be held in NF4 (a weight whose elements are not whole blocks of 64), or null
     * when it can.
     */
    public static String quantizable(UnitLayout layout) {
        for (ParamSpec p : layout.params()) {
            if (p.kind() == ParamSpec.Kind.MATRIX && p.numel() % Nf4.BLOCK != 0) {
                return p.name() + " " + java.util.Arrays.toString(p.shape()) + " has " + p.numel()
                        + " elements, not a multiple of NF4's block of " + Nf4.BLOCK;
            }
        }
        return null;
    }

    /** dst = elements [from, from + dst.length) of the quantized stream, read weight by weight from the unit. */
    private void readStream(ParamSource source, int unit, long from, float[] dst) {
        long to = from + dst.length;
        for (int i = 0; i < quantized.size(); i++) {
            long start = Math.max(from, streamStart[i]), end = Math.min(to, streamStart[i] + quantized.get(i).numel());
            if (start < end) {
                source.read(unit, quantized.get(i).offset() + start - streamStart[i], dst, (int) (start - from),
                        (int) (end - start));
            }
        }
    }

    /** dst = elements [from, from + dst.length) of the norms and biases, read from their places in the unit. */
    private void readRest(ParamSource source, int unit, UnitLayout restLayout, long from, float[] dst) {
        long to = from + dst.length;
        for (ParamSpec r : restLayout.params()) {
            long start = Math.max(from, r.offset()), end = Math.min(to, r.end());
            if (start < end) {
                long at = layout.param(r.name()).offset() + start - r.offset();
                source.read(unit, at, dst, (int) (start - from), (int) (end - start));
            }
        }
    }

    @Override
    public UnitLayout layout() {
        return layout;
    }

    /** Starts the all-gathers of the codes, the absmax and the norms and biases, without waiting. */
    @Override
    public void startGather(Precision paramDtype) {
        if (packedScope != null || full != null) {
            return;
        }
        packedScope = backend.newScope();
        try (var entered = packedScope.enter()) {
            if (shardGroup.size() == 1) {
                allCodes = codes;
                allAbsmax = absmax;
            } else {
                allCodes = backend.allocateForWrite(DType.I32, Math.toIntExact(codes.numel() * shardGroup.size()));
                allAbsmax = backend.allocateForWrite(DType.F32, Math.toIntExact(absmax.numel() * shardGroup.size()));
                codesGather = shardGroup.allGatherAsync(codes, allCodes);
                absmaxGather = shardGroup.allGatherAsync(absmax, allAbsmax);
            }
        }
        rest.startGather(paramDtype);
    }

    /** The base for compute: dequantized in paramDtype (fp32 where the backend computes only in fp32). */
    @Override
    public Tensor gather(Precision paramDtype) {
        if (full != null) {
            return full;
        }
        DType dtype = backend.computesIn(paramDtype.dtype()) ? paramDtype.dtype() : DType.F32;
        fullScope = backend.newScope();
        Tensor base;
        try (var entered = fullScope.enter()) {
            base = backend.allocateForWrite(dtype, Math.toIntExact(layout.numel()));
        }
        gatherInto(base, paramDtype);
        full = base;
        return full;
    }

    /**
     * Gathers the base straight into {@code dst} (numel of {@link #layout}, in paramDtype, or fp32 where the backend
     * computes only in fp32): each weight dequantized into its place, the norms and biases copied into theirs. The
     * gathered codes, absmax and norms are freed after.
     */
    void gatherInto(Tensor dst, Precision paramDtype) {
        startGather(paramDtype);
        awaitGathers();
        DType rounded = paramDtype.dtype(); // the values are those of paramDtype, as bitsandbytes' compute dtype
        try (var entered = packedScope.enter()) {
            for (int i = 0; i < quantized.size(); i++) {
                ParamSpec p = quantized.get(i);
                int n = Math.toIntExact(p.numel());
                Tensor out = dst.view(p.offset(), n);
                Tensor weightCodes = allCodes.view(streamStart[i] / 8, n / 8);
                Tensor weightAbsmax = allAbsmax.view(streamStart[i] / Nf4.BLOCK, n / Nf4.BLOCK);
                if (dst.dtype() == rounded) {
                    backend.dequantizeNf4(out, weightCodes, weightAbsmax);
                } else { // the CPU backend: paramDtype's values, widened to fp32
                    Tensor half = backend.allocateForWrite(rounded, n);
                    backend.dequantizeNf4(half, weightCodes, weightAbsmax);
                    backend.copy(half, out);
                }
            }
        }
        Tensor others = rest.gather(paramDtype);
        for (ParamSpec r : rest.layout().params()) {
            int n = Math.toIntExact(r.numel());
            backend.copy(others.view(r.offset(), n), dst.view(layout.param(r.name()).offset(), n));
        }
        rest.free();
        freePacked();
    }

    private void awaitGathers() {
        if (codesGather != null) {
            codesGather.await();
            codesGather = null;
        }
        if (absmaxGather != null) {
            absmaxGather.await();
            absmaxGather = null;
        }
    }

    private void freePacked() {
        awaitGathers();
        if (packedScope != null) {
            packedScope.close();
        }
        packedScope = null;
        allCodes = null;
        allAbsmax = null;
    }

    @Override
    public void free() {
        freePacked();
        if (fullScope != null) {
            fullScope.close();
        }
        fullScope = null;
        full = null;
        rest.free();
    }

    @Override
    public boolean isGathered() {
        return full != null || packedScope != null;
    }

    @Override
    public void startHostCopy() {}

    @Override
    public boolean trains() {
        return false;
    }

    @Override
    public MasterShards trainable() {
        throw frozen();
    }

    @Override
    public ShardedUnit.GradTarget blockGradTarget() {
        throw frozen();
    }

    @Override
    public Tensor gradAccumulator() {
        throw frozen();
    }

    @Override
    public void startReduction(Precision reduceDtype) {
        throw frozen();
    }

    @Override
    public void finishReduction() {
        throw frozen();
    }

    @Override
    public void releaseReducedGradient() {
        throw frozen();
    }

    @Override
    public void reduceGradients(Precision reduceDtype) {
        throw frozen();
    }

    private IllegalStateException frozen() {
        return new IllegalStateException("unit " + layout.name() + " is a frozen NF4 base: it has no gradient");
    }

    /** Nothing: no gradient. */
    @Override
    public void zeroGrad() {}

    /** The packed codes (half a byte an element), the absmax (4 bytes a block) and the norms' and biases' shard. */
    @Override
    public long paramBytes() {
        return 4 * codes.numel() + 4 * absmax.numel() + rest.paramBytes();
    }

    @Override
    public long gradBytes() {
        return 0;
    }

    /** The base dequantized in fp32 (code * absmax, not rounded to fsdp.param_dtype), gathered across the group. */
    @Override
    public float[] fullParameters() {
        float[] result = new float[Math.toIntExact(layout.numel())];
        int groupSize = shardGroup.size();
        try (MemoryScope scope = backend.newScope(); var entered = scope.enter()) {
            Tensor c = backend.allocate(DType.I32, Math.toIntExact(codes.numel() * groupSize));
            Tensor a = backend.allocate(DType.F32, Math.toIntExact(absmax.numel() * groupSize));
            shardGroup.allGather(codes, c);
            shardGroup.allGather(absmax, a);
            int[] packed = backend.toInts(c);
            float[] scales = backend.toFloats(a);
            float[] stream = new float[Math.toIntExact(scales.length * (long) Nf4.BLOCK)];
            Nf4.dequantize(packed, scales, stream, 0, stream.length);
            for (int i = 0; i < quantized.size(); i++) {
                ParamSpec p = quantized.get(i);
                System.arraycopy(stream, Math.toIntExact(streamStart[i]), result, Math.toIntExact(p.offset()),
                        Math.toIntExact(p.numel()));
            }
        }
        float[] others = rest.fullParameters();
        for (ParamSpec r : rest.layout().params()) {
            System.arraycopy(others, Math.toIntExact(r.offset()), result,
                    Math.toIntExact(layout.param(r.name()).offset()), Math.toIntExact(r.numel()));
        }
        return result;
    }
}
