package io.fsdp4j.backend.cpu;

import java.util.function.IntConsumer;
import java.util.stream.IntStream;

/**
 * Splits a loop over independent items across the cores. Each item is computed by exactly one thread in a
 * fixed order, so results never depend on scheduling: the CPU backend is deterministic.
 */
public final class Parallel {
    private static final long MIN_WORK_PER_TASK = 1 << 15;

    private Parallel() {}

    /**
     * Runs {@code body} for each item in [0, n). {@code workPerItem} (roughly flops) decides whether running in
     * parallel pays off.
     */
    public static void forEach(int n, long workPerItem, IntConsumer body) {
        if (n <= 1 || (long) n * workPerItem < MIN_WORK_PER_TASK) {
            for (int i = 0; i < n; i++) {
                body.accept(i);
            }
            return;
        }
        IntStream.range(0, n).parallel().forEach(body);
    }
}
