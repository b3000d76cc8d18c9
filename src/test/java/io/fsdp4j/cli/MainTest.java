package io.fsdp4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.UserError;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.Callable;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import picocli.CommandLine;
import picocli.CommandLine.Command;

class MainTest {
    /** One in-process run: exit status and what went to each stream. */
    record Run(int status, String out, String err) {
        String[] errLines() {
            return err.lines().toArray(String[]::new);
        }
    }

    private static Run run(String... args) {
        return run(false, null, args);
    }

    /** Runs {@code args}, with {@code extra} added as a subcommand when not null. */
    private static Run run(boolean debug, Object extra, String... args) {
        var out = new ByteArrayOutputStream();
        var err = new ByteArrayOutputStream();
        int status;
        try (var o = new PrintStream(out, true, StandardCharsets.UTF_8);
             var e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
            if (extra == null) {
                status = Main.execute(args, o, e, debug);
            } else {
                CommandLine cl = Main.commandLine(o, e, debug);
                cl.addSubcommand(extra);
                status = cl.execute(args);
            }
        }
        return new Run(status, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    @ParameterizedTest
    @ValueSource(strings = {"train", "score", "bench", "prepare", "eval", "export", "launch", "nccl-test", "plan", "tokenize"})
    void everyCommandHasHelp(String command) {
        Run r = run(command, "--help");
        assertThat(r.status()).isZero();
        assertThat(r.out()).contains("Usage: fsdp4j " + command);
        assertThat(r.err()).isEmpty();
    }

    @Test
    void topLevelHelpListsEveryCommand() {
        Run r = run("--help");
        assertThat(r.status()).isZero();
        assertThat(r.out()).contains("train", "score", "bench", "prepare", "eval", "export", "launch", "nccl-test", "plan",
                "tokenize");
    }

    @Test
    void versionNamesFsdp4jAndJava() {
        Run r = run("--version");
        assertThat(r.status()).isZero();
        assertThat(r.out()).startsWith("fsdp4j ").contains("Java " + Runtime.version().feature());
    }

    @Test
    void unknownCommandIsAOneLineUsageError() {
        Run r = run("trian");
        assertThat(r.status()).isEqualTo(2);
        assertThat(r.errLines()).singleElement().asString()
                .startsWith("error: unknown command 'trian'").contains("did you mean 'train'?").endsWith("(see fsdp4j --help)");
        assertThat(r.out()).isEmpty();
    }

    @Test
    void unknownFlagIsAOneLineUsageError() {
        Run r = run("train", "--stes=3");
        assertThat(r.status()).isEqualTo(2);
        assertThat(r.errLines()).containsExactly("error: unknown option '--stes'; did you mean '--set'? (see fsdp4j train --help)");
    }

    @Test
    void missingRequiredOptionIsAOneLineUsageError() {
        Run r = run("score", "--model", "m");
        assertThat(r.status()).isEqualTo(2);
        assertThat(r.errLines()).singleElement().asString().startsWith("error: Missing required option").contains("--data")
                .endsWith("(see fsdp4j score --help)");
    }

    @Test
    void configErrorIsOneLineAndStatusTwo() {
        Run r = run("train", "--set", "fsdp.strategy=zero3");
        assertThat(r.status()).isEqualTo(2);
        assertThat(r.errLines()).containsExactly("error: config key 'fsdp.strategy' must be one of full_shard, shard_grad_op, "
                + "no_shard, hybrid_shard, hybrid_shard_zero2, got 'zero3'");
        assertThat(run("train", "no-such-config.yaml").errLines())
                .containsExactly("error: config file 'no-such-config.yaml' not found");
    }

    @Test
    void printConfigShowsTheEffectiveConfig() {
        Run r = run("train", "--print-config", "--set", "train.steps=3", "--set", "optim.betas=0.8,0.9");
        assertThat(r.status()).isZero();
        assertThat(r.out().strip()).startsWith("{\"model\":").contains("\"steps\":3", "\"betas\":[0.8,0.9]")
                .doesNotContain("\n");
        assertThat(r.err()).isEmpty();
    }

    @Test
    void trainHelpListsTheConfigKeys() {
        String help = run("train", "--help").out();
        assertThat(help).contains("CONFIG.yaml", "--set", "fsdp: strategy=full_shard", "optim: lr=0.003",
                "activation_checkpointing=none");
    }

    @Command(name = "boom")
    static final class Boom implements Callable<Integer> {
        private final RuntimeException failure;

        Boom(RuntimeException failure) {
            this.failure = failure;
        }

        @Override
        public Integer call() {
            throw failure;
        }
    }

    @Test
    void userErrorFromACommandIsOneLineAndStatusTwo() {
        Run r = run(false, new Boom(new UserError("model directory 'x' has no config.json")), "boom");
        assertThat(r.status()).isEqualTo(2);
        assertThat(r.errLines()).containsExactly("error: model directory 'x' has no config.json");
    }

    @Test
    void wrappedUserErrorIsStillAUserError() {
        var wrapped = new IllegalStateException("rank 1 failed", new UserError("bad\ninput"));
        Run r = run(false, new Boom(wrapped), "boom");
        assertThat(r.status()).isEqualTo(2);
        assertThat(r.errLines()).containsExactly("error: bad input");
    }

    @Test
    void otherExceptionsAreInternalErrors() {
        Run r = run(false, new Boom(new IllegalStateException("broken invariant")), "boom");
        assertThat(r.status()).isEqualTo(1);
        assertThat(r.errLines()).singleElement().asString()
                .startsWith("error: internal error: java.lang.IllegalStateException: broken invariant");
    }

    @Test
    void debugPrintsTheStackTrace() {
        Run r = run(true, new Boom(new IllegalStateException("broken invariant")), "boom");
        assertThat(r.status()).isEqualTo(1);
        assertThat(r.errLines()[0]).isEqualTo("error: internal error: java.lang.IllegalStateException: broken invariant");
        assertThat(r.err()).contains("\tat io.fsdp4j.cli.MainTest");
    }

    @Test
    void noCommandPrintsUsageAndFails() {
        Run r = run();
        assertThat(r.status()).isEqualTo(2);
        assertThat(r.err()).contains("Usage: fsdp4j");
    }
}
