package io.fsdp4j.gpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.fsdp4j.cli.Main;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.doctor.GpuHealth;
import io.fsdp4j.job.JobLayout;
import io.fsdp4j.job.JobToken;
import io.fsdp4j.job.Launcher;
import io.fsdp4j.preflight.LeaveOutJobTest;
import io.fsdp4j.train.Training;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.PrintStream;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code dist.exclude_unhealthy} on GPUs: 3 nodes emulated on one machine (1 GPU each, NCCL between them), node 1
 * unhealthy through {@value GpuHealth#FAULT_ENV} (the others run the real quick health test). Nodes 0 and 2 close
 * the NCCL world they had begun (its rendezvous and its watch of the store), form a 2-node job and train it with the
 * losses of one process on 2 GPUs; node 1's process ends with status 4.
 */
@Tag("gpu")
@Timeout(300)
class GpuLeaveOutTest {
    @TempDir
    Path dir;

    @Test
    void anUnhealthyNodeIsLeftOutAndTheOtherTwoTrainOnTheirGpus() throws Exception {
        GpuTests.requireGpus(3);
        Path two = Files.createDirectories(dir.resolve("two")), three = Files.createDirectories(dir.resolve("three"));
        List<String> reference = new ArrayList<>(LeaveOutJobTest.settings(dir, two));
        reference.replaceAll(s -> s.equals("dist.device=cpu") ? "dist.device=cuda" : s.equals("dist.ranks=1")
                ? "dist.ranks=2" : s);
        assertThat(Training.run(TrainConfig.load(null, reference),
                new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8))).isZero();

        List<String> command = new ArrayList<>(List.of("bash", "-c", "if [ \"$RANK\" = 1 ]; then export "
                + GpuHealth.FAULT_ENV + "='NVLink 2 down (drill)'; fi; exec \"$@\"", "node"));
        List<String> java = new ArrayList<>(Launcher.javaCommand(Main.class.getName()));
        int cp = java.indexOf("-cp"); // the GPU machine runs the tests from a launcher jar: add the code's own path
        java.set(cp + 1, codeSource(Main.class) + File.pathSeparator + java.get(cp + 1));
        command.addAll(java);
        command.addAll(List.of("train", "--exclude-unhealthy"));
        for (String s : LeaveOutJobTest.settings(dir, three)) {
            command.addAll(List.of("--set", s.equals("dist.device=cpu") ? "dist.device=cuda" : s));
        }
        var plan = new Launcher.Plan(new JobLayout.Nodes(3, 0, null, "emulated"), 1, JobToken.generate(), 0, command,
                Duration.ofSeconds(10), true);
        List<String> lines = Collections.synchronizedList(new ArrayList<>());
        Launcher.Outcome outcome = Launcher.run(plan, lines::add, lines::add);
        lines.forEach(System.out::println);

        assertThat(outcome.ok()).as("%s", outcome).isTrue();
        for (int k = 0; k < 3; k++) {
            String verdict = "[node " + k + "] fsdp4j: preflight: leaving node 1 out of the job (dist.exclude_unhealthy):"
                    + " the GPU health test failed on node 1: NVLink 2 down (drill)";
            assertThat(lines).anyMatch(l -> l.startsWith(verdict));
        }
        assertThat(lines).contains("fsdp4j launch: node 1 (process 1 of 3) was left out of the job by the preflight "
                + "(its message above); the other process(es) go on");
        assertThat(lines).anyMatch(l -> l.startsWith("[node 2] fsdp4j: preflight: the job goes on as 2 node(s) of 1 "
                + "rank(s); node 2 (rank 2) is now node 1 (rank 1); rendezvous "));
        assertThat(lines).anyMatch(l -> l.startsWith("[node 0] {\"summary\"") && l.contains("\"world_size\":2"));
        List<Double> expected = LeaveOutJobTest.losses(two), got = LeaveOutJobTest.losses(three);
        assertThat(got).hasSameSizeAs(expected);
        for (int i = 0; i < expected.size(); i++) {
            assertThat(got.get(i)).as("step %d", i + 1).isCloseTo(expected.get(i), within(1e-5));
        }
    }

    private static String codeSource(Class<?> type) {
        try {
            return Path.of(type.getProtectionDomain().getCodeSource().getLocation().toURI()).toString();
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }
}
