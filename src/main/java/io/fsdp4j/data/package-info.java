/**
 * Training data. {@link io.fsdp4j.data.Datasets} is the one way in ({@code data.train}, {@code data.eval}): token
 * files, pre-tokenized JSONL, conversations ({@code messages}, ShareGPT), prompt/completion, {@code {"text"}} lines,
 * Alpaca or SQuAD JSON (told from the content, {@link io.fsdp4j.data.DatasetFormat#detect}, or named,
 * {@link io.fsdp4j.data.ReadOptions}, and tokenized as {@code prepare} would: the model's tokenizer and chat template,
 * or bytes for a preset), plain text as bytes, or the built-in demo's instructions, cut into sequences of exactly
 * {@code seq_len} tokens by {@link io.fsdp4j.data.SequenceWindows} (one document each, or whole documents packed by
 * best-fit decreasing); several datasets mixed by weight ({@link io.fsdp4j.data.Datasets#mix}). Files may be
 * compressed ({@code .gz}, {@code .zst}) or a directory of shards ({@link io.fsdp4j.data.DatasetFiles}).
 *
 * <p>{@code fsdp4j prepare} ({@link io.fsdp4j.data.Prepare}) tokenizes a dataset once ({@link
 * io.fsdp4j.data.DatasetReader}: Alpaca, SQuAD v1.1, text, tokens) into a directory of token files that
 * {@link io.fsdp4j.data.TokenFiles} memory-maps: {@code tokens.bin}, {@code labels.bin} (int32 little-endian;
 * label -100: no loss), {@code documents.bin} (int64 document offsets), {@code meta.json} (with the documents held
 * out for evaluation) and {@code answers.jsonl}. Tokenizers are seen through {@link io.fsdp4j.data.TextTokenizer},
 * whose {@code load} resolves every {@code --tokenizer}: a Hugging Face tokenizer, or {@code bytes}, {@link
 * io.fsdp4j.data.ByteTokenizer} (UTF-8 bytes, EOS 0) for the {@code tiny} preset. An example becomes ids and labels
 * here: a conversation through its chat template ({@link io.fsdp4j.data.ChatTokens}), an instruction through the
 * Alpaca template ({@link io.fsdp4j.data.AlpacaFormat}).
 *
 * <p>{@link io.fsdp4j.data.BatchSampler} orders the sequences: a pure function of (seed, step) that does not
 * depend on how a global batch is split across ranks.
 *
 * <p>May use: tokenizer, model (the batch conventions: {@code TokenBatch.IGNORE}), hf, backend, cuda, report,
 * config, tensor, safetensors; never the engine, job, the loop or the tools (which use it).
 */
package io.fsdp4j.data;
