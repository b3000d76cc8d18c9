package io.fsdp4j.gpu;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.cuda.Cuda;
import io.fsdp4j.dist.JobLayout;
import io.fsdp4j.dist.JobToken;
import io.fsdp4j.dist.Launcher;
import java.io.File;
import java.net.URISyntaxException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * GPUs across processes: two nodes emulated on one machine ({@code fsdp4j launch --emulate-nodes 2}), each a child
 * JVM with its own NCCL_HOSTID, the communicators' unique ids exchanged through the rendezvous store; and a process
 * that dies while the other waits in NCCL stops the job.
 */
@Tag("gpu")
@Timeout(180)
class GpuMultiProcessTest {

    /** The launcher's java command for {@link NcclJobSelfCheck}, with this JVM's test classes and jar on its path. */
    private static List<String> command(String... args) {
        List<String> command = new ArrayList<>(Launcher.javaCommand(NcclJobSelfCheck.class.getName()));
        int cp = command.indexOf("-cp");
        command.set(cp + 1, codeSource(NcclJobSelfCheck.class) + File.pathSeparator + codeSource(Launcher.class)
                + File.pathSeparator + command.get(cp + 1));
        command.addAll(List.of(args));
        return command;
    }

    private static String codeSource(Class<?> type) {
        try {
            return Path.of(type.getProtectionDomain().getCodeSource().getLocation().toURI()).toString();
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    private static int gpusPerNode() {
        return Math.min(2, Cuda.deviceCount() / 2);
    }

    private static Launcher.Plan plan(List<String> command) {
        return new Launcher.Plan(new JobLayout.Nodes(2, 0, null, "emulated"), 1, JobToken.generate(), 0, command,
                Duration.ofSeconds(10), true);
    }

    @Test
    void twoEmulatedNodesAgreeOnEveryGroupOfTheMesh() {
        GpuTests.requireGpus(2);
        int perNode = gpusPerNode();
        List<String> out = Collections.synchronizedList(new ArrayList<>());
        List<String> err = Collections.synchronizedList(new ArrayList<>());
        Launcher.Outcome outcome = Launcher.run(plan(command(Integer.toString(perNode))), out::add, err::add);
        assertThat(outcome.ok()).as("%s %s", outcome, err).isTrue();
        String ranks0 = perNode == 1 ? "[0]" : "[0, 1]", ranks1 = perNode == 1 ? "[1]" : "[2, 3]";
        assertThat(out).anyMatch(l -> l.startsWith("[node 0] process 0 ok: ranks " + ranks0 + " of " + 2 * perNode)
                && l.endsWith("NCCL_HOSTID=fsdp4j-emulated-node-0"));
        assertThat(out).anyMatch(l -> l.startsWith("[node 1] process 1 ok: ranks " + ranks1 + " of " + 2 * perNode)
                && l.endsWith("NCCL_HOSTID=fsdp4j-emulated-node-1"));
    }

    /**
     * Process 1 vanishes (halts, status 0: the launcher stops nobody) while process 0 waits for it inside NCCL;
     * process 0 must hear it through the rendezvous store, abort its communicators and fail, naming process 1.
     */
    @Test
    void aProcessThatVanishesStopsTheOtherWaitingInNccl() {
        GpuTests.requireGpus(2);
        List<String> err = Collections.synchronizedList(new ArrayList<>());
        long start = System.nanoTime();
        Launcher.Outcome outcome = Launcher.run(plan(command(Integer.toString(gpusPerNode()), "fail=1")), l -> { },
                err::add);
        double seconds = (System.nanoTime() - start) / 1e9;
        assertThat(outcome.ok()).as("%s", err).isFalse();
        assertThat(outcome.failure()).as("%s", err).isEqualTo("node 0 (process 0 of 2) exited with status 1");
        assertThat(err).as("%s", err).anyMatch(l -> l.startsWith("[node 0] error: the job stopped: node 1 (rank")
                && l.contains("lost its connection to the rendezvous store"));
        assertThat(seconds).as("the job stops well before any NCCL timeout").isLessThan(90);
    }
}
