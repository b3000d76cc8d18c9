package io.fsdp4j.dist;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Real child JVMs, started and watched as {@code fsdp4j launch} does. */
class LauncherTest {

    /**
     * Two processes on this node; process 1 fails on the first attempt, so the launcher names it, stops process 0
     * (waiting in the rendezvous for it) and starts the job again, which then passes its collective self-check.
     */
    @Test
    @Timeout(60)
    void twoChildJvmsFailRestartAndAgreeOverTcp() {
        List<String> out = Collections.synchronizedList(new ArrayList<>());
        List<String> err = Collections.synchronizedList(new ArrayList<>());
        List<String> command = new ArrayList<>(Launcher.javaCommand(LaunchSelfCheck.class.getName()));
        command.add("fail=1");
        var plan = new Launcher.Plan(new JobLayout.Nodes(1, 0, null, "single node"), 2, JobToken.generate(), 1, command,
                Duration.ofSeconds(5));
        long start = System.nanoTime();
        Launcher.Outcome outcome = Launcher.run(plan, out::add, err::add);
        double seconds = (System.nanoTime() - start) / 1e9;

        assertThat(outcome.ok()).as("outcome %s, stderr %s", outcome, err).isTrue();
        assertThat(err).contains("[node 0 process 1] failing on purpose");
        assertThat(err).anyMatch(l -> l.startsWith("fsdp4j launch: node 0 process 1 (process 1 of 2) exited with status 3;"
                + " restarting the job (restart 1 of 1)"));
        assertThat(out).containsExactlyInAnyOrder("[node 0 process 0] process 0 ok: ranks [0, 1] of 4, attempt 1",
                "[node 0 process 1] process 1 ok: ranks [2, 3] of 4, attempt 1");
        assertThat(seconds).as("two attempts of two JVMs").isLessThan(40);

        // without restarts the failure is the outcome, naming the process
        plan = new Launcher.Plan(plan.nodes(), 2, plan.token(), 0, command, Duration.ofSeconds(5));
        outcome = Launcher.run(plan, line -> { }, line -> { });
        assertThat(outcome.status()).isEqualTo(3);
        assertThat(outcome.failure()).isEqualTo("node 0 process 1 (process 1 of 2) exited with status 3");
    }
}
