package io.fsdp4j.config;

import java.util.Locale;

/**
 * A value of a closed set in the config (an enum). Its user spelling is the constant's name in lower case
 * ({@code FULL_SHARD} is {@code full_shard}), used both to parse a config and to print one.
 */
public interface ConfigChoice {
    /** The enum constant's name; implemented by {@link Enum#name()}. */
    String name();

    /** The spelling users write in a config file or a {@code --set}. */
    default String spelling() {
        return name().toLowerCase(Locale.ROOT);
    }
}
