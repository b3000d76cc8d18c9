package io.fsdp4j.data;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import io.fsdp4j.UserError;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Locale;
import java.util.stream.Collectors;

/** The dataset files that {@code fsdp4j prepare} reads; {@link DatasetReader} reads each. */
public enum DatasetFormat {
    /** A JSON list of objects, or JSONL: {@code instruction}, {@code input} (optional), {@code output}. */
    ALPACA,
    /** SQuAD v1.1 JSON: {@code data[].paragraphs[].context}, {@code qas[].question}, {@code qas[].answers[].text}. */
    SQUAD,
    /** Plain UTF-8 text; documents are separated by blank lines. */
    TEXT,
    /** Pre-tokenized JSONL: {@code input_ids}, optional {@code labels} (-100: no loss). */
    TOKENS;

    public String key() {
        return name().toLowerCase(Locale.ROOT);
    }

    /**
     * The format of a JSON dataset file, told from its first value: a list is Alpaca; an object with
     * {@code "data"} is SQuAD v1.1, one with {@code "input_ids"} pre-tokenized JSONL, one with {@code "instruction"}
     * Alpaca JSONL (only the first object is read). An empty file is a {@link UserError}, and so is anything else,
     * one that lists what is accepted.
     */
    public static DatasetFormat detect(Path file) {
        if (!Files.exists(file)) {
            throw new UserError("data file " + file + " does not exist");
        }
        try (JsonParser parser = new JsonFactory().createParser(Files.newInputStream(file))) {
            JsonToken first = parser.nextToken();
            if (first == null) {
                throw new UserError("data file " + file + " holds no sequences (it is empty)");
            }
            if (first == JsonToken.START_ARRAY) {
                return ALPACA;
            }
            if (first == JsonToken.START_OBJECT) {
                for (JsonToken t = parser.nextToken(); t == JsonToken.FIELD_NAME; t = parser.nextToken()) {
                    switch (parser.currentName()) {
                        case "data" -> {
                            return SQUAD;
                        }
                        case "input_ids" -> {
                            return TOKENS;
                        }
                        case "instruction" -> {
                            return ALPACA;
                        }
                        default -> {
                            parser.nextToken();
                            parser.skipChildren();
                        }
                    }
                }
            }
        } catch (NoSuchFileException e) {
            throw new UserError("data file " + file + " does not exist");
        } catch (JsonProcessingException e) {
            // not JSON: unknown, below
        } catch (IOException e) {
            throw new UserError("cannot read " + file + ": " + e.getMessage());
        }
        throw new UserError("data file " + file + ": unknown format; give an Alpaca JSON list or JSONL (objects with"
                + " \"instruction\" and \"output\"), SQuAD v1.1 JSON (an object with \"data\"), pre-tokenized JSONL"
                + " ({\"input_ids\":[...]} a line), plain text (.txt, byte-vocabulary models) or a directory written"
                + " by 'fsdp4j prepare'");
    }

    public static DatasetFormat parse(String key) {
        return Arrays.stream(values()).filter(f -> f.key().equals(key)).findFirst().orElseThrow(() -> new UserError(
                "unknown dataset format '" + key + "'; give one of "
                        + Arrays.stream(values()).map(DatasetFormat::key).collect(Collectors.joining(", "))));
    }
}
