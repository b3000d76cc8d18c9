/**
 * Evaluation of models: per-sequence losses ({@code fsdp4j score}); loss and perplexity, and SQuAD exact match
 * and F1 from greedy generation ({@code fsdp4j eval}, {@link io.fsdp4j.eval.Evaluation}, also used during
 * training). {@link io.fsdp4j.eval.EvalModel} loads a model whole from a Hugging Face directory or an fsdp4j
 * checkpoint; {@link io.fsdp4j.data.SquadPrompt} is the one SQuAD prompt format, shared with data preparation.
 */
package io.fsdp4j.eval;
