package io.fsdp4j.tokenizer;

import java.util.Objects;

/** One turn of a conversation for a chat template: {@code role} is "system", "user", "assistant" (or "tool"). */
public record Message(String role, String content) {
    public Message {
        Objects.requireNonNull(role, "role");
        Objects.requireNonNull(content, "content");
    }

    public static Message system(String content) {
        return new Message("system", content);
    }

    public static Message user(String content) {
        return new Message("user", content);
    }

    public static Message assistant(String content) {
        return new Message("assistant", content);
    }
}
