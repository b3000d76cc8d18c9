package io.fsdp4j.data;

import static io.fsdp4j.data.DataFiles.write;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.UserError;
import io.fsdp4j.model.TokenBatch;
import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The fine-tuning formats as {@code data.train} and {@code prepare} read them: ShareGPT as its messages twin,
 * prompt/completion, {@code {"text"}} lines, compressed files as their plain twins, directories of shards, and bad
 * input as one line naming the file and line. Token ids and masks against transformers: ChatTokensTest.
 */
class ConversationDataTest {
    @TempDir
    static Path tmp;
    static Path model;
    static TextTokenizer qwen;

    @BeforeAll
    static void load() {
        model = DataFiles.qwen3(tmp);
        qwen = TextTokenizer.load(model.toString());
    }

    @AfterAll
    static void close() {
        qwen.close();
    }

    static Path chat(String name) {
        try {
            return Path.of(ConversationDataTest.class.getResource("/chat/" + name).toURI());
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    static List<Sequence> read(Path path, DatasetFormat format) {
        return read(path, format, ReadOptions.DEFAULT);
    }

    static List<Sequence> read(Path path, DatasetFormat format, ReadOptions options) {
        List<Sequence> out = new ArrayList<>();
        DatasetReader.read(path, format, qwen, InstructionPrompt.ALPACA, options, d -> out.add(d.tokens()));
        return out;
    }

    static void assertSame(List<Sequence> a, List<Sequence> b) {
        assertThat(a).hasSameSizeAs(b);
        for (int i = 0; i < a.size(); i++) {
            assertThat(a.get(i).ids()).as("ids of %d", i).containsExactly(b.get(i).ids());
            assertThat(a.get(i).labels()).as("labels of %d", i).containsExactly(b.get(i).labels());
        }
    }

    @Test
    void shareGptIsItsMessagesTwin() {
        assertThat(DatasetFormat.detect(chat("sharegpt.jsonl"))).isEqualTo(DatasetFormat.SHAREGPT);
        List<Sequence> messages = read(chat("conversations.jsonl"), DatasetFormat.MESSAGES);
        assertSame(read(chat("sharegpt.jsonl"), DatasetFormat.SHAREGPT), messages.subList(0, 4));
    }

    @Test
    void compressedFilesAndDirectoriesReadAsTheirPlainTwins() throws IOException {
        List<Sequence> plain = read(chat("conversations.jsonl"), DatasetFormat.MESSAGES);
        assertThat(plain).hasSize(5);
        assertThat(DatasetFormat.detect(chat("conversations.jsonl.gz"))).isEqualTo(DatasetFormat.MESSAGES);
        assertThat(DatasetFormat.detect(chat("conversations.jsonl.zst"))).isEqualTo(DatasetFormat.MESSAGES);
        assertSame(read(chat("conversations.jsonl.gz"), DatasetFormat.MESSAGES), plain);
        assertSame(read(chat("conversations.jsonl.zst"), DatasetFormat.MESSAGES), plain);
        // Shards in name order, whatever their compression.
        Path dir = Files.createDirectories(tmp.resolve("shards"));
        Files.copy(chat("conversations.jsonl.zst"), dir.resolve("train-00001-of-00002.jsonl.zst"));
        Files.copy(chat("conversations.jsonl.gz"), dir.resolve("train-00000-of-00002.jsonl.gz"));
        write(dir, "README.md", "not data");
        assertThat(DatasetFormat.detect(dir)).isEqualTo(DatasetFormat.MESSAGES);
        List<Sequence> twice = new ArrayList<>(plain);
        twice.addAll(plain);
        assertSame(read(dir, DatasetFormat.MESSAGES), twice);
        // As data.train: the directory, format told from the content.
        Dataset d = Datasets.load(dir, model, qwen.vocabSize(), 256, false, Split.TRAIN);
        assertThat(d.documents()).isEqualTo(10);
        assertThat(d.sequences().getFirst().ids()).startsWith(plain.getFirst().ids());
    }

    @Test
    void parquetConversationsReadAsTheirJsonlTwins() throws URISyntaxException {
        Path parquet = Path.of(ConversationDataTest.class.getResource("/parquet/conversations-snappy.parquet").toURI());
        assertThat(DatasetFormat.detect(parquet)).isEqualTo(DatasetFormat.MESSAGES);
        List<Sequence> rows = read(parquet, DatasetFormat.MESSAGES);
        List<Sequence> plain = read(chat("conversations.jsonl"), DatasetFormat.MESSAGES);
        assertThat(rows).hasSize(5);
        assertSame(rows.subList(0, 4), plain.subList(0, 4)); // the fifth has no tool calls in Parquet
        assertThat(error(parquet, DatasetFormat.SHAREGPT, ReadOptions.DEFAULT))
                .startsWith(parquet + " row 1: missing \"conversations\"");
    }

    @Test
    void trainOnAllLabelsEveryToken() {
        List<Sequence> all = read(chat("conversations.jsonl"), DatasetFormat.MESSAGES,
                new ReadOptions(null, null, true));
        List<Sequence> assistant = read(chat("conversations.jsonl"), DatasetFormat.MESSAGES);
        for (int i = 0; i < all.size(); i++) {
            assertThat(all.get(i).ids()).containsExactly(assistant.get(i).ids());
            assertThat(all.get(i).labels()).containsExactly(all.get(i).ids());
            assertThat(assistant.get(i).labels()).contains(TokenBatch.IGNORE);
        }
    }

    @Test
    void promptCompletionTrainsOnTheCompletionAndEos() {
        Path file = write(tmp, "pc.jsonl", "{\"prompt\": \"The capital of France is\", \"completion\": \" Paris.\"}\n");
        assertThat(DatasetFormat.detect(file)).isEqualTo(DatasetFormat.PROMPT_COMPLETION);
        Sequence s = read(file, DatasetFormat.PROMPT_COMPLETION).getFirst();
        int[] prompt = qwen.encode("The capital of France is", true);
        int[] whole = qwen.encode("The capital of France is Paris.", true);
        int eos = qwen.eosId().orElseThrow();
        int[] ids = Arrays.copyOf(whole, whole.length + 1);
        ids[whole.length] = eos;
        assertThat(s.ids()).containsExactly(ids);
        int[] labels = ids.clone();
        Arrays.fill(labels, 0, prompt.length, TokenBatch.IGNORE);
        assertThat(s.labels()).containsExactly(labels);
    }

    @Test
    void textLinesAreDocumentsTrainedWhole() {
        Path file = write(tmp, "t.jsonl", "{\"text\": \"First document.\"}\n\n{\"text\": \"Second\\nline.\"}\n");
        assertThat(DatasetFormat.detect(file)).isEqualTo(DatasetFormat.TEXT);
        List<Sequence> docs = read(file, DatasetFormat.TEXT);
        assertThat(docs).hasSize(2);
        assertSame(docs, List.of(qwen.document("First document."), qwen.document("Second\nline.")));
    }

    @Test
    void prepareWritesConversationsAsTokenFiles() {
        Path out = tmp.resolve("prepared");
        Prepare.run(new Prepare.Options(chat("conversations.jsonl.zst"), DatasetFormat.MESSAGES, model.toString(), out,
                0, 0.0, 1, InstructionPrompt.ALPACA, false, ReadOptions.DEFAULT));
        TokenFiles files = TokenFiles.open(out);
        List<Sequence> plain = read(chat("conversations.jsonl"), DatasetFormat.MESSAGES);
        assertSame(java.util.stream.IntStream.range(0, files.count()).mapToObj(files::document).toList(), plain);
    }

    @Test
    void prepareTokenizesInParallelInFileOrder() {
        StringBuilder lines = new StringBuilder();
        for (int i = 0; i < 1500; i++) {
            lines.append("{\"text\": \"Document ").append(i).append(": ").append("word ".repeat(i % 17)).append("\"}\n");
        }
        Path input = write(tmp, "many.jsonl", lines.toString());
        Path out = tmp.resolve("many");
        Prepare.run(new Prepare.Options(input, DatasetFormat.TEXT, model.toString(), out, 0, 0.0, 1,
                InstructionPrompt.ALPACA, false));
        TokenFiles files = TokenFiles.open(out);
        assertSame(java.util.stream.IntStream.range(0, files.count()).mapToObj(files::document).toList(),
                read(input, DatasetFormat.TEXT));
    }

    static String error(Path file, DatasetFormat format, ReadOptions options) {
        try {
            read(file, format, options);
        } catch (UserError e) {
            assertThat(e.getMessage()).doesNotContain("\n");
            return e.getMessage();
        }
        throw new AssertionError("no error for " + file);
    }

    @Test
    void badConversationsAreOneLineNamingFileAndLine() {
        String ok = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\"}]}\n";
        Path malformed = write(tmp, "m.jsonl", ok + "{\"messages\": [\n");
        assertThat(error(malformed, DatasetFormat.MESSAGES, ReadOptions.DEFAULT))
                .startsWith(malformed + " line 2: not valid JSON");
        Path role = write(tmp, "r.jsonl", ok + ok.replace("\"user\"", "\"customer\""));
        assertThat(error(role, DatasetFormat.MESSAGES, ReadOptions.DEFAULT)).isEqualTo(role + " line 2: message 1 has"
                + " the unknown role 'customer'; give system, user, assistant or tool");
        Path speaker = write(tmp, "s.jsonl", "{\"conversations\": [{\"from\": \"robot\", \"value\": \"x\"}]}\n");
        assertThat(error(speaker, DatasetFormat.SHAREGPT, ReadOptions.DEFAULT)).startsWith(speaker + " line 1: message"
                + " 1 is from the unknown speaker 'robot'");
        Path empty = write(tmp, "e.jsonl", ok + "\n{\"messages\": []}\n");
        assertThat(error(empty, DatasetFormat.MESSAGES, ReadOptions.DEFAULT)).isEqualTo(empty + " line 3: the"
                + " conversation is empty; give at least one message, or remove the line");
        Path noAssistant = write(tmp, "n.jsonl", "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n");
        assertThat(error(noAssistant, DatasetFormat.MESSAGES, ReadOptions.DEFAULT)).startsWith(noAssistant
                + " line 1: the conversation has no assistant message to train on");
        assertThat(read(noAssistant, DatasetFormat.MESSAGES, new ReadOptions(null, null, true))).hasSize(1);
        Path missing = tmp.resolve("none.jinja");
        assertThat(error(write(tmp, "ok.jsonl", ok), DatasetFormat.MESSAGES, new ReadOptions(null, missing, false)))
                .isEqualTo("chat template " + missing + " does not exist; give a Jinja file (such as a model's"
                        + " chat_template.jinja)");
        Path refuses = write(tmp, "refuses.jinja", "{{ raise_exception('no ' + messages[0].role) }}");
        assertThat(error(write(tmp, "ok2.jsonl", ok), DatasetFormat.MESSAGES, new ReadOptions(null, refuses, false)))
                .isEqualTo(tmp.resolve("ok2.jsonl") + " line 1: the chat template refused the conversation: no user"
                        + " (chat template " + refuses + ")");
        Path drops = write(tmp, "drops.jinja", "{% for m in messages %}{{ m.role }}<|im_end|>{% endfor %}");
        assertThat(error(write(tmp, "ok3.jsonl", ok), DatasetFormat.MESSAGES, new ReadOptions(null, drops, false)))
                .startsWith(tmp.resolve("ok3.jsonl") + " line 1: the chat template does not write the content of"
                        + " message 2");
    }

    @Test
    void aTokenizerWithoutChatTemplateIsToldWhatToDo() throws IOException {
        Path bare = Files.createDirectories(tmp.resolve("bare"));
        Files.copy(model.resolve("tokenizer.json"), bare.resolve("tokenizer.json"));
        Path file = write(tmp, "c.jsonl", "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n");
        try (TextTokenizer tok = TextTokenizer.load(bare.toString())) {
            assertThatThrownBy(() -> DatasetReader.read(file, DatasetFormat.MESSAGES, tok, InstructionPrompt.ALPACA,
                    ReadOptions.DEFAULT, d -> {})).isInstanceOf(UserError.class)
                    .hasMessage(file + " line 1: the tokenizer has no chat template (no chat_template in"
                            + " tokenizer_config.json, no chat_template.jinja); give one with data.chat_template or"
                            + " --chat-template FILE");
        }
    }

    /** Loops a million times a million (with work in the inner loop), as an endless loop does in practice. */
    private static final String ENDLESS = "{% for i in range(1048576) %}{% for j in range(1048576) %}{{ j }}"
            + "{% endfor %}{% endfor %}";

    @Test
    void aTemplateThatDoesNotFinishIsStoppedNamingTheTemplateAndTheKey() throws IOException {
        String ok = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\","
                + " \"content\": \"yo\"}]}\n";
        Path data = write(tmp, "loop.jsonl", ok);
        Path loop = write(tmp, "loop.jinja", ENDLESS);
        long start = System.nanoTime();
        assertThat(error(data, DatasetFormat.MESSAGES, new ReadOptions(null, loop, false, false, 0.3)))
                .isEqualTo(data + " line 1: the chat template took more than 0.3 s to render one conversation and was"
                        + " stopped (an endless loop?); if it is only slow, raise data.chat_template_timeout"
                        + " (--chat-template-timeout) (chat template " + loop + ")");
        assertThat((System.nanoTime() - start) / 1e9).isLessThan(10.0);
        // the model's own template (tokenizer_config.json's chat_template): named by the tokenizer it came with
        Path copy = Files.createDirectories(tmp.resolve("qwen3-looping"));
        Files.copy(model.resolve("tokenizer.json"), copy.resolve("tokenizer.json"));
        var json = new com.fasterxml.jackson.databind.ObjectMapper();
        var config = (com.fasterxml.jackson.databind.node.ObjectNode) json.readTree(
                model.resolve("tokenizer_config.json").toFile());
        config.put("chat_template", ENDLESS);
        json.writeValue(copy.resolve("tokenizer_config.json").toFile(), config);
        try (TextTokenizer looping = TextTokenizer.load(copy.toString())) {
            List<Sequence> out = new ArrayList<>();
            assertThatThrownBy(() -> DatasetReader.read(data, DatasetFormat.MESSAGES, looping, InstructionPrompt.ALPACA,
                    new ReadOptions(null, null, false, false, 0.3), d -> out.add(d.tokens())))
                    .isInstanceOf(UserError.class).hasMessageStartingWith(data + " line 1: the chat template took more"
                            + " than 0.3 s").hasMessageEndingWith("(the chat template of " + looping.name() + ")");
        }
    }
}
