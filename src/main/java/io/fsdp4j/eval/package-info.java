/**
 * Evaluation of models: per-sequence losses ({@code fsdp4j score}); loss and perplexity, and SQuAD exact match
 * and F1 from greedy generation ({@code fsdp4j eval}, {@link io.fsdp4j.eval.Evaluation}, also used during
 * training). {@link io.fsdp4j.eval.EvalModel} loads a model whole from a Hugging Face directory or an fsdp4j
 * checkpoint; {@link io.fsdp4j.data.SquadPrompt} is the one SQuAD prompt format, shared with data preparation.
 *
 * <p>May use: every package below the loop (plan, doctor, preflight, job, fsdp, checkpoint, optim, comm, data,
 * tokenizer, model, hf, backend, cuda, report, config, tensor, safetensors), never train (which uses eval); used by
 * train and cli.
 */
package io.fsdp4j.eval;
