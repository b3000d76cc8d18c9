package io.fsdp4j.model;

import io.fsdp4j.UserError;
import io.fsdp4j.config.LoraSection;
import java.util.ArrayList;
import java.util.List;

/**
 * Low-rank adapters on a model's linears, as PEFT's LoRA puts them: each targeted linear y = x W^T gets
 * y = x W^T + scaling * x A^T B^T, with A (r, in) and B (out, r) trained and W frozen.
 *
 * @param rank    r
 * @param scaling the factor on the adapters' output (alpha / r, or alpha / sqrt(r) with rsLoRA)
 * @param modules the targeted linears by their names in the checkpoint ({@code q_proj}, ..., {@code down_proj}; a
 *                family's are {@link #linears}), in the block's order
 * @param dropout p of the dropout on each adapter's input in training (PEFT's lora_dropout: y = x W^T + scaling *
 *                dropout(x) A^T B^T, kept elements scaled by 1 / (1 - p)), in [0, 1); none outside training
 */
public record LoraSpec(int rank, double scaling, List<String> modules, double dropout) {
    public LoraSpec {
        if (rank < 1) {
            throw new IllegalArgumentException("LoRA rank " + rank + " < 1");
        }
        if (!(dropout >= 0 && dropout < 1)) {
            throw new IllegalArgumentException("LoRA dropout " + dropout + " is not in [0, 1)");
        }
        modules = List.copyOf(modules);
    }

    /** Without dropout. */
    public LoraSpec(int rank, double scaling, List<String> modules) {
        this(rank, scaling, modules, 0);
    }

    /**
     * The adapters {@code lora.*} asks for on a model of {@code model}'s family, or null when LoRA is off
     * ({@code lora.rank} 0); a target module the family lacks is a one-line error naming the family's linears.
     */
    public static LoraSpec of(LoraSection lora, ModelConfig model) {
        if (!lora.enabled()) {
            return null;
        }
        List<String> linears = linears(model.architecture());
        List<String> modules = lora.modules(linears, peftDefaults(model.architecture()));
        if (modules == null) {
            throw new UserError("config key 'lora.target_modules': " + model.architecture().hfName() + " has no linear "
                    + lora.targetModules().stream().filter(m -> !linears.contains(m)).findFirst().orElseThrow()
                    + "; its linears are " + String.join(", ", linears) + " (or " + LoraSection.ALL_LINEAR + ")");
        }
        return new LoraSpec(lora.rank(), lora.scaling(), modules, lora.dropout());
    }

    /**
     * What PEFT targets in a family when no target_modules is given (its TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES
     * mapping): the attention's query and value products, fused in Phi-3 and BLOOM. {@code lora.target_modules: auto}.
     */
    public static List<String> peftDefaults(Architecture architecture) {
        return switch (architecture) {
            case LLAMA, QWEN2, MISTRAL, QWEN3, GEMMA2, GEMMA3 -> List.of("q_proj", "v_proj");
            case PHI3 -> List.of("qkv_proj");
            case BLOOM -> List.of("query_key_value");
        };
    }

    /**
     * The linears of a block of {@code architecture} adapters can target, by their names in the checkpoint (PEFT's
     * target names), in the block's order: what {@code all-linear} targets. Phi-3's and BLOOM's are fused as their
     * checkpoints store them, one adapter on each fused product (q|k|v, gate|up), as PEFT puts it.
     */
    public static List<String> linears(Architecture architecture) {
        return switch (architecture) {
            case LLAMA, QWEN2, MISTRAL, QWEN3, GEMMA2, GEMMA3 -> List.of("q_proj", "k_proj", "v_proj", "o_proj",
                    "gate_proj", "up_proj", "down_proj");
            case PHI3 -> List.of("qkv_proj", "o_proj", "gate_up_proj", "down_proj");
            case BLOOM -> List.of("query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h");
        };
    }

    /**
     * The base model's units from an adapted model's ({@code adapted}: layouts with adapters after each block's base
     * parameters, {@code values} their full contents) with every adapter merged into its weight, as PEFT's
     * {@code merge_and_unload}: W += scaling * B A (in double, rounded once to fp32).
     *
     * @param base the base model's layouts (each adapted layout's parameters that are not adapters)
     */
    public List<float[]> merge(List<UnitLayout> adapted, List<float[]> values, List<UnitLayout> base) {
        List<float[]> result = new ArrayList<>();
        for (int u = 0; u < base.size(); u++) {
            UnitLayout layout = adapted.get(u);
            float[] merged = java.util.Arrays.copyOf(values.get(u), Math.toIntExact(base.get(u).numel()));
            for (ParamSpec a : layout.params()) {
                if (!a.name().endsWith(".lora_A.weight")) {
                    continue;
                }
                String linear = a.name().substring(0, a.name().length() - ".lora_A.weight".length());
                ParamSpec b = layout.param(adapterName(linear, 'B')), w = base.get(u).param(linear + ".weight");
                int out = w.shape()[0], in = w.shape()[1];
                float[] v = values.get(u);
                for (int o = 0; o < out; o++) {
                    for (int i = 0; i < in; i++) {
                        double sum = 0;
                        for (int k = 0; k < rank; k++) {
                            sum += (double) v[(int) b.offset() + o * rank + k] * v[(int) a.offset() + k * in + i];
                        }
                        int at = (int) w.offset() + o * in + i;
                        merged[at] = (float) (merged[at] + scaling * sum);
                    }
                }
            }
            result.add(merged);
        }
        return result;
    }

    /**
     * A model's units with these adapters appended to each block ({@code base.get(1 + i)}, i &lt; {@code layers}),
     * after its base parameters, with PEFT's names less its {@code base_model.model.} prefix: for the linear
     * {@code linear.apply(i, module)} (a weight's name less {@code .weight}, as
     * {@code model.layers.N.self_attn.q_proj}) {@code <linear>.lora_A.weight} (r, in) then {@code ...lora_B.weight}
     * (out, r), in the order of {@link #modules}.
     */
    public List<UnitLayout> appendTo(List<UnitLayout> base, int layers,
                                     java.util.function.BiFunction<Integer, String, String> linear) {
        List<UnitLayout> result = new ArrayList<>(base);
        for (int i = 0; i < layers; i++) {
            UnitLayout block = base.get(1 + i);
            List<ParamSpec> params = new ArrayList<>(block.params());
            long next = block.numel();
            for (String module : modules) {
                String name = linear.apply(i, module);
                ParamSpec w = block.param(name + ".weight");
                ParamSpec a = new ParamSpec(adapterName(name, 'A'), next, new int[] {rank, w.shape()[1]},
                        ParamSpec.Kind.MATRIX);
                ParamSpec b = new ParamSpec(adapterName(name, 'B'), a.end(), new int[] {w.shape()[0], rank},
                        ParamSpec.Kind.MATRIX);
                next = b.end();
                params.add(a);
                params.add(b);
            }
            result.set(1 + i, new UnitLayout(block.name(), params, next));
        }
        return List.copyOf(result);
    }

    /** PEFT's name of an adapter matrix ({@code A} or {@code B}) of the linear {@code linear} (a weight's name less {@code .weight}). */
    public static String adapterName(String linear, char which) {
        return linear + ".lora_" + which + ".weight";
    }
}
