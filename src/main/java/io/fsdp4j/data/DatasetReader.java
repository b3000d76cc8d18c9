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
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;

/**
 * Reads a dataset file of one {@link DatasetFormat} and tokenizes it into documents, one at a time. Errors are
 * {@link UserError}s of one line that name the file and the line (and record) of the problem.
 */
public final class DatasetReader {
    private static final ObjectMapper JSON = new ObjectMapper();

    /**
     * One tokenized document.
     *
     * @param tokens  ids and labels (-100 on prompt positions)
     * @param group   documents of one group go to the same split (SQuAD: the questions of one paragraph)
     * @param id      the example's id, for evaluation
     * @param answers the accepted answers of a prompt-and-response example; empty for text and tokens
     */
    public record Document(Sequence tokens, int group, String id, List<String> answers) {}

    private final String source;
    private final TextTokenizer tokenizer;
    private final InstructionPrompt prompt;
    private final Consumer<Document> sink;
    private int documents;

    private DatasetReader(String source, TextTokenizer tokenizer, InstructionPrompt prompt, Consumer<Document> sink) {
        this.source = source;
        this.tokenizer = tokenizer;
        this.prompt = prompt;
        this.sink = sink;
    }

    /**
     * Reads {@code file} in {@code format}, handing each document to {@code sink} in file order. {@code prompt}
     * is the Alpaca prompt format (unused by the other formats).
     */
    public static void read(Path file, DatasetFormat format, TextTokenizer tokenizer, InstructionPrompt prompt,
                            Consumer<Document> sink) {
        if (format == DatasetFormat.TOKENS) {
            int[] index = {0};
            JsonlTokens.read(file, tokenizer.vocabSize(), s -> {
                sink.accept(new Document(s, index[0], Integer.toString(index[0]), List.of()));
                index[0]++;
            });
            return;
        }
        try (InputStream in = Files.newInputStream(file)) {
            read(file.toString(), in, format, tokenizer, prompt, sink);
        } catch (NoSuchFileException e) {
            throw new UserError("input file " + file + " does not exist");
        } catch (IOException e) {
            throw new UserError("cannot read " + file + ": " + e.getMessage());
        }
    }

    /**
     * As {@link #read(Path, DatasetFormat, TextTokenizer, InstructionPrompt, Consumer)}, from a stream that messages
     * call {@code source}; not for pre-tokenized JSONL.
     */
    public static void read(String source, InputStream in, DatasetFormat format, TextTokenizer tokenizer,
                            InstructionPrompt prompt, Consumer<Document> sink) throws IOException {
        var reader = new DatasetReader(source, tokenizer, prompt, sink);
        var buffered = new BufferedInputStream(in, 1 << 16);
        switch (format) {
            case ALPACA -> reader.alpaca(buffered);
            case SQUAD -> reader.squad(buffered);
            case TEXT -> reader.text(buffered);
            case TOKENS -> throw new IllegalArgumentException("pre-tokenized JSONL is read from a file");
        }
    }

    // ---- Alpaca: a JSON list of objects, or JSONL ----

    private void alpaca(BufferedInputStream in) throws IOException {
        if (firstNonSpace(in) == '[') {
            alpacaList(in);
        } else {
            alpacaLines(in);
        }
    }

    /** The first byte that is not white space (nor part of a UTF-8 byte order mark), without consuming it. */
    private static int firstNonSpace(BufferedInputStream in) throws IOException {
        in.mark(1 << 15);
        int c;
        do {
            c = in.read();
        } while (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == 0xEF || c == 0xBB || c == 0xBF);
        in.reset();
        return c;
    }

