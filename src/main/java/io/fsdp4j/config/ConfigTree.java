package io.fsdp4j.config;

import com.fasterxml.jackson.core.JacksonException;
import com.fasterxml.jackson.core.JsonLocation;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.dataformat.yaml.YAMLMapper;
import io.fsdp4j.UserError;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * The untyped side of the config: a YAML file read into a tree, {@code --set} assignments applied to it, and
 * {@link Section}, which reads typed values out of one mapping and reports the first wrong key as a one-line
 * {@link UserError}. Range checks live in the section records, not here.
 */
final class ConfigTree {
    /** The value of a key whose default is told at run time ({@code data.seq_len: auto}). */
    static final String AUTO = "auto";
    private static final String BOM = "\uFEFF";
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;
    private static final YAMLMapper YAML = YAMLMapper.builder()
            .enable(JsonParser.Feature.STRICT_DUPLICATE_DETECTION)
            .build();
    private static final Pattern INTEGER = Pattern.compile("[+-]?[0-9](_?[0-9])*");
    private static final Pattern DECIMAL = Pattern.compile(
            "[+-]?([0-9](_?[0-9])*(\\.([0-9](_?[0-9])*)?)?|\\.[0-9](_?[0-9])*)([eE][+-]?[0-9]+)?");

    private ConfigTree() {}

    static ObjectNode empty() {
        return NODES.objectNode();
    }

    /** Reads a YAML config file; an empty file is an empty config. */
    static ObjectNode readYaml(Path file) {
        String text;
        try {
            text = Files.readString(file);
        } catch (NoSuchFileException e) {
            throw new UserError("config file '" + file + "' not found");
        } catch (java.nio.charset.CharacterCodingException e) {
            throw new UserError("config file '" + file + "' is not UTF-8 text; save it as UTF-8");
        } catch (IOException e) {
            String why = Files.isDirectory(file) ? "it is a directory" : e.getMessage();
            throw new UserError("cannot read config file '" + file + "': " + why);
        }
        if (text.startsWith(BOM)) { // as editors on Windows save UTF-8
            text = text.substring(1);
        }
        JsonNode root;
        try {
            root = YAML.readTree(text);
        } catch (JacksonException e) {
            JsonLocation where = e.getLocation();
            String line = where != null && where.getLineNr() > 0 ? " at line " + where.getLineNr() : "";
            throw new UserError("cannot parse config file '" + file + "'" + line + ": " + firstLine(e.getOriginalMessage()));
        }
        if (root == null || root.isMissingNode() || root.isNull()) {
            return empty();
        }
        if (!root.isObject()) {
            throw new UserError("config file '" + file + "' must be a mapping of sections (model:, data:, train:, ...), got "
                    + describe(root));
        }
        expandDottedKeys((ObjectNode) root, "", file);
        return (ObjectNode) root;
    }

    /**
     * Rewrites keys written with dots ({@code model.preset: tiny}, as {@code --set} spells them) into the nested
     * form ({@code model:} then {@code preset: tiny}), at every level of mappings. A key given both ways is an error
     * naming both spellings.
     */
    static void expandDottedKeys(ObjectNode node, String prefix, Path file) {
        List<String> names = new ArrayList<>();
        node.fieldNames().forEachRemaining(names::add);
        for (String name : names) {
            JsonNode value = node.get(name);
            if (name.indexOf('.') < 0) {
                continue;
            }
            String[] parts = name.split("\\.", -1);
            for (String part : parts) {
                if (part.isEmpty()) {
                    throw new UserError("config file '" + file + "': key '" + prefix + name
                            + "' has an empty part; write section.key, e.g. train.steps");
                }
            }
            node.remove(name);
            ObjectNode target = node;
            for (int i = 0; i < parts.length - 1; i++) {
                JsonNode child = target.get(parts[i]);
                if (child == null || child.isNull()) {
                    target = target.putObject(parts[i]);
                } else if (child instanceof ObjectNode object) {
                    target = object;
                } else {
                    throw new UserError("config file '" + file + "': key '" + prefix + name + "' is inside '"
                            + prefix + String.join(".", List.of(parts).subList(0, i + 1)) + "', which is given as "
                            + describe(child) + ", not a section");
                }
            }
            String last = parts[parts.length - 1];
            JsonNode existing = target.get(last);
            if (existing != null && !(existing.isObject() && value.isObject())) {
                throw new UserError("config file '" + file + "': key '" + prefix + name + "' is given twice (once"
                        + " with dots, once nested); keep one");
            }
            if (existing instanceof ObjectNode into && value instanceof ObjectNode from) {
                from.fieldNames().forEachRemaining(k -> {
                    if (into.has(k)) {
                        throw new UserError("config file '" + file + "': key '" + prefix + name + "." + k
                                + "' is given twice (once with dots, once nested); keep one");
                    }
                });
                into.setAll(from);
            } else {
                target.set(last, value);
            }
        }
        node.fields().forEachRemaining(e -> {
            if (e.getValue() instanceof ObjectNode child) {
                expandDottedKeys(child, prefix + e.getKey() + ".", file);
            }
        });
    }

