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
import java.util.List;
import java.util.Locale;
import java.util.regex.Pattern;

/**
 * The untyped side of the config: a YAML file read into a tree, {@code --set} assignments applied to it, and
 * {@link Section}, which reads typed values out of one mapping and reports the first wrong key as a one-line
 * {@link UserError}. Range checks live in the section records, not here.
 */
final class ConfigTree {
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
        return (ObjectNode) root;
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
