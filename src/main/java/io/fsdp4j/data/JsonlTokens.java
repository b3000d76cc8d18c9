package io.fsdp4j.data;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.UserError;
import io.fsdp4j.model.TokenBatch;
import java.io.BufferedReader;
import java.io.IOException;
import java.nio.charset.CharacterCodingException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;

/**
 * Pre-tokenized JSONL: one object a line, {@code {"input_ids":[...], "labels":[...]}}, labels optional (default:
 * the ids). Errors name the file and line.
 */
public final class JsonlTokens {
    private static final ObjectMapper JSON = new ObjectMapper();

    private JsonlTokens() {}

    /** Reads every sequence; ids must lie in [0, vocabSize), labels too or be -100. */
    public static List<Sequence> read(Path file, int vocabSize) {
        List<Sequence> result = new ArrayList<>();
        read(file, vocabSize, result::add);
        if (result.isEmpty()) {
            throw new UserError("data file " + file + " holds no sequences");
        }
        return result;
    }

    /** Each sequence, in file order, to {@code each}, checked as {@link #read(Path, int)} does; none is no error. */
    public static void read(Path file, int vocabSize, Consumer<Sequence> each) {
        try (BufferedReader in = Files.newBufferedReader(file)) {
            String line;
            int lineNo = 0;
            while ((line = in.readLine()) != null) {
                lineNo++;
                if (line.isBlank()) {
                    continue;
                }
                each.accept(parse(file, lineNo, line, vocabSize));
            }
        } catch (NoSuchFileException e) {
            throw new UserError("data file " + file + " does not exist");
        } catch (CharacterCodingException e) {
            throw new UserError("data file " + file + " is not valid UTF-8");
        } catch (IOException e) {
            throw new UserError("cannot read data file " + file + ": " + e.getMessage());
        }
    }

    private static Sequence parse(Path file, int lineNo, String line, int vocabSize) {
        String where = file + " line " + lineNo;
        JsonNode node;
        try {
            node = JSON.readTree(line);
        } catch (IOException e) {
            throw new UserError(where + ": not valid JSON");
        }
        if (node == null || !node.isObject() || !node.has("input_ids")) {
            throw new UserError(where + ": expected an object with \"input_ids\" (and optional \"labels\")");
        }
        int[] ids = ints(node.get("input_ids"), where, "input_ids");
        if (ids.length == 0) {
            throw new UserError(where + ": \"input_ids\" is empty");
        }
        for (int id : ids) {
            if (id < 0 || id >= vocabSize) {
                throw new UserError(where + ": token id " + id + " is outside the vocabulary (0.." + (vocabSize - 1) + ")");
            }
        }
        int[] labels = node.has("labels") ? ints(node.get("labels"), where, "labels") : ids.clone();
        if (labels.length != ids.length) {
            throw new UserError(where + ": \"labels\" has " + labels.length + " entries but \"input_ids\" has " + ids.length);
        }
        for (int l : labels) {
            if (l != TokenBatch.IGNORE && (l < 0 || l >= vocabSize)) {
                throw new UserError(where + ": label " + l + " is outside the vocabulary (0.." + (vocabSize - 1)
                        + "; -100 marks no loss)");
            }
        }
        return new Sequence(ids, labels);
    }

    private static int[] ints(JsonNode array, String where, String key) {
        if (!array.isArray()) {
            throw new UserError(where + ": \"" + key + "\" must be an array of integers");
        }
        int[] values = new int[array.size()];
        for (int i = 0; i < values.length; i++) {
            JsonNode v = array.get(i);
            if (!v.isIntegralNumber() || !v.canConvertToInt()) {
                throw new UserError(where + ": \"" + key + "\" must hold integers, found " + v);
            }
            values[i] = v.intValue();
        }
        return values;
    }
}
