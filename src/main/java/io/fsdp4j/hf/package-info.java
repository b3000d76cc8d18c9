/**
 * Hugging Face model directories: {@code config.json} into a model config (refusing settings that would change the
 * computation in ways not implemented), and safetensors checkpoints as a source of any element range of a unit. A
 * model named by its Hub id is found in the Hugging Face cache, laid out as huggingface_hub lays it out, and downloaded
 * into it when absent ({@link io.fsdp4j.hf.ModelLocation}, {@link io.fsdp4j.hf.HubCache},
 * {@link io.fsdp4j.hf.HubDownload}).
 *
 * <p>May use: model, backend, cuda, report, config, tensor, safetensors; never data or anything above.
 */
package io.fsdp4j.hf;
