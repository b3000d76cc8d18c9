/**
 * Sharded checkpoints: saved by every rank of the first replica at once, resumed exactly (parameters, AdamW
 * moments and step; the data order is a function of the step), loadable onto any number of ranks or another
 * strategy, and exportable to a Hugging Face model directory. No pickle, nothing executable: safetensors and JSON.
 */
package io.fsdp4j.checkpoint;
