package io.fsdp4j.config;

import io.fsdp4j.UserError;

/** Range checks for the section records; each failure is a one-line {@link UserError} naming the key. */
final class Check {
    private Check() {}

    static void atLeast(String key, long value, long min) {
        if (value < min) {
            throw new UserError("config key '" + key + "' must be >= " + min + ", got " + value);
        }
    }

    static void between(String key, long value, long min, long max) {
        if (value < min || value > max) {
            throw new UserError("config key '" + key + "' must be between " + min + " and " + max + ", got " + value);
        }
    }

    static void positive(String key, double value) {
        if (!(value > 0) || !Double.isFinite(value)) {
            throw new UserError("config key '" + key + "' must be > 0, got " + value);
        }
    }

    static void nonNegative(String key, double value) {
        if (!(value >= 0) || !Double.isFinite(value)) {
            throw new UserError("config key '" + key + "' must be >= 0, got " + value);
        }
    }

    /** {@code min <= value < max} when {@code maxExclusive}, else {@code min <= value <= max}. */
    static void inRange(String key, double value, double min, double max, boolean maxExclusive) {
        boolean ok = value >= min && (maxExclusive ? value < max : value <= max);
        if (!ok) {
            throw new UserError("config key '" + key + "' must be " + (maxExclusive ? ">= " + min + " and < " + max
                    : "between " + min + " and " + max) + ", got " + value);
        }
    }

    static void present(String key, Object value) {
        if (value == null) {
            throw new UserError("config key '" + key + "' must be given");
        }
    }
}
