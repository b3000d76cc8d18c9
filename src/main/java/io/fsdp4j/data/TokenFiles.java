package io.fsdp4j.data;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.UserError;
import io.fsdp4j.model.TokenBatch;
import java.io.BufferedReader;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.IntStream;

/**
 * A directory of token files written by {@code fsdp4j prepare}, memory-mapped read-only:
 * <ul>
 *   <li>{@code tokens.bin}: int32 little-endian ids of all documents back to back;</li>
 *   <li>{@code labels.bin}: int32 little-endian labels aligned with the ids, -100 where no loss is taken;</li>
 *   <li>{@code documents.bin}: int64 little-endian offset of each document's first token, then the total;</li>
 *   <li>{@code meta.json}: {@link TokenFilesMeta}, with the documents held out for evaluation;</li>
 *   <li>{@code answers.jsonl} (prompt-and-response data): per document its id, prompt length and accepted answers.</li>
 * </ul>
 * {@link #open} checks all of it (file sizes, offsets, every id and label) before anything is read. The mappings
 * live as long as this object is reachable.
 */
public final class TokenFiles implements Documents {
    public static final String TOKENS = "tokens.bin";
    public static final String LABELS = "labels.bin";
    public static final String DOCUMENTS = "documents.bin";
    public static final String ANSWERS = "answers.jsonl";
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ObjectMapper JSON = new ObjectMapper();

    private final Path dir;
    private final TokenFilesMeta meta;
    private final MemorySegment tokens;    // (tokens) int32
    private final MemorySegment labels;    // (tokens) int32
    private final MemorySegment offsets;   // (documents + 1) int64
    private final boolean[] held;          // (documents) held out for evaluation

    private TokenFiles(Path dir, TokenFilesMeta meta, MemorySegment tokens, MemorySegment labels,
                       MemorySegment offsets) {
        this.dir = dir;
        this.meta = meta;
        this.tokens = tokens;
        this.labels = labels;
        this.offsets = offsets;
        this.held = new boolean[meta.documents()];
        for (int d : meta.evalDocuments()) {
            held[d] = true;
        }
    }

    /** True when {@code dir} is a directory with a {@code meta.json}: token files, valid or not. */
    public static boolean isTokenFiles(Path dir) {
        return Files.isDirectory(dir) && Files.exists(dir.resolve(TokenFilesMeta.FILE));
    }

    /** Opens and checks the token files of {@code dir}: a missing, short or inconsistent file is a UserError. */
    public static TokenFiles open(Path dir) {
        if (!Files.isDirectory(dir)) {
            throw new UserError("token files " + dir + ": no such directory");
        }
        TokenFilesMeta meta = TokenFilesMeta.read(dir);
        Arena arena = Arena.ofAuto();
        var files = new TokenFiles(dir, meta,
                map(dir.resolve(TOKENS), meta.tokens() * Integer.BYTES, arena),
                map(dir.resolve(LABELS), meta.tokens() * Integer.BYTES, arena),
                map(dir.resolve(DOCUMENTS), (meta.documents() + 1L) * Long.BYTES, arena));
        files.check();
        return files;
    }

