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
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The untyped side of the config: a YAML file read into a tree, and {@code --set} assignments applied to it.
 * {@link ConfigSection} reads typed values out of the tree, {@link UnknownKeys} names the keys no section reads; range
 * checks live in the section records.
 */
final class ConfigTree {
    /** The value of a key whose default is told at run time ({@code data.seq_len: auto}). */
    static final String AUTO = "auto";
    private static final String BOM = "\uFEFF";
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;
    private static final YAMLMapper YAML = YAMLMapper.builder()
            .enable(JsonParser.Feature.STRICT_DUPLICATE_DETECTION)
            .build();

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

    /** Applies one {@code --set key=value}; the value stays text until a {@link ConfigSection} reads it as its key's type. */
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
