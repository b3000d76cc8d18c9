package io.fsdp4j.data;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import io.fsdp4j.UserError;
import java.io.IOException;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Locale;
import java.util.stream.Collectors;

/** The dataset files that {@code fsdp4j prepare} and {@code data.train} read; {@link DatasetReader} reads each. */
public enum DatasetFormat {
    /**
     * Conversations, JSONL (or a JSON list): {@code {"messages": [{"role", "content"}, ...]}} (roles system, user,
     * assistant, tool; other keys such as {@code tool_calls} reach the template as they are), with an optional
     * {@code "tools"} list; rendered with the model's chat template.
     */
    MESSAGES,
    /** ShareGPT: {@code {"conversations": [{"from", "value"}, ...]}} ({@code human}, {@code gpt}, ...), as messages. */
    SHAREGPT,
    /** {@code {"prompt", "completion"}} JSONL: the completion and EOS carry loss, the prompt does not. */
    PROMPT_COMPLETION,
    /** A JSON list of objects, or JSONL: {@code instruction}, {@code input} (optional), {@code output}. */
    ALPACA,
    /** SQuAD v1.1 JSON: {@code data[].paragraphs[].context}, {@code qas[].question}, {@code qas[].answers[].text}. */
    SQUAD,
    /** {@code {"text"}} JSONL (one document a line), or plain UTF-8 text whose documents are separated by blank lines. */
    TEXT,
    /** Pre-tokenized JSONL: {@code input_ids}, optional {@code labels} (-100: no loss). */
    TOKENS;

    public String key() {
        return name().toLowerCase(Locale.ROOT);
    }

    /**
     * The format of a dataset file (or of the first file of a directory of shards), told from its first record
     * (a JSONL line, an element of a JSON list, a Parquet file's columns) by its keys ({@link #byKey}:
     * {@code messages}, {@code conversations}, {@code prompt}/{@code completion}, {@code text}, {@code instruction},
     * {@code input_ids}); an object with {@code "data"} is SQuAD v1.1, and any other list Alpaca. An empty file is a
     * {@link UserError}, and so is anything else, one that lists what is accepted.
     */
    public static DatasetFormat detect(Path path) {
        Path file = DatasetFiles.shards(path).getFirst();
        if (DatasetFiles.isParquet(file)) {
            return ParquetRows.detect(file);
        }
        try (JsonParser parser = new JsonFactory().createParser(DatasetFiles.open(file))) {
            JsonToken first = parser.nextToken();
            if (first == null) {
                throw new UserError("data file " + file + " holds no sequences (it is empty)");
            }
            boolean list = first == JsonToken.START_ARRAY;
            if (list) {
                first = parser.nextToken(); // a JSON list of records: told by the first
            }
            if (first == JsonToken.START_OBJECT) {
                for (JsonToken t = parser.nextToken(); t == JsonToken.FIELD_NAME; t = parser.nextToken()) {
                    DatasetFormat byKey = byKey(parser.currentName());
                    if (byKey != null) {
                        return byKey;
                    }
                    switch (parser.currentName()) {
                        case "data" -> {
                            if (!list) {
                                return SQUAD;
                            }
                            parser.nextToken();
                            parser.skipChildren();
                        }
                        default -> {
                            parser.nextToken();
                            parser.skipChildren();
                        }
                    }
                }
            }
            if (list) {
                return ALPACA; // as before: a list of something else is told what Alpaca records need
            }
        } catch (NoSuchFileException e) {
            throw new UserError("data file " + file + " does not exist");
        } catch (JsonProcessingException e) {
            // not JSON: unknown, below
        } catch (IOException e) {
            throw new UserError("cannot read " + file + ": " + e.getMessage());
        }
        throw unknown(file);
    }

    /** The format of a record (a JSONL line, a Parquet row) that has the column {@code key}; null: not told by it. */
    static DatasetFormat byKey(String key) {
        return switch (key) {
            case "messages" -> MESSAGES;
            case "conversations" -> SHAREGPT;
            case "prompt", "completion" -> PROMPT_COMPLETION;
            case "text" -> TEXT;
            case "instruction" -> ALPACA;
            case "input_ids" -> TOKENS;
            default -> null;
        };
    }

    static UserError unknown(Path file) {
        return new UserError("data file " + file + ": unknown format; give JSONL (or Parquet) of {\"messages\": [...]},"
                + " {\"conversations\": [...]} (ShareGPT), {\"prompt\", \"completion\"}, {\"text\"}, Alpaca"
                + " {\"instruction\", \"output\"} or pre-tokenized {\"input_ids\": [...]}; SQuAD v1.1 JSON; plain text"
                + " (.txt); or a directory written by 'fsdp4j prepare' (or name the format: data.format, --format)");
    }

    /** {@link #parse}, with {@code auto} (told from the content) as null. */
    public static DatasetFormat parseOrAuto(String key) {
        return key.equals("auto") ? null : parse(key);
    }

    public static DatasetFormat parse(String key) {
        return Arrays.stream(values()).filter(f -> f.key().equals(key)).findFirst().orElseThrow(() -> new UserError(
                "unknown dataset format '" + key + "'; give one of "
                        + Arrays.stream(values()).map(DatasetFormat::key).collect(Collectors.joining(", "))));
    }
}
