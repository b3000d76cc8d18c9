package io.fsdp4j.eval;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * A character-level tokenizer written by hand, small enough for a tiny model: a BPE with no merges over
 * {@code <unk>} 0, {@code <s>} 1, {@code </s>} 2 (EOS), "\n" 3, " " 4 and the printable ASCII characters
 * '!'..'~' at 5..98, decoded by concatenation. Every character of a text is one token.
 */
final class CharTokenizer {
    static final int VOCAB = 99;
    static final int EOS = 2;
    static final int NEWLINE = 3;

    private CharTokenizer() {}

    /** The id of an ASCII character of the vocabulary. */
    static int id(char c) {
        return switch (c) {
            case '\n' -> NEWLINE;
            case ' ' -> 4;
            default -> {
                if (c < '!' || c > '~') {
                    throw new IllegalArgumentException("not in the vocabulary: " + (int) c);
                }
                yield 5 + c - '!';
            }
        };
    }

    static int[] ids(String text) {
        return text.chars().map(c -> id((char) c)).toArray();
    }

    /** A model directory holding tokenizer.json and tokenizer_config.json (EOS {@code </s>}). */
    static Path write(Path dir) {
        return write(dir, false);
    }

    /** With {@code appendEos}, encoding with special tokens appends {@code </s>} (as add_eos_token tokenizers do). */
    static Path write(Path dir, boolean appendEos) {
        var json = new ObjectMapper();
        ObjectNode root = json.createObjectNode();
        root.put("version", "1.0");
        root.putNull("truncation");
        root.putNull("padding");
        var added = root.putArray("added_tokens");
        String[] special = {"<unk>", "<s>", "</s>"};
        for (int i = 0; i < special.length; i++) {
            added.addObject().put("id", i).put("content", special[i]).put("single_word", false).put("lstrip", false)
                    .put("rstrip", false).put("normalized", false).put("special", true);
        }
        root.putNull("normalizer");
        root.putNull("pre_tokenizer");
        if (appendEos) {
            ObjectNode post = root.putObject("post_processor").put("type", "TemplateProcessing");
            var single = post.putArray("single");
            single.addObject().putObject("Sequence").put("id", "A").put("type_id", 0);
            single.addObject().putObject("SpecialToken").put("id", "</s>").put("type_id", 0);
            var pair = post.putArray("pair");
            pair.addObject().putObject("Sequence").put("id", "A").put("type_id", 0);
            pair.addObject().putObject("Sequence").put("id", "B").put("type_id", 1);
            ObjectNode eos = post.putObject("special_tokens").putObject("</s>").put("id", "</s>");
            eos.putArray("ids").add(EOS);
            eos.putArray("tokens").add("</s>");
        } else {
            root.putNull("post_processor");
        }
        root.putObject("decoder").put("type", "Fuse");
        ObjectNode model = root.putObject("model");
        model.put("type", "BPE").putNull("dropout");
        model.put("unk_token", "<unk>").putNull("continuing_subword_prefix");
        model.putNull("end_of_word_suffix");
        model.put("fuse_unk", false).put("byte_fallback", false).put("ignore_merges", false);
        ObjectNode vocab = model.putObject("vocab");
        for (int i = 0; i < special.length; i++) {
            vocab.put(special[i], i);
        }
        vocab.put("\n", NEWLINE);
        vocab.put(" ", 4);
        for (char c = '!'; c <= '~'; c++) {
            vocab.put(String.valueOf(c), id(c));
        }
        model.putArray("merges");
        try {
            Files.createDirectories(dir);
            json.writerWithDefaultPrettyPrinter().writeValue(dir.resolve("tokenizer.json").toFile(), root);
            Files.writeString(dir.resolve("tokenizer_config.json"),
                    "{\"bos_token\": null, \"eos_token\": \"</s>\", \"unk_token\": \"<unk>\"}");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return dir;
    }
}
