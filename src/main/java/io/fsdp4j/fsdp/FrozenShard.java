package io.fsdp4j.fsdp;

import io.fsdp4j.backend.Backend;
import io.fsdp4j.backend.OutOfDeviceMemory;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;

/**
 * A shard that does not train (a frozen base under LoRA): the parameters only, on the device, in the precision
 * they are gathered in ({@code fsdp.param_dtype}), so a gather sends them as they are. No master copy, no gradient,
 * no optimizer state: 2 bytes a parameter in bf16 where a training shard holds 16.
 */
public final class FrozenShard implements ShardStorage {
    private final Backend backend;
    private final int shardNumel;
    private final Tensor params;

    FrozenShard(Backend backend, UnitLayout layout, int shardNumel, DType dtype) {
        this.backend = backend;
        this.shardNumel = shardNumel;
        try {
            this.params = backend.allocate(dtype, shardNumel);
        } catch (OutOfDeviceMemory e) {
            throw e.naming("the frozen " + dtype + " shard of unit " + layout.name());
        }
    }

    @Override
    public boolean inHostMemory() {
        return false;
    }

    /** Rounds {@code values} to the shard's precision. */
    @Override
    public void load(float[] values) {
        try (var staging = backend.newScope(); var entered = staging.enter()) {
            backend.copy(backend.upload(values, values.length), params.view(0, values.length));
        }
    }

    @Override
    public float[] values() {
        return backend.toFloats(params);
    }

    @Override
    public Tensor gatherSource() {
        return params;
    }

    @Override
    public Tensor fp32OnDevice() {
        if (params.dtype() == DType.F32) {
            return params;
        }
        Tensor widened = backend.allocateForWrite(DType.F32, shardNumel);
        backend.copy(params, widened);
        return widened;
    }

    @Override
    public long paramBytes() {
        return (long) params.dtype().bytes() * shardNumel;
    }

    @Override
    public long gradBytes() {
        return 0;
    }
}
