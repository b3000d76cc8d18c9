package io.fsdp4j.model;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The units of a Llama-family model with Hugging Face's parameter names and shapes: the embeddings, each block, the
 * final norm with the LM head; with LoRA, each block's adapters after its base under PEFT's names, and where each
 * adapter sits in the product its linear is part of. A block keeps q, k, v weights adjacent (and their biases), and
 * gate and up adjacent, so that each pair is one matrix product: (NH+2NKV)*HS rows of q|k|v, 2F rows of gate|up;
 * Phi-3's checkpoint has them fused already (qkv_proj, gate_up_proj).
 */
final class LlamaLayout {
    private LlamaLayout() {}

    /** The units of a model of this family, with Hugging Face parameter names. */
    static List<UnitLayout> units(ModelConfig c) {
        if (!c.architecture().usesRope()) {
            throw new IllegalArgumentException(c.architecture().hfName() + " is not of the Llama family: "
                    + "build it with CausalLMs.create and lay it out with CausalLMs.layout");
        }
        boolean sandwich = c.architecture().gemma();
        int C = c.hidden(), F = c.intermediate(), HS = c.headDim();
        List<UnitLayout> result = new ArrayList<>();
        result.add(new UnitLayout.Builder("embeddings")
                .add("model.embed_tokens.weight", ParamSpec.Kind.EMBEDDING, c.vocabSize(), C).build());
        for (int i = 0; i < c.layers(); i++) {
            String p = "model.layers." + i + ".";
            boolean fused = fused(c);
            var b = new UnitLayout.Builder("block." + i).add(p + "input_layernorm.weight", ParamSpec.Kind.NORM, C);
            if (fused) {
                b.add(p + "self_attn.qkv_proj.weight", ParamSpec.Kind.MATRIX, c.qkvWidth(), C);
            } else {
                b.add(p + "self_attn.q_proj.weight", ParamSpec.Kind.MATRIX, c.heads() * HS, C)
                        .add(p + "self_attn.k_proj.weight", ParamSpec.Kind.MATRIX, c.kvHeads() * HS, C)
                        .add(p + "self_attn.v_proj.weight", ParamSpec.Kind.MATRIX, c.kvHeads() * HS, C);
            }
            if (c.qkvBias()) {
                b.add(p + "self_attn.q_proj.bias", ParamSpec.Kind.BIAS, c.heads() * HS)
                        .add(p + "self_attn.k_proj.bias", ParamSpec.Kind.BIAS, c.kvHeads() * HS)
                        .add(p + "self_attn.v_proj.bias", ParamSpec.Kind.BIAS, c.kvHeads() * HS);
            }
            b.add(p + "self_attn.o_proj.weight", ParamSpec.Kind.MATRIX, C, c.heads() * HS);
            if (c.architecture().normsQueriesAndKeys()) {
                b.add(p + "self_attn.q_norm.weight", ParamSpec.Kind.NORM, HS)
                        .add(p + "self_attn.k_norm.weight", ParamSpec.Kind.NORM, HS);
            }
            b.add(p + "post_attention_layernorm.weight", ParamSpec.Kind.NORM, C);
            if (sandwich) {
                b.add(p + "pre_feedforward_layernorm.weight", ParamSpec.Kind.NORM, C);
            }
            if (fused) {
                b.add(p + "mlp.gate_up_proj.weight", ParamSpec.Kind.MATRIX, 2 * F, C);
            } else {
                b.add(p + "mlp.gate_proj.weight", ParamSpec.Kind.MATRIX, F, C)
                        .add(p + "mlp.up_proj.weight", ParamSpec.Kind.MATRIX, F, C);
            }
            b.add(p + "mlp.down_proj.weight", ParamSpec.Kind.MATRIX, C, F);
            if (sandwich) {
                b.add(p + "post_feedforward_layernorm.weight", ParamSpec.Kind.NORM, C);
            }
            result.add(b.build());
        }
        var head = new UnitLayout.Builder("head").add("model.norm.weight", ParamSpec.Kind.NORM, C);
        if (!c.tieEmbeddings()) {
            head.add("lm_head.weight", ParamSpec.Kind.MATRIX, c.vocabSize(), C);
        }
        result.add(head.build());
        return List.copyOf(result);
    }

    /**
     * The units with LoRA's adapters appended to each block, after its base parameters, with PEFT's names (less its
     * {@code base_model.model.} prefix): {@code model.layers.N.self_attn.q_proj.lora_A.weight} (r, in) and
     * {@code ...lora_B.weight} (out, r), in the order of {@code lora.modules()}. Without LoRA (null), {@link #units}.
     */
    static List<UnitLayout> units(ModelConfig c, LoraSpec lora) {
        List<UnitLayout> base = units(c);
        return lora == null ? base : lora.appendTo(base, c.layers(), (i, m) -> "model.layers." + i + "." + linearOf(m));
    }

    /** Whether q|k|v and gate|up are single tensors in the checkpoint (Phi-3's qkv_proj, gate_up_proj). */
    static boolean fused(ModelConfig c) {
        return c.architecture() == Architecture.PHI3;
    }

    /** The module's path in a block: {@code self_attn.q_proj}, ..., {@code mlp.down_proj}. */
    private static String linearOf(String module) {
        return switch (module) {
            case "q_proj", "k_proj", "v_proj", "qkv_proj", "o_proj" -> "self_attn." + module;
            default -> "mlp." + module;
        };
    }

    /** Where each adapter sits in a block's buffer and in the product its linear is part of. */
    static Map<String, LoraLinear> adapters(ModelConfig c, LoraSpec lora, UnitLayout block) {
        int C = c.hidden(), F = c.intermediate(), HS = c.headDim(), q = c.heads() * HS, kv = c.kvHeads() * HS;
        Map<String, LoraLinear> result = new LinkedHashMap<>();
        for (String module : lora.modules()) {
            String linear = "model.layers.0." + linearOf(module);
            long a = block.param(LoraSpec.adapterName(linear, 'A')).offset();
            long b = block.param(LoraSpec.adapterName(linear, 'B')).offset();
            float s = (float) lora.scaling();
            int r = lora.rank();
            result.put(module, switch (module) {
                case "q_proj" -> new LoraLinear(a, b, C, q, 0, c.qkvWidth(), r, s);
                case "k_proj" -> new LoraLinear(a, b, C, kv, q, c.qkvWidth(), r, s);
                case "v_proj" -> new LoraLinear(a, b, C, kv, q + kv, c.qkvWidth(), r, s);
                case "o_proj" -> new LoraLinear(a, b, q, C, 0, C, r, s);
                case "gate_proj" -> new LoraLinear(a, b, C, F, 0, 2 * F, r, s);
                case "up_proj" -> new LoraLinear(a, b, C, F, F, 2 * F, r, s);
                case "down_proj" -> new LoraLinear(a, b, F, C, 0, C, r, s);
                case "qkv_proj" -> new LoraLinear(a, b, C, c.qkvWidth(), 0, c.qkvWidth(), r, s); // Phi-3's fused
                case "gate_up_proj" -> new LoraLinear(a, b, C, 2 * F, 0, 2 * F, r, s);
                default -> throw new IllegalArgumentException("no linear " + module + " in a Llama block");
            });
        }
        return result;
    }
}
