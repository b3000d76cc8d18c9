package io.fsdp4j.plan;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.UserError;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The JSON lines of a file that fsdp4j wrote (nccl-test's, bench's), as written or as {@code fsdp4j launch} prefixes
 * them ({@code [node 0 process 0] {...}}): what plan's {@code --nccl-test} and {@code --bench} read.
 */
final class JsonLines {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** One line with a '{': its number (from 1) and its object from that brace, or null where that is not JSON. */
    record Line(int number, JsonNode json) {}

    private JsonLines() {}

    /** Every line with a '{' (other lines, the tables' and launch's own, are passed over). */
    static List<Line> read(Path file, String option) {
        List<String> lines;
        try {
            lines = Files.readAllLines(file);
        } catch (IOException e) {
            throw new UserError(option + ": cannot read " + file + " (" + e.getMessage() + ")");
        }
        List<Line> found = new ArrayList<>();
        for (int i = 0; i < lines.size(); i++) {
            String line = lines.get(i);
            int brace = line.indexOf('{');
            if (brace < 0) {
                continue;
            }
            JsonNode json;
            try {
                json = JSON.readTree(line.substring(brace));
            } catch (JsonProcessingException e) {
                json = null;
            }
            found.add(new Line(i + 1, json));
        }
        return found;
    }
}