    private void alpacaList(InputStream in) throws IOException {
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
                alpacaRecord(node, source + " line " + line + " (record " + record + ")");
            }
            if (parser.nextToken() != null) {
                throw new UserError(source + " line " + parser.currentTokenLocation().getLineNr()
                        + ": not valid JSON: text after the closing ']'");
            }
        } catch (JsonProcessingException e) {
            throw invalidJson(e);
        }
    }

    private void alpacaLines(InputStream in) throws IOException {
        forEachLine(in, (lineNo, line) -> {
            if (line.isBlank()) {
                return;
            }
            String where = source + " line " + lineNo;
            JsonNode node;
            try {
                node = JSON.readTree(line);
            } catch (JsonProcessingException e) {
                throw new UserError(where + ": not valid JSON: " + oneLine(e.getOriginalMessage())
                        + (line.stripLeading().startsWith("{") ? "" : " (Alpaca data is a JSON list or JSONL)"));
            }
            alpacaRecord(node, where);
        });
    }

    private void alpacaRecord(JsonNode node, String where) {
        if (node == null || !node.isObject()) {
            throw new UserError(where + ": expected an object with \"instruction\", \"input\" (optional) and"
                    + " \"output\"");
        }
        String instruction = text(node, "instruction", where, true);
        String input = text(node, "input", where, false);
        String output = text(node, "output", where, true);
        Sequence tokens = tokenizer.promptAndResponse(prompt.prompt(instruction, input), output);
        emit(tokens, documents, Integer.toString(documents), List.of(output));
    }

    // ---- SQuAD v1.1 ----

    private void squad(InputStream in) throws IOException {
        boolean sawData = false;
        int paragraphs = 0;
        try (JsonParser parser = JSON.createParser(in)) {
            if (parser.nextToken() != JsonToken.START_OBJECT) {
                throw new UserError(source + " line " + parser.currentTokenLocation().getLineNr()
                        + ": not SQuAD v1.1 JSON (an object with a \"data\" list)");
            }
            for (JsonToken t = parser.nextToken(); t == JsonToken.FIELD_NAME; t = parser.nextToken()) {
                String field = parser.currentName();
                JsonToken value = parser.nextToken();
                if (!field.equals("data")) {
                    parser.skipChildren();
                    continue;
                }
                if (value != JsonToken.START_ARRAY) {
                    throw new UserError(source + " line " + parser.currentTokenLocation().getLineNr()
                            + ": \"data\" must be a list of articles");
                }
                sawData = true;
                int article = 0;
                for (JsonToken a = parser.nextToken(); a != JsonToken.END_ARRAY; a = parser.nextToken()) {
                    if (a == null) {
                        throw new UserError(source + " line " + parser.currentLocation().getLineNr()
                                + ": not valid JSON: the \"data\" list is not closed");
                    }
                    long line = parser.currentTokenLocation().getLineNr();
                    JsonNode node = parser.readValueAsTree();
                    paragraphs = squadArticle(node, line, article, paragraphs);
                    article++;
                }
            }
        } catch (JsonProcessingException e) {
            throw invalidJson(e);
        }
        if (!sawData) {
            throw new UserError(source + ": not SQuAD v1.1 JSON: no \"data\" list of articles");
        }
    }

    /** Emits the article's questions; returns the number of paragraphs read so far (the groups). */
    private int squadArticle(JsonNode article, long line, int index, int paragraphs) {
        String where = source + " line " + line + " (data[" + index + "]";
        JsonNode list = article == null ? null : article.get("paragraphs");
        if (list == null || !list.isArray()) {
            throw new UserError(where + "): an article needs a \"paragraphs\" list");
        }
        for (int p = 0; p < list.size(); p++) {
            String paragraphAt = where + ".paragraphs[" + p + "])";
            JsonNode paragraph = list.get(p);
            if (!paragraph.isObject()) {
                throw new UserError(paragraphAt + ": expected an object with \"context\" and \"qas\"");
            }
            String context = text(paragraph, "context", paragraphAt, true);
            JsonNode qas = paragraph.get("qas");
            if (qas == null || !qas.isArray()) {
                throw new UserError(paragraphAt + ": missing the \"qas\" list of questions");
            }
            for (int q = 0; q < qas.size(); q++) {
                String at = where + ".paragraphs[" + p + "].qas[" + q + "])";
                JsonNode qa = qas.get(q);
                if (!qa.isObject()) {
                    throw new UserError(at + ": expected an object with \"question\" and \"answers\"");
                }
                String question = text(qa, "question", at, true);
                String id = qa.has("id") ? text(qa, "id", at, true) : Integer.toString(documents);
                JsonNode answers = qa.get("answers");
                if (answers == null || !answers.isArray() || answers.isEmpty()) {
                    throw new UserError(at + ": missing \"answers\" (a non-empty list of {\"text\": ...})");
                }
                List<String> texts = new ArrayList<>();
                for (int i = 0; i < answers.size(); i++) {
                    if (!answers.get(i).isObject()) {
                        throw new UserError(at + ": answers[" + i + "] must be an object with \"text\"");
                    }
                    texts.add(text(answers.get(i), "text", at + " answers[" + i + "]", true));
                }
                Sequence tokens = tokenizer.promptAndResponse(SquadPrompt.prompt(context, question),
                        SquadPrompt.completion(texts.getFirst()));
                emit(tokens, paragraphs, id, texts);
            }
            paragraphs++;
        }
        return paragraphs;
    }

    // ---- plain text ----

    private void text(InputStream in) throws IOException {
        StringBuilder document = new StringBuilder();
        forEachLine(in, (lineNo, line) -> {
            if (!line.isBlank()) {
                if (!document.isEmpty()) {
                    document.append('\n');
                }
                document.append(line);
            } else if (!document.isEmpty()) {
                emitText(document);
            }
        });
        if (!document.isEmpty()) {
            emitText(document);
        }
    }

    private void emitText(StringBuilder document) {
        emit(tokenizer.document(document.toString()), documents, Integer.toString(documents), List.of());
        document.setLength(0);
    }

    /** A line's number (from 1) and its text, without the line end (\n or \r\n). */
    private interface LineConsumer {
        void accept(int lineNo, String line);
    }

    /** Each line of {@code in}, decoded strictly as UTF-8 one line at a time, so that an error names its line. */
    private void forEachLine(InputStream in, LineConsumer each) throws IOException {
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

    // ---- shared ----

    private void emit(Sequence tokens, int group, String id, List<String> answers) {
        sink.accept(new Document(tokens, group, id, answers));
        documents++;
    }

    /** The string field {@code key}; a missing optional one is null. */
    private static String text(JsonNode node, String key, String where, boolean required) {
        JsonNode v = node.get(key);
        if (v == null || v.isNull()) {
            if (required) {
                throw new UserError(where + ": missing \"" + key + "\"");
            }
            return null;
        }
        if (!v.isTextual()) {
            throw new UserError(where + ": \"" + key + "\" must be a string, found " + oneLine(v.toString()));
        }
        return v.textValue();
    }

    private UserError invalidJson(JsonProcessingException e) {
        var at = e.getLocation();
        String line = at == null ? "" : " line " + at.getLineNr();
        if (e.getOriginalMessage() != null && e.getOriginalMessage().startsWith("Invalid UTF-8")) {
            return new UserError(source + line + ": not valid UTF-8");
        }
        return new UserError(source + line + ": not valid JSON: " + oneLine(e.getOriginalMessage()));
    }

    private static String oneLine(String message) {
        String s = message == null ? "" : message.replaceAll("\\s+", " ").strip();
        return s.length() > 200 ? s.substring(0, 200) + "..." : s;
    }
}
