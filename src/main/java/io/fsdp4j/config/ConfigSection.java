package io.fsdp4j.config;

import static io.fsdp4j.config.ConfigTree.AUTO;
import static io.fsdp4j.config.ConfigTree.describe;
import static io.fsdp4j.config.ConfigTree.empty;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.fsdp4j.UserError;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Pattern;

/** One mapping of the config (the root or a section): typed reads by key, then {@link #finish()}. */
final class ConfigSection {
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;
    private static final Pattern INTEGER = Pattern.compile("[+-]?[0-9](_?[0-9])*");
    private static final Pattern DECIMAL = Pattern.compile(
            "[+-]?([0-9](_?[0-9])*(\\.([0-9](_?[0-9])*)?)?|\\.[0-9](_?[0-9])*)([eE][+-]?[0-9]+)?");

    private final String prefix;
    private final String name;
    private final ObjectNode node;
    private final List<String> known = new ArrayList<>();
    private final List<ConfigSection> children = new ArrayList<>();

    /** The root of a config tree. */
    ConfigSection(ObjectNode root) {
        this("", "", root);
    }

    private ConfigSection(String prefix, String name, ObjectNode node) {
        this.prefix = prefix;
        this.name = name;
        this.node = node;
    }

    /** A nested section; an absent one reads as empty, so all of its keys get their defaults. */
    ConfigSection section(String key) {
        JsonNode value = value(key);
        if (value != null && !value.isNull() && !value.isObject()) {
            throw new UserError("config key '" + prefix + key + "' must be a section (a mapping of keys), got " + describe(value));
        }
        var child = new ConfigSection(prefix + key + ".", key, value instanceof ObjectNode object ? object : empty());
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

    /**
     * As {@link #choice}, where the text {@code auto} is also allowed and read as null (so is a null fallback: auto
     * by default).
     */
    <E extends Enum<E> & ConfigChoice> E choiceOrAuto(String key, Class<E> type, E fallback) {
        JsonNode value = value(key);
        if (value == null) {
            return fallback;
        }
        if (value.isTextual() && value.textValue().strip().equalsIgnoreCase(AUTO)) {
            return null;
        }
        try {
            return choice(key, type, fallback);
        } catch (UserError e) {
            List<String> names = new ArrayList<>(List.of(AUTO));
            for (E candidate : type.getEnumConstants()) {
                names.add(candidate.spelling());
            }
            throw wrongType(key, "one of " + String.join(", ", names), value);
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
}
