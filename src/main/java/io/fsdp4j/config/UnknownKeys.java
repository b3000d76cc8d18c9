package io.fsdp4j.config;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.fsdp4j.UserError;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Keys of a config that no section reads: all of them named in one {@link UserError}, each with the key meant where
 * that can be told.
 */
final class UnknownKeys {
    /**
     * Names of other trainers' keys (Hugging Face Trainer, axolotl, torchtune), lower case, each with the key that
     * does its work here. A pointer is given only to a key that exists.
     */
    private static final Map<String, String> OTHER_NAMES = Map.ofEntries(
            Map.entry("max_steps", "train.steps"), Map.entry("total_steps", "train.steps"),
            Map.entry("num_steps", "train.steps"), Map.entry("max_steps_per_epoch", "train.steps"),
            Map.entry("num_train_epochs", "train.epochs"), Map.entry("num_epochs", "train.epochs"),
            Map.entry("epochs", "train.epochs"),
            Map.entry("learning_rate", "optim.lr"), Map.entry("lr", "optim.lr"),
            Map.entry("gradient_accumulation_steps", "train.grad_accum"),
            Map.entry("gradient_accumulation", "train.grad_accum"),
            Map.entry("accumulate_grad_batches", "train.grad_accum"),
            Map.entry("micro_batch_size", "train.batch_size"), Map.entry("per_device_train_batch_size", "train.batch_size"),
            Map.entry("train_batch_size", "train.batch_size"), Map.entry("batch_size", "train.batch_size"),
            Map.entry("seed", "train.seed"),
            Map.entry("save_steps", "checkpoint.every"), Map.entry("save_every_n_steps", "checkpoint.every"),
            Map.entry("save_total_limit", "checkpoint.keep"), Map.entry("resume_from_checkpoint", "checkpoint.resume"),
            Map.entry("output_dir", "run.dir"), Map.entry("run_name", "run.name"),
            Map.entry("warmup_steps", "schedule.warmup_steps"), Map.entry("num_warmup_steps", "schedule.warmup_steps"),
            Map.entry("warmup_ratio", "schedule.warmup_ratio"),
            Map.entry("lr_scheduler_type", "schedule.kind"), Map.entry("lr_scheduler", "schedule.kind"),
            Map.entry("weight_decay", "optim.weight_decay"), Map.entry("max_grad_norm", "optim.max_grad_norm"),
            Map.entry("clip_grad_norm", "optim.max_grad_norm"), Map.entry("gradient_clipping", "optim.max_grad_norm"),
            Map.entry("adam_beta1", "optim.betas"), Map.entry("adam_beta2", "optim.betas"),
            Map.entry("adam_epsilon", "optim.eps"),
            Map.entry("sequence_len", "data.seq_len"), Map.entry("max_seq_length", "data.seq_len"),
            Map.entry("max_seq_len", "data.seq_len"), Map.entry("max_length", "data.seq_len"),
            Map.entry("block_size", "data.seq_len"), Map.entry("seq_len", "data.seq_len"),
            Map.entry("sample_packing", "data.pack"), Map.entry("packing", "data.pack"), Map.entry("packed", "data.pack"),
            Map.entry("datasets", "data.train"), Map.entry("dataset", "data.train"),
            Map.entry("train_file", "data.train"), Map.entry("eval_file", "data.eval"),
            Map.entry("validation_file", "data.eval"), Map.entry("test_datasets", "data.eval"),
            Map.entry("base_model", "model.path"), Map.entry("model_name_or_path", "model.path"),
            Map.entry("pretrained_model_name_or_path", "model.path"), Map.entry("checkpointer", "model.path"),
            Map.entry("bf16", "fsdp.param_dtype"), Map.entry("fp16", "fsdp.param_dtype"),
            Map.entry("fp8", "fsdp.param_dtype"), Map.entry("float8", "fsdp.param_dtype"),
            Map.entry("dtype", "fsdp.param_dtype"), Map.entry("mixed_precision", "fsdp.param_dtype"),
            Map.entry("gradient_checkpointing", "fsdp.activation_checkpointing"),
            Map.entry("enable_activation_checkpointing", "fsdp.activation_checkpointing"),
            Map.entry("fsdp_cpu_offload", "fsdp.cpu_offload"), Map.entry("fsdp_offload_params", "fsdp.cpu_offload"),
            Map.entry("logging_steps", "log.every"), Map.entry("log_every_n_steps", "log.every"),
            Map.entry("eval_steps", "log.eval_every"),
            Map.entry("report_to", "log.tensorboard"), Map.entry("logging_dir", "log.tensorboard"),
            Map.entry("use_tensorboard", "log.tensorboard"),
            Map.entry("nproc_per_node", "dist.ranks"), Map.entry("world_size", "dist.ranks"),
            Map.entry("nnodes", "dist.nnodes"),
            Map.entry("attn_implementation", "attention.kernel"), Map.entry("flash_attention", "attention.kernel"),
            Map.entry("sdp_attention", "attention.kernel"), Map.entry("tunableop", "matmul.algorithm"),
            Map.entry("load_in_4bit", "lora.quantize"), Map.entry("bnb_4bit_quant_type", "lora.quantize"));

    /**
     * Fails when {@code root} holds keys that no section reads ({@code known}: section, then the keys it reads),
     * naming every one of them at once, each with the key meant where that can be told: the same name in another
     * section, or the name another trainer gives it ({@code max_steps}, {@code learning_rate}, ...).
     */
    static void require(ObjectNode root, Map<String, List<String>> known) {
        List<String> unknown = new ArrayList<>();
        root.fields().forEachRemaining(section -> {
            List<String> keys = known.get(section.getKey());
            if (keys == null) {
                unknown.add(section.getKey());
            } else if (section.getValue() instanceof ObjectNode values) {
                values.fieldNames().forEachRemaining(key -> {
                    if (!keys.contains(key)) {
                        unknown.add(section.getKey() + "." + key);
                    }
                });
            }
        });
        if (unknown.isEmpty()) {
            return;
        }
        if (unknown.size() == 1) {
            String key = unknown.getFirst();
            int dot = key.indexOf('.');
            String where = dot < 0 ? "known sections: " + String.join(", ", known.keySet())
                    : "known keys in " + key.substring(0, dot) + ": " + String.join(", ", known.get(key.substring(0, dot)));
            String meant = meant(key, known);
            throw new UserError("unknown config key '" + key + "'; " + where
                    + (meant == null ? "" : "; did you mean '" + meant + "'?"));
        }
        List<String> named = new ArrayList<>();
        for (String key : unknown) {
            String meant = meant(key, known);
            named.add("'" + key + "'" + (meant == null ? "" : " (did you mean '" + meant + "'?)"));
        }
        throw new UserError("unknown config keys " + String.join(", ", named) + "; known sections: "
                + String.join(", ", known.keySet()) + " ('fsdp4j train --help' lists every key)");
    }

    /** The known key that an unknown one most likely means, or null. */
    private static String meant(String key, Map<String, List<String>> known) {
        String lower = key.toLowerCase(Locale.ROOT);
        String last = lower.substring(lower.lastIndexOf('.') + 1);
        for (var section : known.entrySet()) { // the same name in another section (steps: train.steps)
            if (section.getValue().contains(last) && !lower.equals(section.getKey() + "." + last)) {
                return section.getKey() + "." + last;
            }
        }
        String other = OTHER_NAMES.get(last);
        if (other != null) {
            String[] parts = other.split("\\.", 2);
            if (known.getOrDefault(parts[0], List.of()).contains(parts[1])) {
                return other;
            }
        }
        return null;
    }

    private UnknownKeys() {}
}
