package io.fsdp4j.config;

import io.fsdp4j.UserError;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * {@code lora.*}: low-rank adapters (PEFT's LoRA) on the model's linear layers instead of training every weight.
 * The base model is held sharded and frozen; only the adapters train. Off while {@code rank} is 0 (the default).
 *
 * @param rank          {@code lora.rank}: r, the adapters' inner width; 0: no LoRA, every weight trains
 * @param alpha         {@code lora.alpha}: the adapters' output is scaled by alpha / r (alpha / sqrt(r) with rsLoRA)
 * @param dropout       {@code lora.dropout}: dropout on the adapters' input, in [0, 1)
 * @param targetModules {@code lora.target_modules}: the linears that get adapters, by their names in the checkpoint
 *                      (PEFT's target names: each family's are {@code LoraSpec.linears}), or alone
 *                      {@code all-linear} (every linear of every block) or {@code auto} (the default: PEFT's default
 *                      targets of the family, {@code LoraSpec.peftDefaults})
 * @param rslora        {@code lora.rslora}: rank-stabilised scaling alpha / sqrt(r)
 * @param init          {@code lora.init}: a PEFT adapter directory to start from, instead of PEFT's initialisation
 * @param quantize      {@code lora.quantize}: the frozen base's block linears as they are ({@code none}) or in NF4
 *                      ({@code nf4}: QLoRA, bitsandbytes' {@code bnb_4bit_quant_type})
 */
public record LoraSection(int rank, double alpha, double dropout, List<String> targetModules, boolean rslora,
                          Path init, BaseQuantization quantize) {
    /** The name that targets every linear of every block. */
    public static final String ALL_LINEAR = "all-linear";
    /** The name that targets what PEFT targets in the family when no target_modules is given: the default. */
    public static final String AUTO = "auto";
    /**
     * The names of the linears adapters can target in some family (Llama's, Phi-3's fused ones, BLOOM's): a name
     * outside them is a typo, refused here; which of them a model has is checked against its family when it is built.
     */
    public static final List<String> MODULES = List.of("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
            "up_proj", "down_proj", "qkv_proj", "gate_up_proj", "query_key_value", "dense", "dense_h_to_4h",
            "dense_4h_to_h");

    public LoraSection {
        Check.atLeast("lora.rank", rank, 0);
        Check.positive("lora.alpha", alpha);
        Check.inRange("lora.dropout", dropout, 0, 1, true);
        Check.present("lora.target_modules", targetModules);
        Check.present("lora.quantize", quantize);
        if (quantize != BaseQuantization.NONE && rank == 0) {
            throw new UserError("config key 'lora.quantize' is " + quantize.spelling() + ", but 'lora.rank' is 0: a "
                    + "quantized base is frozen, so only a LoRA run (lora.rank > 0) can train with it; set lora.rank "
                    + "or lora.quantize=none");
        }
        targetModules = List.copyOf(targetModules);
        if (targetModules.isEmpty()) {
            throw new UserError("config key 'lora.target_modules' must name at least one linear (" + String.join(",",
                    MODULES) + ") or be " + ALL_LINEAR);
        }
        Set<String> seen = new LinkedHashSet<>();
        for (String m : targetModules) {
            boolean word = m.equals(ALL_LINEAR) || m.equals(AUTO);
            if (word && targetModules.size() > 1) {
                throw new UserError("config key 'lora.target_modules': " + m + " stands alone; got "
                        + String.join(",", targetModules));
            }
            if (!word && !MODULES.contains(m)) {
                throw new UserError("config key 'lora.target_modules': unknown module '" + m + "'; use names of "
                        + String.join(", ", MODULES) + ", or " + ALL_LINEAR + ", or " + AUTO);
            }
            if (!seen.add(m)) {
                throw new UserError("config key 'lora.target_modules' names '" + m + "' twice");
            }
        }
    }

    /** With the base as it is (no quantization). */
    public LoraSection(int rank, double alpha, double dropout, List<String> targetModules, boolean rslora, Path init) {
        this(rank, alpha, dropout, targetModules, rslora, init, BaseQuantization.NONE);
    }

    public static LoraSection defaults() {
        return new LoraSection(0, 8, 0, List.of(AUTO), false, null, BaseQuantization.NONE);
    }

    /** Whether the frozen base's block linears are held in NF4 (QLoRA). */
    public boolean quantized() {
        return quantize == BaseQuantization.NF4;
    }

    /** Whether LoRA is on (a rank above 0). */
    public boolean enabled() {
        return rank > 0;
    }

    /**
     * The targeted modules among a family's linears ({@code linears}, in the block's order): all of them with
     * {@code all-linear}, the family's PEFT defaults ({@code peftDefaults}, among its linears) with {@code auto}, else
     * those named, in the block's order; null when a name is not among them.
     */
    public List<String> modules(List<String> linears, List<String> peftDefaults) {
        if (targetModules.contains(ALL_LINEAR)) {
            return linears;
        }
        List<String> named = targetModules.contains(AUTO) ? peftDefaults : targetModules;
        return linears.containsAll(named) ? linears.stream().filter(named::contains).toList() : null;
    }

    /** The factor on the adapters' output: alpha / r, or alpha / sqrt(r) with rsLoRA (PEFT's scaling). */
    public double scaling() {
        return rslora ? alpha / Math.sqrt(rank) : alpha / rank;
    }

    static LoraSection bind(ConfigSection s) {
        var d = defaults();
        int rank = s.integer("rank", d.rank());
        double alpha = s.number("alpha", d.alpha());
        double dropout = s.number("dropout", d.dropout());
        List<String> targets = s.strings("target_modules", d.targetModules());
        boolean rslora = s.bool("rslora", d.rslora());
        Path init = s.path("init");
        BaseQuantization quantize = s.choice("quantize", BaseQuantization.class, d.quantize());
        s.finish();
        return new LoraSection(rank, alpha, dropout, targets, rslora, init, quantize);
    }

    Map<String, Object> toMap() {
        var m = new LinkedHashMap<String, Object>();
        m.put("rank", rank);
        m.put("alpha", alpha);
        m.put("dropout", dropout);
        m.put("target_modules", String.join(",", targetModules));
        m.put("rslora", rslora);
        m.put("init", TrainConfig.text(init));
        m.put("quantize", quantize.spelling());
        return m;
    }
}
