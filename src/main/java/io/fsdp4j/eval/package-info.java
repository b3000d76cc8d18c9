/** Evaluation of models: per-sequence losses ({@code fsdp4j score}). */
package io.fsdp4j.eval;
