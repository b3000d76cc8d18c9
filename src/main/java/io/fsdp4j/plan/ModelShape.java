package io.fsdp4j.plan;

import io.fsdp4j.model.ActivationSizes;
import io.fsdp4j.model.CausalLMs;
import io.fsdp4j.model.LoraSpec;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.ParamSpec;
import io.fsdp4j.model.UnitLayout;
import java.util.List;
import java.util.stream.IntStream;

/**
 * What the planner needs of a model: the size of each shard unit (embeddings, every block, the head: the layout
 * FSDP shards, from {@link CausalLMs#layout}), the matrix parameters each unit multiplies with, the widths of a
 * block's products, and its activations as the model states them ({@link #activations}).
 *
 * @param units the units in the model's order: embeddings, blocks, head
 * @param parameters every parameter, counted once (a tied head adds nothing)
 * @param gatedMlp whether the MLP is SwiGLU (gate|up, 2F wide, then F) rather than one up projection (F, then F)
 * @param frozen per unit, the elements at the start of its buffer that do not train (a frozen base under LoRA: the
 *     embeddings and the head whole, each block's base before its adapters); all 0 without LoRA
 * @param lora the adapters, or null
 * @param nf4 whether each block's frozen linears are held in NF4 ({@code lora.quantize: nf4}, QLoRA): packed codes
 *     and an fp32 absmax per 64 elements, sharded in whole blocks ({@code fsdp.Nf4Unit}), the rest of the base
 *     in the parameter dtype
 */
public record ModelShape(ModelConfig config, List<UnitLayout> units, long parameters, boolean gatedMlp,
                         List<Long> frozen, LoraSpec lora, boolean nf4) {

    public ModelShape {
        units = List.copyOf(units);
        frozen = List.copyOf(frozen);
    }

    public static ModelShape of(ModelConfig config) {
        return of(config, null);
    }

    /**
     * The model with LoRA's adapters ({@code lora}; null: none): its units laid out as FsdpModel lays them
     * ({@link CausalLMs#layout(ModelConfig, LoraSpec)}), the base frozen.
     */
    public static ModelShape of(ModelConfig config, LoraSpec lora) {
        return of(config, lora, false);
    }

    /** As {@link #of(ModelConfig, LoraSpec)}, each block's frozen linears in NF4 where {@code nf4} (with adapters). */
    public static ModelShape of(ModelConfig config, LoraSpec lora, boolean nf4) {
        List<UnitLayout> base = CausalLMs.layout(config), units = CausalLMs.layout(config, lora);
        long parameters = units.stream().mapToLong(UnitLayout::numel).sum();
        boolean gated = units.get(1).params().stream().anyMatch(p -> p.name().endsWith("gate_proj.weight")
                || p.name().endsWith("gate_up_proj.weight")); // Phi-3's fused gate|up
        List<Long> frozen = IntStream.range(0, units.size()).mapToObj(u -> lora == null ? 0L : base.get(u).numel())
                .toList();
        return new ModelShape(config, units, parameters, gated, frozen, lora, nf4 && lora != null);
    }

    /** Elements of unit {@code u} that do not train (LoRA's frozen base; 0 without LoRA). */
    public long frozenNumel(int u) {
        return frozen.get(u);
    }

    /** Elements of unit {@code u} that train: all of them, or under LoRA its adapters (none for embeddings, head). */
    public long trainableNumel(int u) {
        return numel(u) - frozenNumel(u);
    }

    /** Parameters that train: every one, or under LoRA the adapters'. */
    public long trainableParameters() {
        return IntStream.range(0, units.size()).mapToLong(this::trainableNumel).sum();
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

    /** One rank's shard of unit u's part that trains: sharded on its own under LoRA, the unit without. */
    public long trainableShardNumel(int u, int groupSize) {
        return ceilDiv(trainableNumel(u), groupSize);
    }

    /** One rank's shard of unit u's frozen part (LoRA's base, sharded on its own; 0 without LoRA). */
    public long frozenShardNumel(int u, int groupSize) {
        return ceilDiv(frozenNumel(u), groupSize);
    }

    /**
     * Bytes of one rank's shard of unit u's frozen part, its parameters in {@code paramBytes} bytes each: under NF4 a
     * block's linears as whole blocks of 64 (32 bytes of codes and a 4-byte absmax each) and its norms and biases
     * sharded on their own; else the frozen elements' shard.
     */
    public long frozenShardBytes(int u, int groupSize, int paramBytes) {
        if (!nf4 || u == 0 || u == headUnit()) {
            return (long) paramBytes * frozenShardNumel(u, groupSize);
        }
        long quantized = units.get(u).params().stream().filter(p -> p.offset() < frozenNumel(u)
                && p.kind() == ParamSpec.Kind.MATRIX).mapToLong(ParamSpec::numel).sum();
        long blocks = ceilDiv(ceilDiv(quantized, 64), groupSize);
        return 36 * blocks + (long) paramBytes * ceilDiv(frozenNumel(u) - quantized, groupSize);
    }

    /** Bytes one all-gather of unit u brings to each rank: the frozen part as held, the trained part in paramBytes. */
    public long gatheredBytes(int u, int groupSize, int paramBytes) {
        if (!nf4 || trainableNumel(u) == 0) {
            return (long) paramBytes * paddedNumel(u, groupSize);
        }
        return groupSize * (frozenShardBytes(u, groupSize, paramBytes)
                + (long) paramBytes * trainableShardNumel(u, groupSize));
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
