package io.fsdp4j.data;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.UserError;
import java.io.BufferedInputStream;
import java.io.IOException;
import java.io.InputStream;

/**
 * A dataset file's records (a JSON list, or JSONL with blank lines skipped) and its lines ({@link Utf8Lines}), each
 * with where it is ({@code FILE line N}): errors are one line naming the source and the line.
 */
final class JsonRecords {
    static final ObjectMapper JSON = new ObjectMapper();

    private final String source;

    /** The records of {@code source}, as messages call it (a file's path). */
    JsonRecords(String source) {
        this.source = source;
    }

    /** A record of a dataset file and where it is ("FILE line N"). */
    interface RecordConsumer {
        void accept(JsonNode node, String where);
    }

    /** Each record of a JSON list or of JSONL (blank lines skipped). */
    void records(BufferedInputStream in, DatasetFormat format, RecordConsumer each) throws IOException {
        if (firstNonSpace(in) == '[') {
            recordList(in, each);
        } else {
            recordLines(in, format, each);
        }
    }

    /** The first byte that is not white space (nor part of a UTF-8 byte order mark), without consuming it. */
    static int firstNonSpace(BufferedInputStream in) throws IOException {
        in.mark(1 << 15);
        int c;
        do {
            c = in.read();
        } while (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == 0xEF || c == 0xBB || c == 0xBF);
        in.reset();
        return c;
    }

    private void recordList(InputStream in, RecordConsumer each) throws IOException {
        // Jackson reads the bytes itself, so an invalid UTF-8 byte is reported at its own line.
        try (JsonParser parser = JSON.createParser(in)) {
            parser.nextToken(); // [
            int record = 0;
            for (JsonToken t = parser.nextToken(); t != JsonToken.END_ARRAY; t = parser.nextToken()) {
                if (t == null) {
                    throw new UserError(source + " line " + parser.currentLocation().getLineNr()
                            + ": not valid JSON: the list is not closed");
                }
                record++;
                long line = parser.currentTokenLocation().getLineNr();
                JsonNode node = parser.readValueAsTree();
                each.accept(node, source + " line " + line + " (record " + record + ")");
            }
            if (parser.nextToken() != null) {
                throw new UserError(source + " line " + parser.currentTokenLocation().getLineNr()
                        + ": not valid JSON: text after the closing ']'");
            }
        } catch (JsonProcessingException e) {
            throw invalidJson(e);
        }
    }

    private void recordLines(InputStream in, DatasetFormat format, RecordConsumer each) throws IOException {
        lines(in, (lineNo, line) -> {
            if (line.isBlank()) {
                return;
            }
            String where = source + " line " + lineNo;
            JsonNode node;
            try {
                node = JSON.readTree(line);
            } catch (JsonProcessingException e) {
                throw new UserError(where + ": not valid JSON: " + oneLine(e.getOriginalMessage())
                        + (line.stripLeading().startsWith("{") ? "" : " (" + (format == DatasetFormat.ALPACA
                                ? "Alpaca data" : "the data") + " is a JSON list or JSONL)"));
            }
            each.accept(node, where);
        });
    }

    /** Each line of {@code in} ({@link Utf8Lines}); a line that is not UTF-8 is an error naming it. */
    void lines(InputStream in, Utf8Lines.LineConsumer each) throws IOException {
        Utf8Lines.forEach(in, each, lineNo -> new UserError(source + " line " + lineNo + ": not valid UTF-8"));
    }

    /** Jackson's error as one line naming the source and the line: invalid UTF-8, or invalid JSON. */
    UserError invalidJson(JsonProcessingException e) {
        var at = e.getLocation();
        String line = at == null ? "" : " line " + at.getLineNr();
        if (e.getOriginalMessage() != null && e.getOriginalMessage().startsWith("Invalid UTF-8")) {
            return new UserError(source + line + ": not valid UTF-8");
        }
        return new UserError(source + line + ": not valid JSON: " + oneLine(e.getOriginalMessage()));
    }

    /** A message on one line of at most 200 characters, as error messages quote a value. */
    static String oneLine(String message) {
        String s = message == null ? "" : message.replaceAll("\\s+", " ").strip();
        return s.length() > 200 ? s.substring(0, 200) + "..." : s;
    }
}
