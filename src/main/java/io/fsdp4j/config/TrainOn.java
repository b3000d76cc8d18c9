package io.fsdp4j.config;

/** {@code data.train_on}: which tokens of a conversation carry loss. */
public enum TrainOn implements ConfigChoice {
    /** The assistant's turns (their content and the end-of-turn marker); role headers and other turns do not. */
    ASSISTANT,
    /** Every token. */
    ALL;

    @Override
    public String toString() {
        return spelling();
    }
}
