package io.fsdp4j.train;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.UserError;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;

/** The metrics JSONL of {@code log.metrics}: one JSON object a line, flushed as it is written. */
public final class MetricsFile implements AutoCloseable {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final BufferedWriter out;

    private MetricsFile(BufferedWriter out) {
        this.out = out;
    }

    public static MetricsFile create(Path path) {
        try {
            Path parent = path.toAbsolutePath().getParent();
            if (parent != null) {
                Files.createDirectories(parent);
            }
            return new MetricsFile(Files.newBufferedWriter(path));
        } catch (IOException e) {
            throw new UserError("cannot write metrics file " + path + ": " + e.getMessage());
        }
    }

    public static String json(Map<String, ?> record) {
        try {
            return JSON.writeValueAsString(record);
        } catch (JsonProcessingException e) {
            throw new IllegalArgumentException(e);
        }
    }

    public void write(Map<String, ?> record) {
        try {
            out.write(json(record));
            out.newLine();
            out.flush();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Override
    public void close() {
        try {
            out.close();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