    /**
     * Checks the form of a {@code --set} before anything else is read: {@code --set train.steps 5} (a space for the
     * {@code =}) is named as such, not taken for a config file named 5.
     */
    static void checkSetForm(String assignment) {
        if (assignment.indexOf('=') < 0) {
            throw new UserError("--set '" + assignment + "' has no '=': write --set " + assignment.strip()
                    + "=VALUE, with no space around the '='");
        }
    }

    /** Applies one {@code --set key=value}; the value stays text until a {@link Section} reads it as its key's type. */
    static void applySet(ObjectNode root, String assignment) {
        int eq = assignment.indexOf('=');
        if (eq < 0) {
            throw new UserError("malformed --set '" + assignment + "': expected key=value, e.g. --set train.steps=10");
        }
        String key = assignment.substring(0, eq).strip();
        String value = assignment.substring(eq + 1).strip();
        String[] parts = key.split("\\.", -1);
        for (String part : parts) {
            if (part.isEmpty()) {
                throw new UserError("malformed --set '" + assignment + "': the key must be section.name, e.g. train.steps");
            }
        }
        ObjectNode node = root;
        for (int i = 0; i < parts.length - 1; i++) {
            JsonNode child = node.get(parts[i]);
            if (child instanceof ObjectNode object) {
                node = object;
            } else {
                node = node.putObject(parts[i]);
            }
        }
        node.put(parts[parts.length - 1], value);
    }

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
            Map.entry("dtype", "fsdp.param_dtype"), Map.entry("mixed_precision", "fsdp.param_dtype"),
            Map.entry("gradient_checkpointing", "fsdp.activation_checkpointing"),
            Map.entry("enable_activation_checkpointing", "fsdp.activation_checkpointing"),
            Map.entry("fsdp_cpu_offload", "fsdp.cpu_offload"), Map.entry("fsdp_offload_params", "fsdp.cpu_offload"),
            Map.entry("logging_steps", "log.every"), Map.entry("log_every_n_steps", "log.every"),
            Map.entry("eval_steps", "log.eval_every"),
            Map.entry("report_to", "log.tensorboard"), Map.entry("logging_dir", "log.tensorboard"),
            Map.entry("use_tensorboard", "log.tensorboard"),
            Map.entry("nproc_per_node", "dist.ranks"), Map.entry("world_size", "dist.ranks"),
            Map.entry("nnodes", "dist.nnodes"));

    /**
     * Fails when {@code root} holds keys that no section reads ({@code known}: section, then the keys it reads),
     * naming every one of them at once, each with the key meant where that can be told: the same name in another
     * section, or the name another trainer gives it ({@code max_steps}, {@code learning_rate}, ...).
     */
    static void requireKnownKeys(ObjectNode root, Map<String, List<String>> known) {
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

    /** One mapping of the config (the root or a section): typed reads by key, then {@link #finish()}. */
    static final class Section {
        private final String prefix;
        private final String name;
        private final ObjectNode node;
        private final List<String> known = new ArrayList<>();
        private final List<Section> children = new ArrayList<>();

        /** The root of a config tree. */
        Section(ObjectNode root) {
            this("", "", root);
        }

        private Section(String prefix, String name, ObjectNode node) {
            this.prefix = prefix;
            this.name = name;
            this.node = node;
        }

        /** A nested section; an absent one reads as empty, so all of its keys get their defaults. */
        Section section(String key) {
            JsonNode value = value(key);
            if (value != null && !value.isNull() && !value.isObject()) {
                throw new UserError("config key '" + prefix + key + "' must be a section (a mapping of keys), got " + describe(value));
            }
            var child = new Section(prefix + key + ".", key, value instanceof ObjectNode object ? object : empty());
            children.add(child);
            return child;
        }

        /** Whether the config gives {@code key} a value (not null); does not make it known. */
        boolean has(String key) {
            JsonNode value = node.get(key);
            return value != null && !value.isNull();
        }

        /** An integer, or the text {@code auto}, read as 0. */
        int integerOrAuto(String key, int fallback) {
            JsonNode value = value(key);
            if (value != null && value.isTextual() && value.textValue().strip().equalsIgnoreCase(AUTO)) {
                return 0;
            }
            try {
                return integer(key, fallback);
            } catch (UserError e) {
                throw wrongType(key, "an integer or auto", value);
            }
        }

        int integer(String key, int fallback) {
            long v = longInteger(key, fallback);
            if (v < Integer.MIN_VALUE || v > Integer.MAX_VALUE) {
                throw new UserError("config key '" + prefix + key + "' must be an integer of at most "
                        + Integer.MAX_VALUE + " in size, got '" + v + "'");
            }
            return (int) v;
        }

        long longInteger(String key, long fallback) {
            JsonNode value = value(key);
            if (value == null) {
                return fallback;
            }
            Long v = asLong(value);
            if (v == null) {
                throw wrongType(key, "an integer", value);
            }
            return v;
        }

        double number(String key, double fallback) {
            JsonNode value = value(key);
            if (value == null) {
                return fallback;
            }
            Double v = asDouble(value);
            if (v == null) {
                throw wrongType(key, "a number", value);
            }
            if (!Double.isFinite(v)) {
                throw wrongType(key, "a finite number", value);
            }
            return v;
        }

        /** A list of exactly as many numbers as the fallback has: a YAML list, or text with commas ({@code 0.9,0.95}). */
        double[] numbers(String key, double[] fallback) {
            JsonNode value = value(key);
            if (value == null) {
                return fallback.clone();
            }
            List<JsonNode> items = new ArrayList<>();
            if (value.isArray()) {
                value.forEach(items::add);
            } else if (value.isTextual()) {
                for (String item : value.textValue().split(",", -1)) {
                    items.add(NODES.textNode(item.strip()));
                }
            } else {
                throw wrongType(key, "a list of " + fallback.length + " numbers", value);
            }
            double[] result = new double[items.size()];
            List<String> shown = new ArrayList<>();
            for (int i = 0; i < result.length; i++) {
                Double v = asDouble(items.get(i));
                if (v == null || !Double.isFinite(v)) {
                    throw new UserError("config key '" + prefix + key + "' must be a list of " + fallback.length
                            + " numbers, got " + describe(items.get(i)) + " in it");
                }
                result[i] = v;
                shown.add(items.get(i).asText());
            }
            if (result.length != fallback.length) {
                throw new UserError("config key '" + prefix + key + "' must be a list of " + fallback.length
                        + " numbers, got " + result.length + " (" + String.join(",", shown) + ")");
            }
            return result;
        }

        /** A list of non-empty names: a YAML list, or text with commas ({@code q_proj,v_proj}). */
        List<String> strings(String key, List<String> fallback) {
            JsonNode value = value(key);
            if (value == null) {
                return fallback;
            }
            List<JsonNode> items = new ArrayList<>();
            if (value.isArray()) {
                value.forEach(items::add);
            } else if (value.isValueNode() && !value.isNull()) {
                for (String item : value.asText().split(",", -1)) {
                    items.add(NODES.textNode(item.strip()));
                }
            } else {
                throw wrongType(key, "a list of names", value);
            }
            List<String> result = new ArrayList<>();
            for (JsonNode item : items) {
                if (!item.isValueNode() || item.isNull() || item.asText().isBlank()) {
                    throw new UserError("config key '" + prefix + key + "' must be a list of names, got "
                            + describe(item) + " in it");
                }
                result.add(item.asText().strip());
            }
            return List.copyOf(result);
        }

        boolean bool(String key, boolean fallback) {
            JsonNode value = value(key);
            if (value == null) {
                return fallback;
            }
            if (value.isBoolean()) {
                return value.booleanValue();
            }
            if (value.isTextual()) {
                switch (value.textValue().strip().toLowerCase(Locale.ROOT)) {
                    case "true" -> { return true; }
                    case "false" -> { return false; }
                    default -> { }
                }
            }
            throw wrongType(key, "true or false", value);
        }

        /** {@code true} or {@code false} (a YAML boolean or that text) where the key holds one; null otherwise. */
        Boolean boolOrNull(String key) {
            JsonNode value = value(key);
            if (value != null && value.isBoolean()) {
                return value.booleanValue();
            }
            if (value != null && value.isTextual()) {
                return switch (value.textValue().strip().toLowerCase(Locale.ROOT)) {
                    case "true" -> Boolean.TRUE;
                    case "false" -> Boolean.FALSE;
                    default -> null;
                };
            }
            return null;
        }

        /** A string that must be given (when present); the fallback otherwise. */
        String string(String key, String fallback) {
            JsonNode value = value(key);
            if (value == null) {
                return fallback;
            }
            if (value.isValueNode() && !value.isNull() && !value.asText().isBlank()) {
                return value.asText().strip();
            }
            throw wrongType(key, "a non-empty string", value);
        }

        /** A string that may be left out: null when absent, null ({@code ~}), empty or the text {@code null}. */
        String optionalString(String key) {
            JsonNode value = value(key);
            if (value == null || value.isNull()) {
                return null;
            }
            if (value.isValueNode()) {
                String text = value.asText().strip();
                return text.isEmpty() || text.equals("null") || text.equals("~") ? null : text;
            }
            throw wrongType(key, "a string", value);
        }

        /** A file or directory path that may be left out (see {@link #optionalString}). */
        Path path(String key) {
            String text = optionalString(key);
            if (text == null) {
                return null;
            }
            try {
                return Path.of(text);
            } catch (InvalidPathException e) {
                throw new UserError("config key '" + prefix + key + "' must be a path, got '" + text + "': " + e.getReason());
            }
        }

        <E extends Enum<E> & ConfigChoice> E choice(String key, Class<E> type, E fallback) {
            JsonNode value = value(key);
            if (value == null) {
                return fallback;
            }
            if (value.isValueNode() && !value.isNull()) {
                String text = value.asText().strip();
                for (E candidate : type.getEnumConstants()) {
                    if (candidate.spelling().equalsIgnoreCase(text)) {
                        return candidate;
                    }
                }
            }
            List<String> names = new ArrayList<>();
            for (E candidate : type.getEnumConstants()) {
                names.add(candidate.spelling());
            }
            throw wrongType(key, "one of " + String.join(", ", names), value);
        }

        /**
         * A path, or a list whose items are {@code {path, weight}} mappings (weight > 0; 1 when left out) or paths
         * (weight 1): a weighted mix of datasets. Null when the config leaves it out.
         */
        List<WeightedPath> weightedPaths(String key) {
            JsonNode value = value(key);
            if (value == null || value.isNull()) {
                return null;
            }
            if (!value.isArray()) {
                Path single = path(key);
                return single == null ? null : List.of(new WeightedPath(single, 1));
            }
            if (value.isEmpty()) {
                throw wrongType(key, "a path or a non-empty list of {path, weight}", value);
            }
            List<WeightedPath> result = new java.util.ArrayList<>();
            for (int i = 0; i < value.size(); i++) {
                JsonNode item = value.get(i);
                String at = prefix + key + "[" + i + "]";
                JsonNode path = item.isObject() ? item.get("path") : item;
                JsonNode weight = item.isObject() ? item.get("weight") : null;
                if (item.isObject()) {
                    for (var it = item.fieldNames(); it.hasNext(); ) {
                        String field = it.next();
                        if (!field.equals("path") && !field.equals("weight")) {
                            throw new UserError("unknown config key '" + at + "." + field + "'; known keys: path,"
                                    + " weight");
                        }
                    }
                }
                if (path == null || !path.isTextual() || path.asText().isBlank()) {
                    throw new UserError("config key '" + at + "' must be a path or {path, weight}, got "
                            + describe(item));
                }
                Double w = weight == null ? Double.valueOf(1) : asDouble(weight);
                if (w == null || !(w > 0) || !Double.isFinite(w)) {
                    throw new UserError("config key '" + at + ".weight' must be a number > 0, got "
                            + describe(weight));
                }
                try {
                    result.add(new WeightedPath(Path.of(path.asText().strip()), w));
                } catch (InvalidPathException e) {
                    throw new UserError("config key '" + at + ".path' must be a path, got '" + path.asText() + "': "
                            + e.getReason());
                }
            }
            return List.copyOf(result);
        }

        /** The keys the reads asked for: each section of this root, then the keys its reads asked for. */
        Map<String, List<String>> knownKeys() {
            Map<String, List<String>> keys = new LinkedHashMap<>();
            for (String key : known) {
                keys.put(key, children.stream().filter(c -> c.name.equals(key)).findFirst()
                        .map(c -> List.copyOf(c.known)).orElse(List.of()));
            }
            return keys;
        }

        /** Fails on the first key of this mapping that no read asked for, listing the keys that were. */
        void finish() {
            for (var it = node.fieldNames(); it.hasNext(); ) {
                String key = it.next();
                if (!known.contains(key)) {
                    String where = name.isEmpty() ? "known sections: " : "known keys in " + name + ": ";
                    String hint = children.stream()
                            .filter(child -> child.known.contains(key))
                            .map(child -> "; did you mean '" + child.prefix + key + "'?")
                            .findFirst().orElse("");
                    throw new UserError("unknown config key '" + prefix + key + "'; " + where + String.join(", ", known) + hint);
                }
            }
        }

        /** Marks {@code key} known and returns its node, or null when the config leaves it out. */
        private JsonNode value(String key) {
            if (!known.contains(key)) {
                known.add(key);
            }
            return node.get(key);
        }

        private UserError wrongType(String key, String expected, JsonNode value) {
            return new UserError("config key '" + prefix + key + "' must be " + expected + ", got " + describe(value));
        }
    }

    /** An integral number or integer text ({@code 12}, {@code 1_000}); null for anything else. */
    private static Long asLong(JsonNode value) {
        if (value.isIntegralNumber()) {
            return value.canConvertToLong() ? value.longValue() : null;
        }
        if (value.isTextual() && INTEGER.matcher(value.textValue().strip()).matches()) {
            try {
                return Long.parseLong(value.textValue().strip().replace("_", ""));
            } catch (NumberFormatException tooLarge) {
                return null;
            }
        }
        return null;
    }

    /** A number or decimal text ({@code 3e-3}, which YAML 1.1 reads as text); null for anything else. */
    private static Double asDouble(JsonNode value) {
        if (value.isNumber()) {
            return value.doubleValue();
        }
        if (value.isTextual() && DECIMAL.matcher(value.textValue().strip()).matches()) {
            return Double.parseDouble(value.textValue().strip().replace("_", ""));
        }
        return null;
    }

    /** A node as an error message shows it: a scalar quoted, a list or mapping by kind. */
    static String describe(JsonNode value) {
        if (value == null || value.isNull()) {
            return "nothing (null)";
        }
        if (value.isArray()) {
            return "a list";
        }
        if (value.isObject()) {
            return "a mapping";
        }
        return "'" + value.asText() + "'";
    }

    /**
     * The YAML parser's message on one line: SnakeYAML's "context" and "problem" lines, without the indented
     * lines that quote the file and point at a column.
     */
    private static String firstLine(String message) {
        if (message == null || message.isBlank()) {
            return "invalid YAML";
        }
        List<String> lines = message.lines()
                .filter(line -> !line.isBlank() && !Character.isWhitespace(line.charAt(0)))
                .map(String::strip)
                .toList();
        return lines.isEmpty() ? message.strip().lines().findFirst().orElse("invalid YAML").strip() : String.join(": ", lines);
    }
}
