package io.fsdp4j.tokenizer;

import ai.djl.engine.EngineException;
import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import io.fsdp4j.UserError;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Set;
import java.util.stream.Stream;

/**
 * A Hugging Face tokenizer: a {@code tokenizer.json} run by the reference implementation (the Rust
 * {@code tokenizers} library, through DJL's JNI binding), with the special tokens and chat template of the
 * {@code tokenizer_config.json} beside it. Holds native memory: close it.
 *
 * <p>Ids are those of {@code tokenizer.encode(text, add_special_tokens=...)} in transformers; nothing is truncated
 * or padded.
 */
public final class Tokenizer implements AutoCloseable {
    static {
        // Before DJL's first use. Offline: DJL takes the native library from its jar, never a CUDA build from the
        // network. No tracking: DJL would otherwise query the cloud instance-metadata address on first use.
        if (System.getProperty("ai.djl.offline") == null) {
            System.setProperty("ai.djl.offline", "true");
        }
        if (System.getProperty("OPT_OUT_TRACKING") == null) {
            System.setProperty("OPT_OUT_TRACKING", "true");
        }
    }

    private final HuggingFaceTokenizer tokenizer;
    private final TokenizerConfig config;
    private final int vocabSize;
    private final Map<String, Integer> specialIds;
    private final Set<String> specialTokens;
    private ChatTemplate template; // compiled on first use

    private Tokenizer(HuggingFaceTokenizer tokenizer, TokenizerConfig config, TokenizerFile file) {
        this.tokenizer = tokenizer;
        this.config = config;
        this.vocabSize = file.vocabSize();
        this.specialIds = file.ids();
        this.specialTokens = file.special();
    }

    /**
     * Loads a {@code tokenizer.json}, or a model directory holding one. The {@code tokenizer_config.json} (and
     * {@code chat_template.jinja}) in the same directory, where present, give the special tokens and chat
     * template. Bad input (a missing file, invalid JSON, a JSON file that is not a tokenizer) is a
     * {@link UserError}.
     */
    public static Tokenizer load(Path path) {
        Path file = Files.isDirectory(path) ? path.resolve("tokenizer.json") : path;
        if (!Files.exists(path)) {
            throw new UserError("tokenizer " + path + " does not exist (give a tokenizer.json or a model directory)");
        }
        if (!Files.isRegularFile(file)) {
            throw new UserError("model directory " + path + " has no tokenizer.json");
        }
        Path dir = file.toAbsolutePath().getParent();
        TokenizerConfig config = dir == null ? TokenizerConfig.empty() : TokenizerConfig.readDirectory(dir);
        Set<String> named = new HashSet<>();
        Stream.of(config.bosToken(), config.eosToken(), config.padToken(), config.unkToken())
                .flatMap(Optional::stream)
                .forEach(named::add);
        TokenizerFile contents = TokenizerFile.read(file, named);
        HuggingFaceTokenizer tokenizer;
        try {
            // Explicit options: DJL's defaults truncate to 512 tokens and pad.
            tokenizer = HuggingFaceTokenizer.newInstance(file, Map.of(
                    "addSpecialTokens", "false", "truncation", "false", "padding", "false"));
        } catch (IOException e) {
            throw new UserError("cannot read tokenizer file " + file + ": " + e.getMessage());
        } catch (EngineException e) {
            // The native library did not load: a platform other than linux-x86_64, or an unwritable cache.
            String why = e.getMessage().replaceAll("\\.$", "")
                    + (e.getCause() == null ? "" : ": " + e.getCause().getMessage());
            throw new UserError("the Hugging Face tokenizers library cannot run here: " + why + " (fsdp4j's jar"
                    + " carries it for linux-x86_64 and unpacks it under $DJL_CACHE_DIR, by default ~/.djl.ai)", e);
        } catch (RuntimeException e) {
            // The Rust library's parse error: valid JSON, but not a tokenizer it knows.
            throw new UserError(file + " is not a tokenizer the Hugging Face tokenizers library can load: "
                    + e.getMessage(), e);
        }
        return new Tokenizer(tokenizer, config, contents);
    }

    /** The token ids of {@code text}; with {@code addSpecialTokens}, the BOS/EOS that the tokenizer's post-processor adds. */
    public int[] encode(String text, boolean addSpecialTokens) {
        long[] ids = tokenizer.encode(text, addSpecialTokens, false).getIds();
        int[] result = new int[ids.length];
        for (int i = 0; i < ids.length; i++) {
            result[i] = Math.toIntExact(ids[i]);
        }
        return result;
    }

    /**
     * The ids of {@code text} without special tokens added, and the characters of {@code text} each token came from:
     * token t covers {@code text.substring(starts[t], ends[t])} (UTF-16 indices; the tokenizer counts code points).
     */
    public record Encoded(int[] ids, int[] starts, int[] ends) {}

