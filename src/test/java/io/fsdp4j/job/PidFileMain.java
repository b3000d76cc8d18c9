package io.fsdp4j.job;

import io.fsdp4j.cli.Main;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * A child of {@link MultiProcessTrainingTest}: writes its pid to {@code DIR/process-RANK-attempt-N} (DIR: its first
 * argument), so that the test can kill a chosen process from outside, then runs {@code fsdp4j} with the rest.
 */
public final class PidFileMain {
    private PidFileMain() {}

    public static void main(String[] args) {
        Path dir = Path.of(args[0]);
        String name = "process-" + System.getenv("RANK") + "-attempt-" + System.getenv(JobSettings.RESTART_ENV);
        try {
            Files.writeString(dir.resolve(name + ".tmp"), Long.toString(ProcessHandle.current().pid()));
            Files.move(dir.resolve(name + ".tmp"), dir.resolve(name));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        Main.main(java.util.Arrays.copyOfRange(args, 1, args.length));
    }
}