    private static MemorySegment map(Path file, long expectedBytes, Arena arena) {
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ)) {
            long size = channel.size();
            if (size != expectedBytes) {
                throw new UserError(file + " has " + size + " bytes, but meta.json says " + expectedBytes
                        + (size < expectedBytes ? " (truncated?)" : "") + "; prepare the data again");
            }
            return channel.map(FileChannel.MapMode.READ_ONLY, 0, size, arena);
        } catch (NoSuchFileException e) {
            throw new UserError("token files " + file.getParent() + ": " + file.getFileName() + " is missing");
        } catch (IOException e) {
            throw new UserError("cannot read " + file + ": " + e.getMessage());
        }
    }

    /** Offsets rise from 0 to the token count; ids lie in the vocabulary, labels too or are -100; loss counts match. */
    private void check() {
        long previous = offset(0);
        if (previous != 0) {
            throw corrupt(DOCUMENTS, "the first document starts at " + previous + ", not 0");
        }
        for (int d = 1; d <= meta.documents(); d++) {
            long o = offset(d);
            if (o <= previous || o > meta.tokens()) {
                throw corrupt(DOCUMENTS, "document " + (d - 1) + " ends at " + o + " (after " + previous + ", at most "
                        + meta.tokens() + ")");
            }
            previous = o;
        }
        if (previous != meta.tokens()) {
            throw corrupt(DOCUMENTS, "the documents end at " + previous + ", not at the " + meta.tokens() + " tokens");
        }
        int vocab = meta.vocabSize();
        int[] chunk = new int[1 << 16];
        long loss = 0;
        for (long at = 0; at < meta.tokens(); at += chunk.length) {
            int n = (int) Math.min(chunk.length, meta.tokens() - at);
            MemorySegment.copy(tokens, INT, at * Integer.BYTES, chunk, 0, n);
            for (int i = 0; i < n; i++) {
                if (chunk[i] < 0 || chunk[i] >= vocab) {
                    throw corrupt(TOKENS, "token " + (at + i) + " is id " + chunk[i] + ", outside the vocabulary of "
                            + vocab);
                }
            }
            MemorySegment.copy(labels, INT, at * Integer.BYTES, chunk, 0, n);
            for (int i = 0; i < n; i++) {
                if (chunk[i] != TokenBatch.IGNORE) {
                    if (chunk[i] < 0 || chunk[i] >= vocab) {
                        throw corrupt(LABELS, "label " + (at + i) + " is " + chunk[i] + ", outside the vocabulary of "
                                + vocab);
                    }
                    loss++;
                }
            }
        }
        if (loss != meta.lossTokens()) {
            throw corrupt(LABELS, "it has " + loss + " labels with a loss, meta.json says " + meta.lossTokens());
        }
    }

    private UserError corrupt(String file, String what) {
        return new UserError(dir.resolve(file) + " does not match meta.json: " + what + "; prepare the data again");
    }

    public Path dir() {
        return dir;
    }

    public TokenFilesMeta meta() {
        return meta;
    }

    @Override
    public int count() {
        return meta.documents();
    }

    public long tokens() {
        return meta.tokens();
    }

    /** Where document {@code d} starts among all tokens. */
    public long start(int d) {
        return offset(d);
    }

    @Override
    public int length(int d) {
        return Math.toIntExact(offset(d + 1) - offset(d));
    }

    @Override
    public void copy(int d, int from, int n, int[] ids, int[] labels, int at) {
        if (from < 0 || n < 0 || from + n > length(d)) {
            throw new IndexOutOfBoundsException("tokens " + from + ".." + (from + n) + " of document " + d);
        }
        long byteOffset = (offset(d) + from) * Integer.BYTES;
        MemorySegment.copy(tokens, INT, byteOffset, ids, at, n);
        MemorySegment.copy(this.labels, INT, byteOffset, labels, at, n);
    }

    /** Document {@code d} whole. */
    public Sequence document(int d) {
        int n = length(d);
        int[] ids = new int[n], l = new int[n];
        copy(d, 0, n, ids, l, 0);
        return new Sequence(ids, l);
    }

    public boolean isHeldOut(int d) {
        return held[d];
    }

    /** The indices of the documents of {@code split}, ascending. */
    public int[] documents(Split split) {
        return switch (split) {
            case ALL -> IntStream.range(0, count()).toArray();
            case EVAL -> meta.evalDocuments().clone();
            case TRAIN -> IntStream.range(0, count()).filter(d -> !held[d]).toArray();
        };
    }

    /** The examples of {@code split} that have answers (Alpaca and SQuAD data; none for text and tokens). */
    public List<EvalAnswer> answers(Split split) {
        if (meta.answers() == null) {
            return List.of();
        }
        Path file = dir.resolve(meta.answers());
        List<EvalAnswer> result = new ArrayList<>();
        try (BufferedReader in = Files.newBufferedReader(file)) {
            int lineNo = 0;
            for (String line = in.readLine(); line != null; line = in.readLine()) {
                lineNo++;
                if (line.isBlank()) {
                    continue;
                }
                EvalAnswer a = answer(file + " line " + lineNo, line);
                if (split == Split.ALL || held[a.document()] == (split == Split.EVAL)) {
                    result.add(a);
                }
            }
        } catch (NoSuchFileException e) {
            throw new UserError("token files " + dir + ": " + meta.answers() + " is missing");
        } catch (IOException e) {
            throw new UserError("cannot read " + file + ": " + e.getMessage());
        }
        return result;
    }

    private EvalAnswer answer(String where, String line) {
        try {
            JsonNode node = JSON.readTree(line);
            JsonNode d = node.get("document"), p = node.get("prompt_tokens");
            JsonNode id = node.get("id"), list = node.get("answers");
            if (d == null || !d.canConvertToInt() || d.intValue() < 0 || d.intValue() >= count()
                    || p == null || !p.canConvertToInt() || p.intValue() < 0 || p.intValue() > length(d.intValue())
                    || id == null || !id.isTextual() || list == null || !list.isArray()) {
                throw new UserError(where + ": expected {\"document\", \"id\", \"prompt_tokens\", \"answers\"} that fit"
                        + " the token files; prepare the data again");
            }
            int[] prompt = new int[p.intValue()];
            MemorySegment.copy(tokens, INT, offset(d.intValue()) * Integer.BYTES, prompt, 0, prompt.length);
            List<String> answers = new ArrayList<>();
            list.forEach(a -> answers.add(a.asText()));
            return new EvalAnswer(d.intValue(), id.textValue(), prompt, answers);
        } catch (IOException e) {
            throw new UserError(where + ": not valid JSON; prepare the data again");
        }
    }

    private long offset(int d) {
        return offsets.getAtIndex(LONG, d);
    }

    @Override
    public String toString() {
        return "TokenFiles[" + dir + ", " + meta.documents() + " documents, " + meta.tokens() + " tokens, "
                + meta.evalDocuments().length + " held out]";
    }
}
