package io.fsdp4j.tokenizer;

import com.fasterxml.jackson.core.JacksonException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.UserError;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;

/**
 * The parts of a Hugging Face {@code tokenizer_config.json} that fsdp4j uses. Special tokens there are strings or
 * {@code {"content": "..."}} objects (AddedToken); a missing file is an empty config.
 *
 * @param chatTemplate the Jinja chat template: the {@code chat_template} string, the template named "default"
 *                     where it is a list of named templates, else a {@code chat_template.jinja} file beside it
 * @param cleanUpTokenizationSpaces decode removes the space before punctuation and contractions (" ." to "."),
 *                                  as transformers does when this key is true
 */
record TokenizerConfig(
        Optional<String> bosToken,
        Optional<String> eosToken,
        Optional<String> padToken,
        Optional<String> unkToken,
        Optional<String> chatTemplate,
        boolean cleanUpTokenizationSpaces) {

    static final String FILE_NAME = "tokenizer_config.json";
    private static final ObjectMapper JSON = new ObjectMapper();

    static TokenizerConfig empty() {
        return new TokenizerConfig(Optional.empty(), Optional.empty(), Optional.empty(), Optional.empty(),
                Optional.empty(), false);
    }

    /** Reads {@code dir/tokenizer_config.json} (and {@code dir/chat_template.jinja}); empty where neither exists. */
    static TokenizerConfig readDirectory(Path dir) {
        Path file = dir.resolve(FILE_NAME);
        TokenizerConfig config = Files.isRegularFile(file) ? read(file) : empty();
        Path jinja = dir.resolve("chat_template.jinja");
        if (config.chatTemplate().isEmpty() && Files.isRegularFile(jinja)) {
            try {
                config = config.withChatTemplate(Files.readString(jinja));
            } catch (IOException e) {
                throw new UserError("cannot read chat template " + jinja + ": " + e.getMessage());
            }
        }
        return config;
    }

    static TokenizerConfig read(Path file) {
        JsonNode root;
        try {
            root = JSON.readTree(file.toFile());
        } catch (JacksonException e) {
            throw new UserError("tokenizer config " + file + " is not valid JSON: " + e.getOriginalMessage());
        } catch (IOException e) {
            throw new UserError("cannot read tokenizer config " + file + ": " + e.getMessage());
        }
        if (root == null || !root.isObject()) {
            throw new UserError("tokenizer config " + file + " is not a JSON object");
        }
        return new TokenizerConfig(
                token(root, "bos_token"),
                token(root, "eos_token"),
                token(root, "pad_token"),
                token(root, "unk_token"),
                chatTemplate(root.get("chat_template")),
                root.path("clean_up_tokenization_spaces").asBoolean(false));
    }

    private TokenizerConfig withChatTemplate(String template) {
        return new TokenizerConfig(bosToken, eosToken, padToken, unkToken, Optional.of(template),
                cleanUpTokenizationSpaces);
    }

    /** "token", {"content": "token", ...} or null. */
    private static Optional<String> token(JsonNode root, String key) {
        JsonNode node = root.get(key);
        if (node != null && node.isObject()) {
            node = node.get("content");
        }
        return node != null && node.isTextual() ? Optional.of(node.asText()) : Optional.empty();
    }

    /** A string, or [{"name": "default", "template": "..."}, ...]. */
    private static Optional<String> chatTemplate(JsonNode node) {
        if (node == null || node.isNull()) {
            return Optional.empty();
        }
        if (node.isTextual()) {
            return Optional.of(node.asText());
        }
        if (node.isArray()) {
            for (JsonNode named : node) {
                if ("default".equals(named.path("name").asText()) && named.path("template").isTextual()) {
                    return Optional.of(named.get("template").asText());
                }
            }
        }
        return Optional.empty();
    }
}
