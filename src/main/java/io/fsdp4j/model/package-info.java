/**
 * Models written for one device. A {@link io.fsdp4j.model.CausalLM} is a sequence of units (embeddings, decoder
 * blocks, final norm and head), each with one flat parameter buffer described by
 * {@link io.fsdp4j.model.ParamSpec}s that keep their Hugging Face names. Stages take whole buffers and know
 * nothing of sharding; {@link io.fsdp4j.model.SingleDeviceModel} runs them plainly, the FSDP engine runs them
 * with gathered parameters. {@link io.fsdp4j.model.CausalLMs} picks the implementation from the config's
 * architecture: {@link io.fsdp4j.model.LlamaModel} (Llama, Mistral, Qwen2; rotary embedding with the scalings of
 * {@link io.fsdp4j.model.RopeScaling}) or {@link io.fsdp4j.model.BloomModel} (LayerNorm, ALiBi, GELU).
 *
 * <p>Adding a model: its config fields in {@link io.fsdp4j.model.ModelConfig} (and config.json reading in
 * {@code hf}), a layout of units with checkpoint names, a case in {@link io.fsdp4j.model.CausalLMs}, forward and
 * backward per stage with the saved activations in a record implementing
 * {@link io.fsdp4j.model.BlockActivations} (marking those that selective checkpointing recomputes: the element-wise
 * ones, see {@link io.fsdp4j.model.CausalLM#blockForwardSelective}), and golden fixtures from transformers (tools/golden) with the tests
 * that use them.
 */
package io.fsdp4j.model;
