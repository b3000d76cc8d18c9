package io.fsdp4j.model;

import io.fsdp4j.tensor.Tensor;

/**
 * The parameters of a Llama-family block as views of its flat buffer, parameters and gradients alike (the same
 * offsets in every block; -1 for what the family lacks). norm2 is the MLP's input norm: post_attention_layernorm in
 * Llama's naming, pre_feedforward_layernorm in Gemma's, where post_attention_layernorm (postAttnNorm) and
 * post_feedforward_layernorm (postMlpNorm) follow attention and the MLP.
 */
final class LlamaBlockParams {
    private final ModelConfig config;
    private final long norm1, qkvWeight, qkvBias, out, qNorm, kNorm, postAttnNorm, norm2, gateUp, down, postMlpNorm;

    /** The offsets of {@code block}, a block's layout (its first layer's names). */
    LlamaBlockParams(ModelConfig config, UnitLayout block) {
        this.config = config;
        String p = "model.layers.0.";
        boolean sandwich = config.gemma() != null, fused = LlamaLayout.fused(config);
        boolean headNorms = config.architecture().normsQueriesAndKeys();
        this.norm1 = block.param(p + "input_layernorm.weight").offset();
        this.qkvWeight = block.param(p + (fused ? "self_attn.qkv_proj.weight" : "self_attn.q_proj.weight")).offset();
        this.qkvBias = config.qkvBias() ? block.param(p + "self_attn.q_proj.bias").offset() : -1;
        this.out = block.param(p + "self_attn.o_proj.weight").offset();
        this.qNorm = headNorms ? block.param(p + "self_attn.q_norm.weight").offset() : -1;
        this.kNorm = headNorms ? block.param(p + "self_attn.k_norm.weight").offset() : -1;
        this.postAttnNorm = sandwich ? block.param(p + "post_attention_layernorm.weight").offset() : -1;
        this.norm2 = block.param(p + (sandwich ? "pre_feedforward_layernorm.weight"
                : "post_attention_layernorm.weight")).offset();
        this.gateUp = block.param(p + (fused ? "mlp.gate_up_proj.weight" : "mlp.gate_proj.weight")).offset();
        this.down = block.param(p + "mlp.down_proj.weight").offset();
        this.postMlpNorm = sandwich ? block.param(p + "post_feedforward_layernorm.weight").offset() : -1;
    }

    Tensor norm1(Tensor u) { return u.view(norm1, config.hidden()); }

    Tensor qkvWeight(Tensor u) { return u.view(qkvWeight, config.qkvWidth(), config.hidden()); }

    Tensor qkvBias(Tensor u) { return config.qkvBias() ? u.view(qkvBias, config.qkvWidth()) : null; }

    Tensor outWeight(Tensor u) { return u.view(out, config.hidden(), config.heads() * config.headDim()); }

    Tensor qNorm(Tensor u) { return u.view(qNorm, config.headDim()); }

    Tensor kNorm(Tensor u) { return u.view(kNorm, config.headDim()); }

    Tensor postAttnNorm(Tensor u) { return u.view(postAttnNorm, config.hidden()); }

    Tensor norm2(Tensor u) { return u.view(norm2, config.hidden()); }

    Tensor postMlpNorm(Tensor u) { return u.view(postMlpNorm, config.hidden()); }

    Tensor gateUpWeight(Tensor u) { return u.view(gateUp, 2 * config.intermediate(), config.hidden()); }

    Tensor downWeight(Tensor u) { return u.view(down, config.hidden(), config.intermediate()); }
}
