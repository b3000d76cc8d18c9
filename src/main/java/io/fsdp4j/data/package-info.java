/**
 * Training data: pre-tokenized JSONL, plain text as bytes, the built-in demo corpus, and the batch sampler whose
 * order is a pure function of (seed, step) and does not depend on how a global batch is split across ranks.
 */
package io.fsdp4j.data;
