package io.fsdp4j.train;

import io.fsdp4j.UserError;

/** Placeholder for the training entry point; the lead replaces it. */
public final class Training {
    private Training() {}

    public static int run(io.fsdp4j.config.TrainConfig config, java.io.PrintStream out) {
        throw new UserError("training is not available yet");
    }
}
