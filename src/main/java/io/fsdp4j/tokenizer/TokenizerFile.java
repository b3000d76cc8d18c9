package io.fsdp4j.tokenizer;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import io.fsdp4j.UserError;
import java.io.IOException;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

/**
 * What fsdp4j reads itself from a {@code tokenizer.json} (the native library does the tokenizing): the number of
 * ids and the ids of a few named tokens. One streaming pass that skips the merges, so a 150k-token vocabulary
 * never becomes a tree of objects.
 *
 * @param vocabSize one more than the largest id of the model's vocabulary and the added tokens
 * @param ids the id of each requested token that the file has (added tokens first, then the model's vocabulary)
 * @param special the text of each added token marked {@code "special": true} (chat markers, BOS, EOS)
 */
record TokenizerFile(int vocabSize, Map<String, Integer> ids, Set<String> special) {
    private static final JsonFactory JSON = new JsonFactory();

    /** Reads {@code file}, looking up the ids of {@code wanted}; a file that is not a tokenizer.json is a UserError. */
    static TokenizerFile read(Path file, Set<String> wanted) {
        Map<String, Integer> added = new HashMap<>();
        Set<String> special = new HashSet<>();
        Map<String, Integer> model = new HashMap<>();
        int maxId = -1;
        boolean hasModel = false;
        try (JsonParser p = JSON.createParser(file.toFile())) {
            if (p.nextToken() != JsonToken.START_OBJECT) {
                throw notATokenizer(file, "it is not a JSON object");
            }
            while (p.nextToken() == JsonToken.FIELD_NAME) {
                String field = p.currentName();
                p.nextToken();
                switch (field) {
                    case "added_tokens" -> maxId = Math.max(maxId, readAddedTokens(p, added, special));
                    case "model" -> {
                        if (p.currentToken() != JsonToken.START_OBJECT) {
                            throw notATokenizer(file, "\"model\" is not an object");
                        }
                        hasModel = true;
                        maxId = Math.max(maxId, readModel(p, wanted, model));
                    }
                    default -> p.skipChildren();
                }
            }
        } catch (JsonProcessingException e) {
            String where = e.getLocation() == null ? ""
                    : " (line " + e.getLocation().getLineNr() + ", column " + e.getLocation().getColumnNr() + ")";
            throw new UserError("tokenizer file " + file + " is not valid JSON: " + e.getOriginalMessage() + where);
        } catch (IOException e) {
            throw new UserError("cannot read tokenizer file " + file + ": " + e.getMessage());
        }
        if (!hasModel) {
            throw notATokenizer(file, "it has no \"model\"");
        }
        Map<String, Integer> ids = new HashMap<>();
        for (String token : wanted) {
            Integer id = added.containsKey(token) ? added.get(token) : model.get(token);
            if (id != null) {
                ids.put(token, id);
            }
        }
        return new TokenizerFile(maxId + 1, Map.copyOf(ids), Set.copyOf(special));
    }

    private static UserError notATokenizer(Path file, String why) {
        return new UserError(file + " is not a Hugging Face tokenizer.json: " + why);
    }

    /** [{"id":..,"content":..,...}, ...]: every added token; returns the largest id. */
    private static int readAddedTokens(JsonParser p, Map<String, Integer> added, Set<String> special)
            throws IOException {
        int maxId = -1;
        if (p.currentToken() != JsonToken.START_ARRAY) {
            p.skipChildren();
            return maxId;
        }
        while (p.nextToken() == JsonToken.START_OBJECT) {
            Integer id = null;
            String content = null;
            boolean isSpecial = false;
            while (p.nextToken() == JsonToken.FIELD_NAME) {
                String field = p.currentName();
                p.nextToken();
                switch (field) {
                    case "id" -> id = p.getIntValue();
                    case "content" -> content = p.getText();
                    case "special" -> isSpecial = p.currentToken() == JsonToken.VALUE_TRUE;
                    default -> p.skipChildren();
                }
            }
            if (id != null) {
                maxId = Math.max(maxId, id);
                if (content != null) {
                    added.put(content, id);
                    if (isSpecial) {
                        special.add(content);
                    }
                }
            }
        }
        return maxId;
    }

    /**
     * The model object: its vocabulary is {"token": id, ...} (BPE, WordPiece, WordLevel) or [["token", score], ...]
     * (Unigram, where the id is the index). Returns the largest id.
     */
    private static int readModel(JsonParser p, Set<String> wanted, Map<String, Integer> found) throws IOException {
        int maxId = -1;
        while (p.nextToken() == JsonToken.FIELD_NAME) {
            String field = p.currentName();
            JsonToken value = p.nextToken();
            if (!field.equals("vocab")) {
                p.skipChildren();
            } else if (value == JsonToken.START_OBJECT) {
                while (p.nextToken() == JsonToken.FIELD_NAME) {
                    String token = p.currentName();
                    p.nextToken();
                    int id = p.getIntValue();
                    maxId = Math.max(maxId, id);
                    if (wanted.contains(token)) {
                        found.put(token, id);
                    }
                }
            } else if (value == JsonToken.START_ARRAY) {
                int id = 0;
                for (; p.nextToken() == JsonToken.START_ARRAY; id++) {
                    p.nextToken();
                    if (wanted.contains(p.getText())) {
                        found.put(p.getText(), id);
                    }
                    while (p.nextToken() != JsonToken.END_ARRAY) {
                        p.skipChildren();
                    }
                }
                maxId = Math.max(maxId, id - 1);
            } else {
                p.skipChildren();
            }
        }
        return maxId;
    }
}
