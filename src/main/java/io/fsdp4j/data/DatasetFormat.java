package io.fsdp4j.data;

import io.fsdp4j.UserError;
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

    public static DatasetFormat parse(String key) {
        return Arrays.stream(values()).filter(f -> f.key().equals(key)).findFirst().orElseThrow(() -> new UserError(
                "unknown dataset format '" + key + "'; give one of "
                        + Arrays.stream(values()).map(DatasetFormat::key).collect(Collectors.joining(", "))));
    }
}
