/**
 * fsdp4j: fully sharded data parallel training of language models in Java. Start at {@code cli.Main}; the
 * packages are listed in README.md.
 */
package io.fsdp4j;
