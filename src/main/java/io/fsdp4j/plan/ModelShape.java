package io.fsdp4j.plan;

import io.fsdp4j.model.ActivationSizes;
import io.fsdp4j.model.CausalLMs;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.ParamSpec;
import io.fsdp4j.model.UnitLayout;
import java.util.List;

/**
 * What the planner needs of a model: the size of each shard unit (embeddings, every block, the head: the layout
 * FSDP shards, from {@link CausalLMs#layout}), the matrix parameters each unit multiplies with, the widths of a
 * block's products, and its activations as the model states them ({@link #activations}).
 *
 * @param units the units in the model's order: embeddings, blocks, head
 * @param parameters every parameter, counted once (a tied head adds nothing)
 * @param gatedMlp whether the MLP is SwiGLU (gate|up, 2F wide, then F) rather than one up projection (F, then F)
 */
public record ModelShape(ModelConfig config, List<UnitLayout> units, long parameters, boolean gatedMlp) {

    public ModelShape {
        units = List.copyOf(units);
    }

    public static ModelShape of(ModelConfig config) {
        List<UnitLayout> units = CausalLMs.layout(config);
        long parameters = units.stream().mapToLong(UnitLayout::numel).sum();
        boolean gated = units.get(1).params().stream().anyMatch(p -> p.name().endsWith("gate_proj.weight")
                || p.name().endsWith("gate_up_proj.weight")); // Phi-3's fused gate|up
        return new ModelShape(config, units, parameters, gated);
    }

    /** L, the decoder blocks. */
    public int blocks() {
        return units.size() - 2;
    }

    public int headUnit() {
        return units.size() - 1;
    }

    public boolean tied() {
        return config.tieEmbeddings();
    }

    /** Elements of unit {@code u}'s flat buffer before padding. */
    public long numel(int u) {
        return units.get(u).numel();
    }

    /**
     * Parameters of unit {@code u} used as the weight of a matrix product (two FLOPs each per token forward, four
     * backward). The embedding table is a lookup (no FLOPs) unless the head is tied to it, when the head unit
     * counts it.
     */
    public long matrixParams(int u) {
        if (u == 0) {
            return 0;
        }
        long n = units.get(u).params().stream().filter(p -> p.kind() == ParamSpec.Kind.MATRIX)
                .mapToLong(ParamSpec::numel).sum();
        return u == headUnit() && tied() ? n + (long) config.vocabSize() * config.hidden() : n;
    }

    /** Elements of one rank's shard of unit {@code u} in a shard group of {@code groupSize}: ceil(numel / S). */
    public long shardNumel(int u, int groupSize) {
        return ceilDiv(numel(u), groupSize);
    }

    /** The unit's flat buffer padded at its end to a multiple of the group size: the size gathered and reduced. */
    public long paddedNumel(int u, int groupSize) {
        return shardNumel(u, groupSize) * groupSize;
    }

    static long ceilDiv(long a, long b) {
        return (a + b - 1) / b;
    }

    /** The activations of one micro-batch of {@code w}, as the model states them ({@link CausalLMs#activationSizes}). */
    public ActivationSizes activations(Workload w) {
        return CausalLMs.activationSizes(config, w.seq(), w.batch(), w.paramBytes());
    }

    /** Width of the q|k|v projection's output (Q). */
    int qkvWidth() {
        return config.qkvWidth();
    }

    /** Width of the attention output (A = NH * HS). */
    int attentionWidth() {
        return config.heads() * config.headDim();
    }

    /** Width of the MLP's first product: gate|up (2F) or up (F). */
    int mlpUpWidth() {
        return gatedMlp ? 2 * config.intermediate() : config.intermediate();
    }
}
