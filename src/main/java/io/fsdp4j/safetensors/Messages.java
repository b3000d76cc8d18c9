package io.fsdp4j.safetensors;

import io.fsdp4j.UserError;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.stream.Collectors;

/** Helpers that keep error messages on one line and name the file they are about. */
final class Messages {
    private static final int MAX_QUOTED = 200;

    private Messages() {}

    /** A {@link UserError} whose message is {@code <path>: <problem>}. */
    static UserError error(Path path, String problem) {
        return new UserError(path + ": " + oneLine(problem));
    }

    static UserError error(Path path, String problem, Throwable cause) {
        return new UserError(path + ": " + oneLine(problem), cause);
    }

    /** A name from a file, quoted, with control characters escaped and length capped. */
    static String quote(String name) {
        StringBuilder sb = new StringBuilder("'");
        int limit = Math.min(name.length(), MAX_QUOTED);
        for (int i = 0; i < limit; i++) {
            char c = name.charAt(i);
            if (Character.isISOControl(c) || c == '\u2028' || c == '\u2029') {
                sb.append(String.format("\\u%04x", (int) c));
            } else {
                sb.append(c);
            }
        }
        if (name.length() > limit) {
            sb.append("...");
        }
        return sb.append('\'').toString();
    }

    /** Collapses all whitespace runs (newlines included) to single spaces. */
    static String oneLine(String text) {
        return text == null ? "" : text.strip().replaceAll("(?U)\\s+", " ");
    }

    static String shape(long[] shape) {
        return Arrays.stream(shape).mapToObj(Long::toString).collect(Collectors.joining(", ", "[", "]"));
    }
}
