package io.fsdp4j.data;

import io.fsdp4j.UserError;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.function.IntFunction;

/**
 * The lines of a text input, decoded strictly as UTF-8 one line at a time, so that an error names its line: a
 * malformed byte is an error, not a U+FFFD that would be tokenized silently. A UTF-8 byte order mark at the start
 * marks the encoding and is not text; lines end at {@code \n} or {@code \r\n}.
 */
public final class Utf8Lines {
    private Utf8Lines() {}

    /** A line's number (from 1) and its text, without the line end. */
    public interface LineConsumer {
        void accept(int lineNo, String line) throws IOException;
    }

    /** Hands each line of {@code in} to {@code each}; a line that is not UTF-8 throws {@code invalid}'s error. */
    public static void forEach(InputStream in, LineConsumer each, IntFunction<UserError> invalid) throws IOException {
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
                throw invalid.apply(lineNo);
            }
            line.reset();
            each.accept(lineNo, text);
            if (b < 0) {
                break;
            }
        }
    }
}
