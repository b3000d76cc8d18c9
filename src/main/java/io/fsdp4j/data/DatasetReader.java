package io.fsdp4j.data;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.databind.JsonNode;
import io.fsdp4j.UserError;
import io.fsdp4j.tokenizer.ChatTemplate;
import java.io.BufferedInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.function.Consumer;
import java.util.function.Supplier;

/**
 * Reads a dataset file of one {@link DatasetFormat} and tokenizes it into documents, one at a time. Errors are
 * {@link UserError}s of one line that name the file and the line (and record) of the problem.
 */
public final class DatasetReader {
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
    private final JsonRecords records;
    private final AheadTokenizer ahead;
    private int documents;

    private DatasetReader(String source, TextTokenizer tokenizer, InstructionPrompt prompt, ReadOptions options,
                          ChatTemplate template, Consumer<Document> sink, int documents, ExecutorService pool) {
        this.source = source;
        this.tokenizer = tokenizer;
        this.prompt = prompt;
        this.options = options;
        this.template = template;
        this.records = new JsonRecords(source);
        this.ahead = new AheadTokenizer(source, pool, sink);
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
                JsonRecords.RecordConsumer each = reader.recordConsumer(format);
                ParquetRows.read(file, (row, number) -> each.accept(row, file + " row " + number));
                reader.ahead.drain();
                continue;
            }
            try (InputStream in = DatasetFiles.open(file)) {
                var reader = new DatasetReader(file.toString(), tokenizer, prompt, options, template, d -> {
                    sink.accept(d);
                    index[0]++;
                }, index[0], pool);
                reader.read(in, format);
                reader.ahead.drain();
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
    private JsonRecords.RecordConsumer recordConsumer(DatasetFormat format) {
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
        var buffered = new BufferedInputStream(in, 1 << 16);
        switch (format) {
            case ALPACA -> records.records(buffered, format, this::alpacaRecord);
            case SQUAD -> squad(buffered);
            case TEXT -> {
                if (JsonRecords.firstNonSpace(buffered) == '{') {
                    records.records(buffered, format, this::textRecord);
                } else {
                    text(buffered);
                }
            }
            case MESSAGES -> records.records(buffered, format, (node, where) -> conversation(node, where, false));
            case SHAREGPT -> records.records(buffered, format, (node, where) -> conversation(node, where, true));
            case PROMPT_COMPLETION -> records.records(buffered, format, this::promptCompletionRecord);
            case TOKENS -> throw new IllegalArgumentException("pre-tokenized JSONL is read from a file");
        }
    }

    // ---- Alpaca: a JSON list of objects, or JSONL ----

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

    private void conversation(JsonNode node, String where, boolean shareGpt) {
        Conversation conversation = Conversation.of(node, where, shareGpt);
        var messages = conversation.messages();
        var extra = conversation.extra();
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
        try (JsonParser parser = JsonRecords.JSON.createParser(in)) {
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
            throw records.invalidJson(e);
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
        records.lines(in, (lineNo, line) -> {
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

    // ---- shared ----

    /**
     * Hands a document to the sink. With a pool ({@link #read(Path, DatasetFormat, TextTokenizer, InstructionPrompt,
     * ReadOptions, Consumer, ExecutorService)}), {@code tokens} runs there and documents still reach the sink in
     * order, on this thread.
     */
    private void emit(Supplier<Sequence> tokens, int group, String id, List<String> answers) {
        documents++;
        ahead.submit(() -> new Document(tokens.get(), group, id, answers));
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
            throw new UserError(where + ": \"" + key + "\" must be a string, found " + JsonRecords.oneLine(v.toString()));
        }
        return v.textValue();
    }
}
