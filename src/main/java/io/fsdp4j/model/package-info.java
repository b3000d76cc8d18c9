/**
 * Models written for one device. A {@link io.fsdp4j.model.CausalLM} is a sequence of units (embeddings, decoder
 * blocks, final norm and head), each with one flat parameter buffer described by
 * {@link io.fsdp4j.model.ParamSpec}s that keep their Hugging Face names. Stages take whole buffers and know
 * nothing of sharding; {@link io.fsdp4j.model.SingleDeviceModel} runs them plainly, the FSDP engine runs them
 * with gathered parameters.
 *
 * <p>Adding a model: its config fields in {@link io.fsdp4j.model.ModelConfig} (and config.json reading in
 * {@code hf}), a layout of units with checkpoint names, forward and backward per stage with the saved activations
 * in a record, and golden fixtures from transformers (tools/golden) with the tests that use them.
 */
package io.fsdp4j.model;
