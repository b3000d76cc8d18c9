package io.fsdp4j.data;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.UserError;
import io.fsdp4j.tokenizer.ChatTemplate;
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
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;
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
    private final ReadOptions options;
    private final ChatTemplate template;
    private final Consumer<Document> sink;
    private int documents;
    private DatasetFormat format;
    private final ExecutorService pool; // null: tokenize on the reading thread
    private final ArrayDeque<Future<Document>> pending = new ArrayDeque<>();

    private DatasetReader(String source, TextTokenizer tokenizer, InstructionPrompt prompt, ReadOptions options,
                          ChatTemplate template, Consumer<Document> sink, int documents, ExecutorService pool) {
        this.pool = pool;
        this.source = source;
        this.tokenizer = tokenizer;
        this.prompt = prompt;
        this.options = options;
        this.template = template;
        this.sink = sink;
        this.documents = documents;
    }

    /**
     * Reads {@code file} in {@code format}, handing each document to {@code sink} in file order. {@code prompt}
     * is the Alpaca prompt format (unused by the other formats).
     */
    public static void read(Path file, DatasetFormat format, TextTokenizer tokenizer, InstructionPrompt prompt,
                            Consumer<Document> sink) {
        read(file, format, tokenizer, prompt, ReadOptions.DEFAULT, sink);
    }

    /**
     * Reads {@code path} (a file, or a directory of shards in name order, {@link DatasetFiles}) in {@code format},
     * handing each document to {@code sink} in order. {@code options} say how conversations are rendered and
     * labelled.
     */
    public static void read(Path path, DatasetFormat format, TextTokenizer tokenizer, InstructionPrompt prompt,
                            ReadOptions options, Consumer<Document> sink) {
        read(path, format, tokenizer, prompt, options, sink, null);
    }

    /**
     * As {@link #read(Path, DatasetFormat, TextTokenizer, InstructionPrompt, ReadOptions, Consumer)}, tokenizing on
     * {@code pool} (null: on this thread) while reading goes on: a file larger than memory streams through, a bounded
     * number of documents ahead, and reaches {@code sink} in file order.
     */
    public static void read(Path path, DatasetFormat format, TextTokenizer tokenizer, InstructionPrompt prompt,
                            ReadOptions options, Consumer<Document> sink, ExecutorService pool) {
        ChatTemplate template = chatTemplate(options.chatTemplate());
        int[] index = {0};
        for (Path file : DatasetFiles.shards(path)) {
            if (format == DatasetFormat.TOKENS) {
                JsonlTokens.read(file, tokenizer.vocabSize(), s -> {
                    sink.accept(new Document(s, index[0], Integer.toString(index[0]), List.of()));
                    index[0]++;
                });
                continue;
            }
            if (DatasetFiles.isParquet(file)) {
                var reader = new DatasetReader(file.toString(), tokenizer, prompt, options, template, d -> {
                    sink.accept(d);
                    index[0]++;
                }, index[0], pool);
                reader.format = format;
                RecordConsumer each = reader.recordConsumer(format);
                ParquetRows.read(file, (row, number) -> each.accept(row, file + " row " + number));
                reader.drain();
                continue;
            }
            try (InputStream in = DatasetFiles.open(file)) {
                var reader = new DatasetReader(file.toString(), tokenizer, prompt, options, template, d -> {
                    sink.accept(d);
                    index[0]++;
                }, index[0], pool);
                reader.read(in, format);
                reader.drain();
            } catch (IOException e) {
                throw new UserError("cannot read " + file + ": " + e.getMessage());
            }
        }
    }

    /** The chat template of {@code data.chat_template} / {@code --chat-template}, or null for the tokenizer's. */
    static ChatTemplate chatTemplate(Path file) {
        if (file == null) {
            return null;
        }
        try {
            return ChatTemplate.of(Files.readString(file));
        } catch (NoSuchFileException e) {
            throw new UserError("chat template " + file + " does not exist; give a Jinja file (such as a model's"
                    + " chat_template.jinja)");
        } catch (IOException e) {
            throw new UserError("cannot read chat template " + file + ": " + e.getMessage());
        }
    }

    /**
     * As {@link #read(Path, DatasetFormat, TextTokenizer, InstructionPrompt, Consumer)}, from a stream that messages
     * call {@code source}; not for pre-tokenized JSONL.
     */
    public static void read(String source, InputStream in, DatasetFormat format, TextTokenizer tokenizer,
                            InstructionPrompt prompt, Consumer<Document> sink) throws IOException {
        new DatasetReader(source, tokenizer, prompt, ReadOptions.DEFAULT, null, sink, 0, null).read(in, format);
    }

    /** What reads one record (a JSONL line, a Parquet row) of {@code format}. */
    private RecordConsumer recordConsumer(DatasetFormat format) {
        return switch (format) {
            case ALPACA -> this::alpacaRecord;
            case MESSAGES -> (node, where) -> conversation(node, where, false);
            case SHAREGPT -> (node, where) -> conversation(node, where, true);
            case PROMPT_COMPLETION -> this::promptCompletionRecord;
            case TEXT -> this::textRecord;
            case SQUAD, TOKENS -> throw new UserError(source + ": " + format.key() + " data is not read from Parquet;"
                    + " convert it to JSON");
        };
    }

    private void read(InputStream in, DatasetFormat format) throws IOException {
        this.format = format;
        var buffered = new BufferedInputStream(in, 1 << 16);
        switch (format) {
            case ALPACA -> records(buffered, this::alpacaRecord);
            case SQUAD -> squad(buffered);
            case TEXT -> {
                if (firstNonSpace(buffered) == '{') {
                    records(buffered, this::textRecord);
                } else {
                    text(buffered);
                }
            }
            case MESSAGES -> records(buffered, (node, where) -> conversation(node, where, false));
            case SHAREGPT -> records(buffered, (node, where) -> conversation(node, where, true));
            case PROMPT_COMPLETION -> records(buffered, this::promptCompletionRecord);
            case TOKENS -> throw new IllegalArgumentException("pre-tokenized JSONL is read from a file");
        }
    }

    // ---- Alpaca: a JSON list of objects, or JSONL ----

    /** A record of a dataset file and where it is ("FILE line N"). */
    private interface RecordConsumer {
        void accept(JsonNode node, String where);
    }

    /** Each record of a JSON list or of JSONL (blank lines skipped). */
    private void records(BufferedInputStream in, RecordConsumer each) throws IOException {
        if (firstNonSpace(in) == '[') {
            recordList(in, each);
        } else {
            recordLines(in, each);
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

    private void recordLines(InputStream in, RecordConsumer each) throws IOException {
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
                        + (line.stripLeading().startsWith("{") ? "" : " (" + (format == DatasetFormat.ALPACA
                                ? "Alpaca data" : "the data") + " is a JSON list or JSONL)"));
            }
            each.accept(node, where);
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
        emit(() -> tokenizer.promptAndResponse(prompt.prompt(instruction, input), output), documents,
                Integer.toString(documents), List.of(output));
    }

    // ---- conversations: messages, ShareGPT ----

    /** ShareGPT's speakers, and the roles they become. */
    private static final Map<String, String> SHAREGPT_ROLES = Map.ofEntries(
            Map.entry("system", "system"), Map.entry("human", "user"), Map.entry("user", "user"),
            Map.entry("gpt", "assistant"), Map.entry("assistant", "assistant"), Map.entry("chatgpt", "assistant"),
            Map.entry("bing", "assistant"), Map.entry("bard", "assistant"), Map.entry("model", "assistant"),
            Map.entry("tool", "tool"), Map.entry("function_response", "tool"), Map.entry("observation", "tool"));
    private static final Set<String> ROLES = Set.of("system", "developer", "user", "assistant", "tool");

    private void conversation(JsonNode node, String where, boolean shareGpt) {
        String key = shareGpt ? "conversations" : "messages";
        if (node == null || !node.isObject()) {
            throw new UserError(where + ": expected an object with \"" + key + "\"");
        }
        JsonNode list = node.get(key);
        if (list == null || !list.isArray()) {
            throw new UserError(where + ": missing \"" + key + "\", a list of " + (shareGpt
                    ? "{\"from\", \"value\"}" : "{\"role\", \"content\"}") + " messages");
        }
        if (list.isEmpty()) {
            throw new UserError(where + ": the conversation is empty; give at least one message, or remove the line");
        }
        List<Map<String, Object>> messages = new ArrayList<>(list.size());
        for (int i = 0; i < list.size(); i++) {
            messages.add(shareGpt ? shareGptMessage(list.get(i), where, i + 1) : message(list.get(i), where, i + 1));
        }
        Map<String, Object> extra = new HashMap<>();
        JsonNode tools = node.get("tools");
        if (tools != null && !tools.isNull()) {
            if (!tools.isArray()) {
                throw new UserError(where + ": \"tools\" must be a list of tool definitions");
            }
            extra.put("tools", JSON.convertValue(tools, List.class));
        }
        emit(() -> {
            try {
                return ScopedValue.where(ChatTemplate.TIME_LIMIT, options.chatTemplateTimeout())
                        .call(() -> tokenizer.conversation(messages, extra, template, options.allTokens()));
            } catch (UserError e) {
                boolean ofTheTemplate = e.getMessage().startsWith("the chat template ")
                        || e.getMessage().startsWith("chat template error");
                throw new UserError(where + ": " + e.getMessage() + (options.chatTemplate() != null
                        ? " (chat template " + options.chatTemplate() + ")" : ofTheTemplate
                        ? " (the chat template of " + tokenizer.name() + ")" : ""), e);
            }
        }, documents, Integer.toString(documents), List.of());
    }

    @SuppressWarnings("unchecked")
    private Map<String, Object> message(JsonNode m, String where, int index) {
        String at = where + ": message " + index;
        if (!m.isObject()) {
            throw new UserError(at + " must be an object with \"role\" and \"content\"");
        }
        JsonNode role = m.get("role");
        if (role == null || !role.isTextual()) {
            throw new UserError(at + " has no \"role\" (system, user, assistant or tool)");
        }
        if (!ROLES.contains(role.textValue())) {
            throw new UserError(at + " has the unknown role '" + oneLine(role.textValue()) + "'; give system, user,"
                    + " assistant or tool");
        }
        JsonNode content = m.get("content");
        boolean toolCalls = m.hasNonNull("tool_calls");
        if (content == null || content.isNull()) {
            if (!toolCalls) {
                throw new UserError(at + " has no \"content\"");
            }
        } else if (!content.isTextual() && !content.isArray()) {
            throw new UserError(at + ": \"content\" must be a string (or a list of parts), found "
                    + oneLine(content.toString()));
        }
        Map<String, Object> map = JSON.convertValue(m, Map.class);
        if (content == null || content.isNull()) {
            map.put("content", ""); // an assistant turn of tool calls only
        }
        checkText(map.get("content"), at);
        return map;
    }

    private Map<String, Object> shareGptMessage(JsonNode m, String where, int index) {
        String at = where + ": message " + index;
        if (!m.isObject()) {
            throw new UserError(at + " must be an object with \"from\" and \"value\"");
        }
        JsonNode from = m.get("from");
        if (from == null || !from.isTextual()) {
            throw new UserError(at + " has no \"from\" (human, gpt, system or tool)");
        }
        String role = SHAREGPT_ROLES.get(from.textValue());
        if (role == null) {
            throw new UserError(at + " is from the unknown speaker '" + oneLine(from.textValue()) + "'; give human,"
                    + " gpt, system or tool (or user, assistant)");
        }
        JsonNode value = m.get("value");
        if (value == null || !value.isTextual()) {
            throw new UserError(at + " has no \"value\" string");
        }
        Map<String, Object> map = new LinkedHashMap<>();
        map.put("role", role);
        map.put("content", value.textValue());
        checkText(value.textValue(), at);
        return map;
    }

    /** Text may not hold the noncharacters that the chat-template renderer uses as markers. */
    private static void checkText(Object content, String at) {
        if (content instanceof String text && (ChatTemplate.hasMarkers(text) || text.indexOf('\uFDD2') >= 0)) {
            throw new UserError(at + " holds a Unicode noncharacter (U+FDD0..U+FDD2); remove it");
        }
    }

    // ---- prompt/completion and {"text"} ----

    private void promptCompletionRecord(JsonNode node, String where) {
        if (node == null || !node.isObject()) {
            throw new UserError(where + ": expected an object with \"prompt\" and \"completion\"");
        }
        String promptText = text(node, "prompt", where, true);
        String completion = text(node, "completion", where, true);
        emit(() -> tokenizer.promptAndResponse(promptText, completion), documents, Integer.toString(documents),
                List.of(completion));
    }

    private void textRecord(JsonNode node, String where) {
        if (node == null || !node.isObject()) {
            throw new UserError(where + ": expected an object with \"text\"");
        }
        String text = text(node, "text", where, true);
        if (text.isEmpty()) {
            throw new UserError(where + ": \"text\" is empty; remove the line");
        }
        emit(() -> tokenizer.document(text), documents, Integer.toString(documents), List.of());
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
                emit(() -> tokenizer.promptAndResponse(SquadPrompt.prompt(context, question),
                        SquadPrompt.completion(texts.getFirst())), paragraphs, id, texts);
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
        String text = document.toString();
        emit(() -> tokenizer.document(text), documents, Integer.toString(documents), List.of());
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

    /**
     * Hands a document to the sink. With a pool ({@link #read(Path, DatasetFormat, TextTokenizer, InstructionPrompt,
     * ReadOptions, Consumer, ExecutorService)}), {@code tokens} runs there and documents still reach the sink in
     * order, on this thread.
     */
    private void emit(java.util.function.Supplier<Sequence> tokens, int group, String id, List<String> answers) {
        documents++;
        if (pool == null) {
            sink.accept(new Document(tokens.get(), group, id, answers));
            return;
        }
        pending.addLast(pool.submit(() -> new Document(tokens.get(), group, id, answers)));
        if (pending.size() >= AHEAD) {
            drainOne();
        }
    }

    /** Documents tokenized ahead of the sink, per pool. */
    private static final int AHEAD = 256;

    private void drainOne() {
        try {
            sink.accept(pending.removeFirst().get());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while tokenizing " + source, e);
        } catch (ExecutionException e) {
            for (Future<Document> f : pending) {
                f.cancel(false);
            }
            pending.clear();
            if (e.getCause() instanceof RuntimeException r) {
                throw r;
            }
            throw new IllegalStateException(e.getCause());
        }
    }

    private void drain() {
        while (!pending.isEmpty()) {
            drainOne();
        }
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
