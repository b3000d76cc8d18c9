package io.fsdp4j.report;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.UserError;
import io.fsdp4j.config.LogSection;
import io.fsdp4j.report.TensorBoardEvents;
import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The metrics JSONL of {@code log.metrics}: one JSON object a line, flushed as it is written; and the same records
 * as TensorBoard scalars where {@code log.tensorboard} is set ({@link TensorBoardEvents}).
 */
public final class MetricsFile implements AutoCloseable {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final Path path;
    private final BufferedWriter out; // null: no log.metrics, TensorBoard only
    private TensorBoardEvents tensorboard;

    private MetricsFile(Path path, BufferedWriter out) {
        this.path = path;
        this.out = out;
    }

    /**
     * Where the records of a run go ({@code log.metrics}, {@code log.tensorboard}), for a run that starts afresh
     * ({@code resumedStep} 0) or continues after {@code resumedStep}; null when neither is set.
     */
    public static MetricsFile open(LogSection log, int resumedStep) {
        Path tensorboardDir = log.tensorboardDir();
        if (log.metrics() == null && tensorboardDir == null) {
            return null;
        }
        MetricsFile file = log.metrics() == null ? new MetricsFile(null, null)
                : resumedStep > 0 ? resume(log.metrics(), resumedStep) : create(log.metrics());
        if (tensorboardDir != null) {
            file.tensorboard = TensorBoardEvents.create(tensorboardDir, resumedStep);
        }
        return file;
    }

    public static MetricsFile create(Path path) {
        try {
            Path parent = path.toAbsolutePath().getParent();
            if (parent != null) {
                Files.createDirectories(parent);
            }
            return new MetricsFile(path, Files.newBufferedWriter(path));
        } catch (IOException e) {
            throw new UserError("cannot write metrics file " + path + ": " + e.getMessage());
        }
    }

    /**
     * The metrics file of a run resumed after step {@code step}: the lines of steps up to it are kept (those the
     * interrupted run wrote later, a torn last line, or a summary are dropped), and new lines follow them, so the
     * file holds the whole run once.
     */
    public static MetricsFile resume(Path path, int step) {
        List<String> kept = new ArrayList<>();
        if (Files.isRegularFile(path)) {
            try {
                for (String line : Files.readAllLines(path)) {
                    JsonNode record = parseOrNull(line);
                    if (record != null && record.has("step") && record.get("step").asInt() <= step) {
                        kept.add(line);
                    }
                }
            } catch (IOException e) {
                throw new UserError("cannot read metrics file " + path + ": " + e.getMessage());
            }
        }
        MetricsFile file = create(path);
        try {
            for (String line : kept) {
                file.out.write(line);
                file.out.newLine();
            }
            file.out.flush();
        } catch (IOException e) {
            throw new UserError("cannot write metrics file " + path + ": " + e.getMessage());
        }
        return file;
    }

    private static JsonNode parseOrNull(String line) {
        try {
            return JSON.readTree(line);
        } catch (JsonProcessingException e) {
            return null;
        }
    }

    private static String reason(IOException e) {
        return e instanceof java.nio.file.FileSystemException f && f.getReason() != null ? f.getReason()
                : e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
    }

    public static String json(Map<String, ?> record) {
        try {
            return JSON.writeValueAsString(record);
        } catch (JsonProcessingException e) {
            throw new IllegalArgumentException(e);
        }
    }

    public void write(Map<String, ?> record) {
        if (tensorboard != null) {
            tensorboard.record(record);
        }
        if (out == null) {
            return;
        }
        try {
            out.write(json(record));
            out.newLine();
            out.flush();
        } catch (IOException e) {
            throw new UserError("cannot write metrics file " + path + ": " + reason(e));
        }
    }

    @Override
    public void close() {
        if (tensorboard != null) {
            tensorboard.close();
        }
        if (out == null) {
            return;
        }
        try {
            out.close();
        } catch (IOException e) {
            throw new UserError("cannot write metrics file " + path + ": " + reason(e));
        }
    }
}
