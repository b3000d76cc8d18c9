package io.fsdp4j.data;

import com.fasterxml.jackson.core.util.DefaultIndenter;
import com.fasterxml.jackson.core.util.DefaultPrettyPrinter;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.UserError;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * {@code meta.json} of a token-files directory: what the files hold and where they came from.
 *
 * @param format        the source's {@link DatasetFormat} key
 * @param prompt        the {@link InstructionPrompt} key of Alpaca data, {@code "squad"} for SQuAD, else null
 * @param tokenizer     {@code "bytes"} or the tokenizer's absolute path
 * @param vocabSize     the tokenizer's vocabulary: every id is below it
 * @param eosId         the end-of-sequence id, -1 where the tokenizer has none (pre-tokenized data)
 * @param source        the input file's absolute path
 * @param sourceSha256  hex SHA-256 of the input file
 * @param documents     documents in the files
 * @param tokens        tokens in the files
 * @param lossTokens    labels that are not -100
 * @param dropped       examples left out: no label other than -100 within their first {@code seqLen} tokens
 * @param seqLen        {@code --seq-len}, 0 when not given
 * @param evalFraction  {@code --eval-fraction}
 * @param seed          {@code --seed}, which drew the held-out documents
 * @param evalDocuments the held-out documents' indices, ascending
 * @param answers       the file of answers for generation-based evaluation, or null
 */
public record TokenFilesMeta(String format, String prompt, String tokenizer, int vocabSize, int eosId, String source,
                             String sourceSha256, int documents, long tokens, long lossTokens, int dropped, int seqLen,
                             double evalFraction, long seed, int[] evalDocuments, String answers) {
    public static final String FILE = "meta.json";
    public static final String KIND = "fsdp4j-token-files";
    public static final int VERSION = 1;
    private static final ObjectMapper JSON = new ObjectMapper();

    public Map<String, Object> toMap() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("kind", KIND);
        m.put("version", VERSION);
        m.put("format", format);
        m.put("prompt", prompt);
        m.put("tokenizer", tokenizer);
        m.put("vocab_size", vocabSize);
        m.put("eos_id", eosId < 0 ? null : eosId);
        m.put("source", source);
        m.put("source_sha256", sourceSha256);
        m.put("documents", documents);
        m.put("tokens", tokens);
        m.put("loss_tokens", lossTokens);
        m.put("dropped", dropped);
        m.put("seq_len", seqLen == 0 ? null : seqLen);
        m.put("eval_fraction", evalFraction);
        m.put("seed", seed);
        Map<String, Object> files = new LinkedHashMap<>();
        files.put("tokens", TokenFiles.TOKENS);
        files.put("labels", TokenFiles.LABELS);
        files.put("documents", TokenFiles.DOCUMENTS);
        m.put("files", files);
        m.put("answers", answers);
        m.put("eval_documents", evalDocuments);
        return m;
    }

    /** Writes {@code dir/meta.json}: an indented object, lists on one line. */
    void write(Path dir) throws IOException {
        var printer = new DefaultPrettyPrinter().withObjectIndenter(new DefaultIndenter("  ", "\n"));
        Files.writeString(dir.resolve(FILE), JSON.writer(printer).writeValueAsString(toMap()) + "\n");
    }

    /** Reads and checks {@code dir/meta.json}; anything missing, mistyped or inconsistent is a {@link UserError}. */
    static TokenFilesMeta read(Path dir) {
        Path file = dir.resolve(FILE);
        if (!Files.isRegularFile(file)) {
            throw new UserError(dir + " has no " + FILE + " (a directory of token files is written by fsdp4j prepare)");
        }
        JsonNode node;
        try {
            node = JSON.readTree(file.toFile());
        } catch (IOException e) {
            throw new UserError(file + " is not valid JSON: " + e.getMessage().lines().findFirst().orElse(""));
        }
        var r = new Reader(file, node);
        if (node == null || !node.isObject() || !KIND.equals(r.optionalText("kind"))) {
            throw new UserError(file + " is not the meta.json of fsdp4j token files (its \"kind\" is not \"" + KIND
                    + "\")");
        }
        long version = r.integer("version", 1, Long.MAX_VALUE);
        if (version != VERSION) {
            throw new UserError(file + ": token files of version " + version + " (this fsdp4j reads version " + VERSION
                    + "); prepare them again");
        }
        int vocab = (int) r.integer("vocab_size", 1, Integer.MAX_VALUE);
        int documents = (int) r.integer("documents", 1, Integer.MAX_VALUE);
        long tokens = r.integer("tokens", documents, Long.MAX_VALUE / 8);
        JsonNode eos = node.get("eos_id");
        int eosId = eos == null || eos.isNull() ? -1 : (int) r.integer("eos_id", 0, vocab - 1);
        JsonNode list = node.get("eval_documents");
        if (list == null || !list.isArray()) {
            throw new UserError(file + ": \"eval_documents\" must be a list of document indices");
        }
        int[] eval = new int[list.size()];
        for (int i = 0; i < eval.length; i++) {
            JsonNode v = list.get(i);
            if (!v.canConvertToInt() || !v.isIntegralNumber() || v.intValue() < 0 || v.intValue() >= documents
                    || i > 0 && v.intValue() <= eval[i - 1]) {
                throw new UserError(file + ": \"eval_documents\" must hold ascending indices below " + documents
                        + ", found " + v + " at " + i);
            }
            eval[i] = v.intValue();
        }
        JsonNode seqLen = node.get("seq_len");
        return new TokenFilesMeta(r.text("format"), r.optionalText("prompt"), r.text("tokenizer"), vocab, eosId,
                r.text("source"), r.text("source_sha256"), documents, tokens, r.integer("loss_tokens", 0, tokens),
                (int) r.integer("dropped", 0, Integer.MAX_VALUE),
                seqLen == null || seqLen.isNull() ? 0 : (int) r.integer("seq_len", 1, Integer.MAX_VALUE),
                r.number("eval_fraction", 0, 1), r.integer("seed", Long.MIN_VALUE, Long.MAX_VALUE), eval,
                r.optionalText("answers"));
    }

    /** Typed fields of the JSON object, each missing or mistyped one a {@link UserError} naming file and key. */
    private record Reader(Path file, JsonNode node) {
        String text(String key) {
            String s = optionalText(key);
            if (s == null) {
                throw new UserError(file + ": missing \"" + key + "\"");
            }
            return s;
        }

        String optionalText(String key) {
            JsonNode v = node == null ? null : node.get(key);
            if (v == null || v.isNull()) {
                return null;
            }
            if (!v.isTextual()) {
                throw new UserError(file + ": \"" + key + "\" must be a string");
            }
            return v.textValue();
        }

        long integer(String key, long min, long max) {
            JsonNode v = node.get(key);
            if (v == null || !v.isIntegralNumber() || !v.canConvertToLong() || v.longValue() < min
                    || v.longValue() > max) {
                throw new UserError(file + ": \"" + key + "\" must be an integer in [" + min + ", " + max + "], found "
                        + v);
            }
            return v.longValue();
        }

        double number(String key, double min, double max) {
            JsonNode v = node.get(key);
            if (v == null || !v.isNumber() || !(v.doubleValue() >= min && v.doubleValue() <= max)) {
                throw new UserError(file + ": \"" + key + "\" must be a number in [" + min + ", " + max + "], found "
                        + v);
            }
            return v.doubleValue();
        }
    }
}
