package io.fsdp4j.data;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.UserError;
import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/**
 * A dataset file's records (a JSON list, or JSONL with blank lines skipped) and its lines (decoded strictly as UTF-8,
 * one at a time), each with where it is ({@code FILE line N}): errors are one line naming the source and the line.
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

    /** A line's number (from 1) and its text, without the line end (\n or \r\n). */
    interface LineConsumer {
        void accept(int lineNo, String line);
    }

    /** Each line of {@code in}, decoded strictly as UTF-8 one line at a time, so that an error names its line. */
    void lines(InputStream in, LineConsumer each) throws IOException {
        CharsetDecoder utf8 = StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT).onUnmappableCharacter(CodingErrorAction.REPORT);
        ByteArrayOutputStream line = new ByteArrayOutputStream();
        int lineNo = 0;
        for (int b = in.read(); b >= 0 || line.size() > 0; b = in.read()) {
            if (b >= 0 && b != '\n') {
                line.write(b);
                continue;
            }
            lineNo++;
            byte[] bytes = line.toByteArray();
            int start = lineNo == 1 && bytes.length >= 3 && (bytes[0] & 0xff) == 0xEF && (bytes[1] & 0xff) == 0xBB
                    && (bytes[2] & 0xff) == 0xBF ? 3 : 0; // a byte order mark
            int end = bytes.length > start && bytes[bytes.length - 1] == '\r' ? bytes.length - 1 : bytes.length;
            String text;
            try {
                text = utf8.decode(ByteBuffer.wrap(bytes, start, end - start)).toString();
            } catch (CharacterCodingException e) {
                throw new UserError(source + " line " + lineNo + ": not valid UTF-8");
            }
            line.reset();
            each.accept(lineNo, text);
            if (b < 0) {
                break;
            }
        }
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
