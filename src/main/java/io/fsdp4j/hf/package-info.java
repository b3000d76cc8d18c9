/**
 * Hugging Face model directories: {@code config.json} into a model config (refusing settings that would change the
 * computation in ways not implemented), and safetensors checkpoints as a source of any element range of a unit.
 */
package io.fsdp4j.hf;
