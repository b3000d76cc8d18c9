/**
 * Text to token ids and back: {@link io.fsdp4j.tokenizer.Tokenizer} runs a Hugging Face {@code tokenizer.json}
 * through the reference implementation (the Rust tokenizers library, whose native code ships in the jar) and reads
 * the special tokens and chat template of {@code tokenizer_config.json}; {@link io.fsdp4j.tokenizer.ChatTemplate}
 * renders Jinja chat templates as transformers does (marking the assistant's turns, from which
 * {@link io.fsdp4j.data.ChatTokens} takes ids and labels with loss on those turns, checked against transformers'
 * assistant masks; {@link io.fsdp4j.data.AlpacaFormat} builds instruction-tuning prompts and their loss masks).
 *
 * <p>Conventions: ids are {@code int}s in {@code [0, vocabSize)}; "add special tokens" means what the tokenizer's
 * post-processor adds (a BOS for Llama, nothing for Qwen), never padding or truncation; labels use -100 for
 * positions without loss. Expected ids in the tests come from transformers.js ({@code tools/tokenizer-oracle}).
 *
 * <p>May use: model, hf, backend, cuda, report, config, tensor, safetensors; never data (which uses it: formatting
 * examples into ids and labels, {@code data.ChatTokens} and {@code data.AlpacaFormat}, is data's).
 */
package io.fsdp4j.tokenizer;
