/**
 * Models written for one device. A {@link io.fsdp4j.model.CausalLM} is a sequence of units (embeddings, decoder
 * blocks, final norm and head), each with one flat parameter buffer described by
 * {@link io.fsdp4j.model.ParamSpec}s that keep their Hugging Face names. Stages take whole buffers and know
 * nothing of sharding; {@link io.fsdp4j.model.SingleDeviceModel} runs them plainly, the FSDP engine runs them
 * with gathered parameters. Greedy generation ({@link io.fsdp4j.model.Generator}) runs batches of prompts through
 * either ({@link io.fsdp4j.model.ForwardPass}), each block extending a {@link io.fsdp4j.model.KvCache} on the
 * model's device. {@link io.fsdp4j.model.CausalLMs} picks the implementation from the config's
 * architecture: {@link io.fsdp4j.model.LlamaModel} (Llama, Mistral, Qwen2, Qwen3, Phi-3, Gemma 2 and 3; rotary
 * embedding with the scalings of {@link io.fsdp4j.model.RopeScaling}; Qwen3's per-head q/k RMSNorms; Phi-3's fused
 * checkpoint tensors; Gemma's form of the block, {@link io.fsdp4j.model.ModelConfig.Gemma}: norms of (1 + w) around
 * attention and MLP, GeGLU, sliding and global layers, soft caps) or {@link io.fsdp4j.model.BloomModel} (LayerNorm,
 * ALiBi, GELU). A family that differs from Llama's block in a few places is a setting of the config read where it
 * applies, not a copy of the block.
 *
 * <p>LoRA ({@link io.fsdp4j.model.LoraSpec}, PEFT's): a model built with adapters lays each block out as its base
 * parameters, then the targeted linears' {@code lora_A} (r, in) and {@code lora_B} (out, r) under PEFT's names, and
 * says where the frozen part of each unit ends ({@link io.fsdp4j.model.CausalLM#frozenNumel}); the forward adds
 * scaling * dropout(x) A^T B^T to each targeted product (dropout in training only, its mask drawn from the batch's
 * {@link io.fsdp4j.model.TokenBatch.Training} place) and the backward computes the adapters' gradients only: the
 * frozen weights' products are left out. Every family has them, under PEFT's names of its linears
 * ({@link io.fsdp4j.model.LoraSpec#linears}: Phi-3's and BLOOM's fused products as one adapter each), with
 * {@link io.fsdp4j.model.LoraSpec#merge} for PEFT's merge_and_unload.
 *
 * <p>Adding a model family, in order (Qwen3 went this way; each step has a test that fails without it):
 * <ol>
 *   <li>Its {@code architectures} name in {@link io.fsdp4j.model.Architecture}, and its config.json read by
 *   {@code hf.HfConfig} (with transformers' defaults for absent keys, and every setting that would change the
 *   computation in a way not implemented refused with the key's name) and written back by {@code HfConfig.toJson}
 *   (so that an export of a preset-started run loads in transformers). Fields the record does not have yet go into
 *   {@link io.fsdp4j.model.ModelConfig}, which checkpoints keep in their index: a new field must read as "absent"
 *   from older index.json files.</li>
 *   <li>A layout of units with the checkpoint's names and shapes (a fused tensor stays fused, under its checkpoint
 *   name), tensors that one matrix product reads kept adjacent; a case in {@link io.fsdp4j.model.CausalLMs}.</li>
 *   <li>Forward and backward per stage with the saved activations in a record implementing
 *   {@link io.fsdp4j.model.BlockActivations} (marking those that selective checkpointing recomputes: the element-wise
 *   ones, see {@link io.fsdp4j.model.CausalLM#blockForwardSelective}), the block forward's attention over a
 *   {@link io.fsdp4j.model.KvCache} when given one (generation goes through the same block code:
 *   {@link io.fsdp4j.model.Generator}), and the model's statement of those records' bytes,
 *   {@link io.fsdp4j.model.ActivationSizes}, beside the record (the planner and the engine's accounting read it;
 *   ActivationSizesTest and ActivationCheckpointingTest hold it to the tensors).</li>
 *   <li>An op the backends lack goes into {@code backend.Backend} with the CPU version (the reference, checked
 *   against finite differences) and the CUDA one (a kernel in {@code src/main/resources/kernels}, compiled by
 *   tools/kernels/check.sh, checked against the CPU op by a {@code @Tag("gpu")} test).</li>
 *   <li>A golden fixture from transformers (tools/golden/make_golden_arch.py: a tiny random model, float64, with an
 *   independent reference of the architecture in the script) listed in {@code Golden.ARCH_MODELS}, which puts it
 *   through GoldenArchitecturesTest (logits 1e-5, every gradient 1e-4, generation), GoldenArchitecturesTrainingTest
 *   (ten AdamW steps on 1 to 4 ranks, 1e-4) and the GPU tests; every sharding strategy and resume and export
 *   through the training run a user starts (as Qwen3TrainingTest); the export checked once by transformers
 *   (tools/golden/check_export.py).</li>
 *   <li>Presets of the released sizes in {@link io.fsdp4j.model.ModelConfig#preset} (bench and plan read them), and
 *   the README's table of models.</li>
 * </ol>
 *
 * <p>May use: backend, cuda, report, config, tensor, safetensors; never hf (which uses it), data or anything above.
 */
package io.fsdp4j.model;
