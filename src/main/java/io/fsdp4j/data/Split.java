package io.fsdp4j.data;

/**
 * Which documents of a dataset to use. Token files written by {@code fsdp4j prepare} hold out some documents for
 * evaluation ({@code --eval-fraction}); {@link #TRAIN} is the rest, {@link #ALL} both. A file without a split
 * (pre-tokenized JSONL, plain text) is whole in every split: it is the split that it is given for.
 */
public enum Split {
    TRAIN,
    EVAL,
    ALL
}
