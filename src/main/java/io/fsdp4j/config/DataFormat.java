package io.fsdp4j.config;

/** {@code data.format}: how dataset files are read; {@code auto} tells it from the content. */
public enum DataFormat implements ConfigChoice {
    AUTO,
    /** {@code {"messages": [{"role", "content"}, ...]}}: rendered with the model's chat template. */
    MESSAGES,
    /** ShareGPT's {@code {"conversations": [{"from", "value"}, ...]}}: roles mapped, then as messages. */
    SHAREGPT,
    /** {@code {"prompt", "completion"}}: loss on the completion. */
    PROMPT_COMPLETION,
    /** {@code {"text"}} JSONL, or plain text: trained on whole. */
    TEXT,
    ALPACA,
    SQUAD;

    @Override
    public String toString() {
        return spelling();
    }
}
