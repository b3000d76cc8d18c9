package io.fsdp4j.safetensors;

import static io.fsdp4j.safetensors.Messages.error;
import static io.fsdp4j.safetensors.Messages.quote;

import com.fasterxml.jackson.core.JacksonException;
import com.fasterxml.jackson.core.JsonLocation;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SequencedMap;

/**
 * A parsed and validated safetensors header: the tensors in file order and the metadata. The writers' headers are
 * encoded here too ({@link #encode}).
 *
 * @param tensors  the tensors by name, in the order of the header
 * @param metadata the {@code __metadata__} entries (empty when absent)
 */
record SafetensorsHeader(SequencedMap<String, TensorInfo> tensors, Map<String, String> metadata) {
    /** The largest header accepted, as in the reference implementation. */
    static final long MAX_HEADER_BYTES = 100_000_000L;

    static final String METADATA_KEY = "__metadata__";

    /** Strict JSON: duplicate keys and trailing garbage are errors. */
    static final JsonMapper JSON = JsonMapper.builder()
            .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
            .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
            .build();

    SafetensorsHeader {
        tensors = Collections.unmodifiableSequencedMap(new LinkedHashMap<>(tensors));
        metadata = Collections.unmodifiableSequencedMap(new LinkedHashMap<>(metadata));
    }

    /**
     * The header to write before the data of {@code tensors}: {@code metadata} (left out when empty), then an entry
     * per tensor in the order given, as JSON padded with spaces to a multiple of 8 bytes.
     */
    static byte[] encode(List<TensorInfo> tensors, Map<String, String> metadata) {
        ObjectNode root = JSON.createObjectNode();
        if (!metadata.isEmpty()) {
            ObjectNode meta = root.putObject(METADATA_KEY);
            metadata.forEach(meta::put);
        }
        for (TensorInfo t : tensors) {
            ObjectNode entry = root.putObject(t.name());
            entry.put("dtype", t.dtype());
            ArrayNode shape = entry.putArray("shape");
            for (long d : t.shape()) {
                shape.add(d);
            }
            entry.putArray("data_offsets").add(t.begin()).add(t.end());
        }
        byte[] json;
        try {
            json = JSON.writeValueAsBytes(root);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("cannot serialize a safetensors header", e);
        }
        int padded = (json.length + 7) & ~7;
        byte[] header = Arrays.copyOf(json, padded);
        Arrays.fill(header, json.length, padded, (byte) ' ');
        return header;
    }

    /**
     * Parses the header bytes of {@code path} and checks every entry against a data region of
     * {@code dataLength} bytes; {@code fileSize} is only used in messages.
     */
    static SafetensorsHeader parse(Path path, byte[] headerBytes, long fileSize) {
        long dataLength = fileSize - 8 - headerBytes.length;
        JsonNode root = parseJson(path, headerBytes, "header");
        if (!root.isObject()) {
            throw error(path, "header is not a JSON object but " + kind(root));
        }
        SequencedMap<String, TensorInfo> tensors = new LinkedHashMap<>();
        Map<String, String> metadata = Map.of();
        for (Map.Entry<String, JsonNode> field : root.properties()) {
            String name = field.getKey();
            if (name.equals(METADATA_KEY)) {
                metadata = parseMetadata(path, field.getValue());
            } else {
                TensorInfo t = parseEntry(path, name, field.getValue(), dataLength, headerBytes.length, fileSize);
                tensors.put(name, t);
            }
        }
        checkOverlaps(path, tensors.values());
        return new SafetensorsHeader(tensors, metadata);
    }

    /** Decodes strict UTF-8 and parses strict JSON; {@code what} names the text in messages. */
    static JsonNode parseJson(Path path, byte[] bytes, String what) {
        String text;
        try {
            text = StandardCharsets.UTF_8.newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(ByteBuffer.wrap(bytes))
                    .toString();
        } catch (CharacterCodingException e) {
            throw error(path, what + " is not valid UTF-8; the file is corrupt or not in this format", e);
        }
        JsonNode root;
        try {
            root = JSON.readTree(text);
        } catch (JacksonException e) {
            throw error(path, what + " is not valid JSON: " + describe(e), e);
        }
        if (root == null || root.isMissingNode()) {
            throw error(path, what + " is empty; expected a JSON object");
        }
        return root;
    }

    private static String describe(JacksonException e) {
        String message = e instanceof JsonProcessingException p ? p.getOriginalMessage() : e.getMessage();
        message = Messages.oneLine(message);
        if (message.length() > 200) {
            message = message.substring(0, 200) + "...";
        }
        JsonLocation at = e.getLocation();
        if (at != null && at.getLineNr() > 0) {
            message += " (at line " + at.getLineNr() + ", column " + at.getColumnNr() + ")";
        }
        return message;
    }

    static String kind(JsonNode node) {
        return switch (node.getNodeType()) {
            case ARRAY -> "an array";
            case OBJECT -> "an object";
            case STRING -> "a string";
            case NUMBER -> "a number";
            case BOOLEAN -> "a boolean";
            case NULL -> "null";
            default -> "a " + node.getNodeType().name().toLowerCase(java.util.Locale.ROOT);
        };
    }

