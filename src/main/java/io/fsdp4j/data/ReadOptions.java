package io.fsdp4j.data;

import io.fsdp4j.tokenizer.ChatTemplate;
import java.nio.file.Path;

/**
 * How a dataset is read, beyond its path ({@code data.format}, {@code data.chat_template}, {@code data.train_on};
 * {@code --format} and {@code --chat-template} on the command line).
 *
 * @param format       the format, or null to tell it from the content ({@link DatasetFormat#detect})
 * @param chatTemplate a Jinja file that overrides the tokenizer's chat template, or null
 * @param allTokens    conversations carry loss on every token, not only on the assistant's turns
 * @param dropLong     an example longer than {@code data.seq_len} is left out ({@code data.too_long=drop}), not
 *                     truncated
 * @param chatTemplateTimeout seconds the chat template may take to render one conversation
 *                     ({@code data.chat_template_timeout}, {@code --chat-template-timeout}); longer is an error
 */
public record ReadOptions(DatasetFormat format, Path chatTemplate, boolean allTokens, boolean dropLong,
                          double chatTemplateTimeout) {
    /** Told from the content, the tokenizer's chat template, loss on the assistant's turns, long ones truncated. */
    public static final ReadOptions DEFAULT = new ReadOptions(null, null, false, false);

    public ReadOptions {
        if (!(chatTemplateTimeout > 0) || !Double.isFinite(chatTemplateTimeout)) {
            throw new IllegalArgumentException("chatTemplateTimeout must be > 0 seconds: " + chatTemplateTimeout);
        }
    }

    /** Long examples truncated. */
    public ReadOptions(DatasetFormat format, Path chatTemplate, boolean allTokens) {
        this(format, chatTemplate, allTokens, false);
    }

    /** The chat template's default time limit ({@link ChatTemplate#DEFAULT_TIME_LIMIT_SECONDS}). */
    public ReadOptions(DatasetFormat format, Path chatTemplate, boolean allTokens, boolean dropLong) {
        this(format, chatTemplate, allTokens, dropLong, ChatTemplate.DEFAULT_TIME_LIMIT_SECONDS);
    }

    /** The format: the one named, else the one {@code path} holds. */
    public DatasetFormat formatOf(Path path) {
        return format != null ? format : DatasetFormat.detect(path);
    }
}