    /** {@link #encode encode(text, false)} with each token's character range, as transformers' offset mapping. */
    public Encoded encodeWithOffsets(String text) {
        var encoding = tokenizer.encode(text, false, false);
        long[] ids = encoding.getIds();
        var spans = encoding.getCharTokenSpans();
        // Code point index to UTF-16 index (they differ after a character outside the Basic Multilingual Plane).
        int[] utf16 = new int[text.codePointCount(0, text.length()) + 1];
        for (int cp = 0, i = 0; i < text.length(); cp++) {
            utf16[cp] = i;
            i += Character.charCount(text.codePointAt(i));
            utf16[cp + 1] = i;
        }
        int[] result = new int[ids.length], starts = new int[ids.length], ends = new int[ids.length];
        for (int t = 0; t < ids.length; t++) {
            result[t] = Math.toIntExact(ids[t]);
            var span = spans[t];
            starts[t] = span == null ? 0 : utf16[Math.clamp(span.getStart(), 0, utf16.length - 1)];
            ends[t] = span == null ? 0 : utf16[Math.clamp(span.getEnd(), 0, utf16.length - 1)];
        }
        return new Encoded(result, starts, ends);
    }

    /** The text of the added tokens marked special (BOS, EOS, chat markers such as {@code <|im_end|>}). */
    public Set<String> specialTokens() {
        return specialTokens;
    }

    /** The text of {@code ids}; with {@code skipSpecialTokens}, special tokens (BOS, EOS, chat markers) are left out. */
    public String decode(int[] ids, boolean skipSpecialTokens) {
        long[] longIds = new long[ids.length];
        for (int i = 0; i < ids.length; i++) {
            if (ids[i] < 0 || ids[i] >= vocabSize) {
                throw new IllegalArgumentException("token id " + ids[i] + " at " + i + " is outside [0, " + vocabSize + ")");
            }
            longIds[i] = ids[i];
        }
        String text = tokenizer.decode(longIds, skipSpecialTokens);
        return config.cleanUpTokenizationSpaces() ? cleanUpTokenizationSpaces(text) : text;
    }

    /** One more than the largest id (the model's vocabulary and the added tokens), as transformers' {@code len(tokenizer)}. */
    public int vocabSize() {
        return vocabSize;
    }

    public OptionalInt bosId() {
        return id(config.bosToken());
    }

    public OptionalInt eosId() {
        return id(config.eosToken());
    }

    public OptionalInt padId() {
        return id(config.padToken());
    }

    /** {@code bos_token} of tokenizer_config.json. */
    public Optional<String> bosToken() {
        return config.bosToken();
    }

    /** {@code eos_token} of tokenizer_config.json. */
    public Optional<String> eosToken() {
        return config.eosToken();
    }

    /** {@code pad_token} of tokenizer_config.json. */
    public Optional<String> padToken() {
        return config.padToken();
    }

    /** {@code unk_token} of tokenizer_config.json. */
    public Optional<String> unkToken() {
        return config.unkToken();
    }

    /** The Jinja chat template's source, where the model has one. */
    public Optional<String> chatTemplate() {
        return config.chatTemplate();
    }

    /**
     * The conversation as the model's chat template writes it, as transformers' {@code apply_chat_template(messages,
     * tokenize=False, add_generation_prompt=...)}: the template sees {@code messages}, {@code add_generation_prompt}
     * and the special-token strings ({@code bos_token}, {@code eos_token}, {@code pad_token}, {@code unk_token}).
     * A tokenizer without a template, or a template that fails (its {@code raise_exception}), is a
     * {@link UserError}.
     */
    public String applyChatTemplate(List<Message> messages, boolean addGenerationPrompt) {
        return compiledTemplate().render(messages, addGenerationPrompt, specialTokenVariables());
    }

    /** The model's chat template, compiled; a tokenizer without one is a {@link UserError}. */
    public synchronized ChatTemplate compiledTemplate() {
        if (template == null) {
            template = ChatTemplate.of(config.chatTemplate().orElseThrow(() -> new UserError(
                    "the tokenizer has no chat template (no chat_template in tokenizer_config.json, no chat_template.jinja);"
                    + " give one with data.chat_template or --chat-template FILE")));
        }
        return template;
    }

    /** What a chat template sees of the tokenizer: {@code bos_token}, {@code eos_token} and the like. */
    public Map<String, Object> specialTokenVariables() {
        var variables = new java.util.HashMap<String, Object>();
        config.bosToken().ifPresent(t -> variables.put("bos_token", t));
        config.eosToken().ifPresent(t -> variables.put("eos_token", t));
        config.padToken().ifPresent(t -> variables.put("pad_token", t));
        config.unkToken().ifPresent(t -> variables.put("unk_token", t));
        return variables;
    }

    private OptionalInt id(Optional<String> token) {
        if (token.isEmpty() || !specialIds.containsKey(token.get())) {
            return OptionalInt.empty();
        }
        return OptionalInt.of(specialIds.get(token.get()));
    }

    /** transformers' {@code clean_up_tokenization}: no space before punctuation and English contractions. */
    static String cleanUpTokenizationSpaces(String text) {
        return text.replace(" .", ".")
                .replace(" ?", "?")
                .replace(" !", "!")
                .replace(" ,", ",")
                .replace(" ' ", "'")
                .replace(" n't", "n't")
                .replace(" 'm", "'m")
                .replace(" 's", "'s")
                .replace(" 've", "'ve")
                .replace(" 're", "'re");
    }

    @Override
    public void close() {
        tokenizer.close();
    }
}