    private static Map<String, String> parseMetadata(Path path, JsonNode node) {
        if (!node.isObject()) {
            throw error(path, METADATA_KEY + " is " + kind(node) + ", expected an object of strings");
        }
        Map<String, String> metadata = new LinkedHashMap<>();
        for (Map.Entry<String, JsonNode> e : node.properties()) {
            if (!e.getValue().isTextual()) {
                throw error(path, METADATA_KEY + " entry " + quote(e.getKey()) + " is " + kind(e.getValue())
                        + ", expected a string");
            }
            metadata.put(e.getKey(), e.getValue().textValue());
        }
        return metadata;
    }

    private static TensorInfo parseEntry(
            Path path, String name, JsonNode entry, long dataLength, long headerLength, long fileSize) {
        String what = "tensor " + quote(name);
        if (!entry.isObject()) {
            throw error(path, what + " is " + kind(entry) + " in the header, expected an object with dtype, shape"
                    + " and data_offsets");
        }
        JsonNode dtypeNode = required(path, what, entry, "dtype");
        if (!dtypeNode.isTextual()) {
            throw error(path, what + " has a dtype that is " + kind(dtypeNode) + ", expected a string");
        }
        String dtypeName = dtypeNode.textValue();
        StoredDType dtype = StoredDType.byName(dtypeName).orElseThrow(() -> error(path, what + " has unknown dtype "
                + quote(dtypeName) + " (known: " + StoredDType.KNOWN + ")"));
        long[] shape = longs(path, what, required(path, what, entry, "shape"), "shape", -1);
        long[] offsets = longs(path, what, required(path, what, entry, "data_offsets"), "data_offsets", 2);
        long begin = offsets[0];
        long end = offsets[1];
        if (begin > end) {
            throw error(path, what + " has data_offsets [" + begin + ", " + end + "] with begin after end");
        }
        long numel;
        long expectedBytes;
        try {
            numel = 1;
            for (long d : shape) {
                numel = Math.multiplyExact(numel, d);
            }
            expectedBytes = Math.multiplyExact(numel, dtype.bytes());
        } catch (ArithmeticException e) {
            throw error(path, what + " has shape " + Messages.shape(shape) + " whose size overflows 64 bits");
        }
        if (end - begin != expectedBytes) {
            throw error(path, what + " has data_offsets [" + begin + ", " + end + "] spanning " + (end - begin)
                    + " bytes, but shape " + Messages.shape(shape) + " of " + dtypeName + " needs " + numel + " x "
                    + dtype.bytes() + " = " + expectedBytes + " bytes");
        }
        if (end > dataLength) {
            long needed = 8 + headerLength + end;
            throw error(path, "file is truncated: it is " + fileSize + " bytes, shorter than its header says (" + what
                    + " ends at byte " + needed + "); re-download or re-save it");
        }
        return new TensorInfo(name, dtypeName, shape, begin, end);
    }

    private static JsonNode required(Path path, String what, JsonNode entry, String key) {
        JsonNode value = entry.get(key);
        if (value == null) {
            throw error(path, what + " has no \"" + key + "\" in the header (each tensor needs dtype, shape and"
                    + " data_offsets)");
        }
        return value;
    }

    /** An array of non-negative 64-bit integers, of length {@code length} unless that is negative. */
    private static long[] longs(Path path, String what, JsonNode node, String key, int length) {
        String expected = length < 0
                ? "an array of non-negative integers"
                : "an array of " + length + " non-negative integers";
        if (!node.isArray() || (length >= 0 && node.size() != length)) {
            throw error(path, what + " has \"" + key + "\" " + Messages.oneLine(abbreviate(node)) + ", expected "
                    + expected);
        }
        long[] values = new long[node.size()];
        for (int i = 0; i < values.length; i++) {
            JsonNode v = node.get(i);
            if (!v.isIntegralNumber() || !v.canConvertToLong()) {
                throw error(path, what + " has \"" + key + "\" " + abbreviate(node) + ", expected " + expected);
            }
            values[i] = v.longValue();
            if (values[i] < 0) {
                String problem = key.equals("shape") ? "a negative dimension" : "a negative offset";
                throw error(path, what + " has " + problem + " in \"" + key + "\" " + abbreviate(node));
            }
        }
        return values;
    }

    private static String abbreviate(JsonNode node) {
        String text = Messages.oneLine(node.toString());
        return text.length() > 100 ? text.substring(0, 100) + "..." : text;
    }

    private static void checkOverlaps(Path path, Iterable<TensorInfo> tensors) {
        List<TensorInfo> sorted = new ArrayList<>();
        for (TensorInfo t : tensors) {
            if (t.byteSize() > 0) { // an empty tensor occupies no bytes
                sorted.add(t);
            }
        }
        sorted.sort(Comparator.comparingLong(TensorInfo::begin));
        for (int i = 1; i < sorted.size(); i++) {
            TensorInfo a = sorted.get(i - 1);
            TensorInfo b = sorted.get(i);
            if (b.begin() < a.end()) {
                throw error(path, "tensors " + quote(a.name()) + " [" + a.begin() + ", " + a.end() + "] and "
                        + quote(b.name()) + " [" + b.begin() + ", " + b.end() + "] overlap in the data region");
            }
        }
    }
}
