package io.fsdp4j.model;

import io.fsdp4j.config.LoraSection;
import java.util.ArrayList;
import java.util.List;

/**
 * Low-rank adapters on a model's linears, as PEFT's LoRA puts them: each targeted linear y = x W^T gets
 * y = x W^T + scaling * x A^T B^T, with A (r, in) and B (out, r) trained and W frozen.
 *
 * @param rank    r
 * @param scaling the factor on the adapters' output (alpha / r, or alpha / sqrt(r) with rsLoRA)
 * @param modules the targeted linears by their names in the checkpoint ({@code q_proj}, ..., {@code down_proj})
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

    /** The adapters {@code lora.*} asks for, or null when LoRA is off ({@code lora.rank} 0). */
    public static LoraSpec of(LoraSection lora) {
        if (!lora.enabled()) {
            return null;
        }
        return new LoraSpec(lora.rank(), lora.scaling(), lora.modules(), lora.dropout());
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

    /** PEFT's name of an adapter matrix ({@code A} or {@code B}) of the linear {@code linear} (a weight's name less {@code .weight}). */
    public static String adapterName(String linear, char which) {
        return linear + ".lora_" + which + ".weight";
    }
}
