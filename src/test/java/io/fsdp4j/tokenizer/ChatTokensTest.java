package io.fsdp4j.tokenizer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import io.fsdp4j.UserError;
import io.fsdp4j.data.DatasetFormat;
import io.fsdp4j.data.DatasetReader;
import io.fsdp4j.data.InstructionPrompt;
import io.fsdp4j.data.ReadOptions;
import io.fsdp4j.data.ChatTokens;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.data.TextTokenizer;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Conversations as training sees them equal what Hugging Face transformers computes: the ids of
 * {@code apply_chat_template(tokenize=True)} and, as labels, its {@code assistant_masks}
 * (src/test/resources/chat/expected.jsonl, written by tools/chat-fixtures/make_chat_fixtures.py), read as
 * {@code data.train} reads them and through {@code fsdp4j tokenize --format messages} as a user runs it. Qwen3's and Llama 3's own templates, Mistral's
 * (mistral.jinja, the tokenizer of tokenizer/llama2), and a ChatML template with {% generation %} blocks.
 */
class ChatTokensTest {
    static Path chat(String name) {
        return TestTokenizers.resource("../chat/" + name);
    }

    static Stream<Arguments> cases() throws IOException {
        List<Arguments> cases = new ArrayList<>();
        for (String line : Files.readAllLines(chat("expected.jsonl"), StandardCharsets.UTF_8)) {
            JsonNode row = TestTokenizers.JSON.readTree(line);
            cases.add(Arguments.of(row.get("tokenizer").asText(), row.get("template").asText(),
                    row.get("line").asInt(), row));
        }
        return cases.stream();
    }

    @ParameterizedTest(name = "{0} {1} conversation {2}")
    @MethodSource("cases")
    void idsAndLabelsEqualTransformers(String tokenizer, String template, int line, JsonNode expected) {
        var tok = new TextTokenizer.HuggingFace(TestTokenizers.tokenizer(tokenizer), tokenizer);
        Path chatTemplate = template.equals("tokenizer") ? null : chat(template);
        List<Sequence> got = new ArrayList<>();
        Runnable read = () -> DatasetReader.read(oneLine(line), DatasetFormat.MESSAGES, tok, InstructionPrompt.ALPACA,
                new ReadOptions(DatasetFormat.MESSAGES, chatTemplate, false), d -> got.add(d.tokens()));
        if (expected.has("error")) {
            assertThatThrownBy(read::run).isInstanceOf(UserError.class).hasMessage(oneLine(line) + " line 1: the chat"
                    + " template refused the conversation: " + expected.get("error").asText() + " (chat template "
                    + chatTemplate + ")");
            return;
        }
        read.run();
        assertThat(got).hasSize(1);
        int[] ids = TestTokenizers.ids(expected.get("input_ids"));
        assertThat(got.getFirst().ids()).containsExactly(ids);
        assertThat(got.getFirst().labels()).containsExactly(labels(ids, expected.get("assistant_masks")));
    }

    /** transformers' assistant mask as labels: the id where the mask is 1, else -100. */
    static int[] labels(int[] ids, JsonNode mask) {
        int[] labels = ids.clone();
        for (int t = 0; t < ids.length; t++) {
            labels[t] = mask.get(t).asInt() == 1 ? ids[t] : -100;
        }
        return labels;
    }

    /** The whole file through {@code fsdp4j tokenize --format messages}, as a user runs it. */
    @Test
    void theTokenizeCommandPrintsWhatTrainingSees() throws IOException {
        List<JsonNode> expected = new ArrayList<>();
        for (String line : Files.readAllLines(chat("expected.jsonl"), StandardCharsets.UTF_8)) {
            JsonNode row = TestTokenizers.JSON.readTree(line);
            if (row.get("tokenizer").asText().equals("qwen3") && row.get("template").asText().equals("tokenizer")) {
                expected.add(row);
            }
        }
        var run = TokenizeCommandTest.run("tokenize", "--tokenizer", TestTokenizers.modelDir("qwen3").toString(),
                "--format", "messages", "--input", chat("conversations.jsonl").toString());
        assertThat(run.err()).isEmpty();
        List<String> lines = run.out().lines().toList();
        assertThat(lines).hasSize(expected.size());
        for (int i = 0; i < lines.size(); i++) {
            int[] ids = TestTokenizers.ids(expected.get(i).get("input_ids"));
            JsonNode got = TestTokenizers.JSON.readTree(lines.get(i));
            assertThat(TestTokenizers.ids(got.get("input_ids"))).containsExactly(ids);
            assertThat(TestTokenizers.ids(got.get("labels")))
                    .containsExactly(labels(ids, expected.get(i).get("assistant_masks")));
        }
        var all = TokenizeCommandTest.run("tokenize", "--tokenizer", TestTokenizers.modelDir("qwen3").toString(),
                "--format", "auto", "--train-on", "all", "--input", chat("conversations.jsonl").toString());
        JsonNode first = TestTokenizers.JSON.readTree(all.out().lines().findFirst().orElseThrow());
        assertThat(first.get("labels")).isEqualTo(first.get("input_ids"));
    }

    private static final java.util.Map<Integer, Path> LINES = new java.util.concurrent.ConcurrentHashMap<>();

    /** Conversation {@code line} of conversations.jsonl alone in a file. */
    private static Path oneLine(int line) {
        return LINES.computeIfAbsent(line, l -> {
            try {
                List<String> all = Files.readAllLines(chat("conversations.jsonl"), StandardCharsets.UTF_8);
                Path file = Files.createTempFile("conversation-" + l + "-", ".jsonl");
                file.toFile().deleteOnExit();
                return Files.writeString(file, all.get(l - 1) + "\n");
            } catch (IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        });
    }
}
