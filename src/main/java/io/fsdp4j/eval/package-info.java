/**
 * Evaluation of models: per-sequence losses ({@code fsdp4j score}); loss and perplexity, and SQuAD exact match
 * and F1 from greedy generation ({@code fsdp4j eval}; during training). {@link io.fsdp4j.eval.ShardedEvaluation}
 * runs them on the ranks of a sharded model, forward only through its units, each rank its share of the data;
 * {@link io.fsdp4j.train.EvalJob} starts those ranks for {@code eval} and {@code score} as {@code train} starts its
 * own. {@link io.fsdp4j.eval.Evaluation} holds the measures and runs them on a whole model (the reference of the
 * tests); {@link io.fsdp4j.eval.EvalModel} names a Hugging Face directory or an fsdp4j checkpoint to evaluate;
 * {@link io.fsdp4j.data.SquadPrompt} is the one SQuAD prompt format, shared with data preparation.
 *
 * <p>May use: every package below the loop (plan, doctor, preflight, job, fsdp, checkpoint, optim, comm, data,
 * tokenizer, model, hf, backend, cuda, report, config, tensor, safetensors), never train (which uses eval); used by
 * train and cli.
 */
package io.fsdp4j.eval;
