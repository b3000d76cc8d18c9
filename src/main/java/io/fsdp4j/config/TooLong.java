package io.fsdp4j.config;

/** {@code data.too_long}: what becomes of an example longer than {@code data.seq_len}. */
public enum TooLong implements ConfigChoice {
    /** Its first seq_len tokens are kept. */
    TRUNCATE,
    /** It is left out. */
    DROP;

    @Override
    public String toString() {
        return spelling();
    }
}
