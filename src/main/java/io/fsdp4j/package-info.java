/**
 * fsdp4j: fully sharded data parallel training of language models in Java. Start at {@code cli.Main}; the
 * packages are listed in README.md.
 *
 * <p>May use: nothing of fsdp4j. Its three classes ({@link io.fsdp4j.UserError}, {@link io.fsdp4j.ExitStatus},
 * {@link io.fsdp4j.Version}) are used everywhere. The packages, top to bottom (each may import only those below it;
 * LayeringTest holds them to it): {@code cli}; {@code train}, {@code eval}; {@code plan}, {@code doctor}, {@code
 * preflight}; {@code job}; {@code fsdp}, {@code checkpoint}, {@code optim}; {@code comm}; {@code data}, {@code
 * tokenizer}; {@code model}, {@code hf}; {@code backend}, {@code cuda}; {@code report}; {@code config}; {@code
 * tensor}, {@code safetensors}.
 */
package io.fsdp4j;
