package io.fsdp4j.job;

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

    /**
     * A node whose processes the preflight left out ({@value NodeLeftOutException#EXIT_STATUS}): its launcher ends
     * with that status, naming them, and does not start them again (the other nodes went on without them); a
     * failure on another node is still a failure.
     */
    @Test
    @Timeout(30)
    void aNodeLeftOutOfTheJobEndsItsLauncherWithoutARestart() {
        List<String> err = Collections.synchronizedList(new ArrayList<>());
        var plan = new Launcher.Plan(new JobLayout.Nodes(3, 2, new JobLayout.Address("127.0.0.1", 1), "flags"), 2, "t",
                1, List.of("bash", "-c", "exit " + NodeLeftOutException.EXIT_STATUS), Duration.ofSeconds(1));
        Launcher.Outcome outcome = Launcher.run(plan, line -> { }, err::add);
        assertThat(outcome.status()).isEqualTo(NodeLeftOutException.EXIT_STATUS);
        assertThat(outcome.failure()).isEqualTo("node 2 process 4, node 2 process 5 left out of the job by the preflight"
                + " (dist.exclude_unhealthy): the other node(s) train without them");
        assertThat(err).noneMatch(l -> l.contains("restarting"));
        assertThat(err).anyMatch(l -> l.startsWith("fsdp4j launch: node 2 process 4 (process 4 of 6) was left out of "
                + "the job by the preflight (its message above)"));

        var failing = new Launcher.Plan(plan.nodes(), 1, "t", 0, List.of("bash", "-c", "exit 2"), Duration.ofSeconds(1));
        assertThat(Launcher.run(failing, line -> { }, line -> { }).status()).isEqualTo(2);
    }

    /**
     * The launcher's exit status keeps its process's meaning (bad input, diverged, left out, a peer failed, stopped
     * after saving, an internal error); a process killed by a signal or ending with a status of its own is a failed
     * peer (5), not bad input.
     */
    @Test
    void theLaunchersStatusKeepsItsProcesssMeaning() {
        for (int status : new int[] {0, 1, 2, 3, 4, 5, 6}) {
            assertThat(new Launcher.Outcome(status, "x").exitStatus()).isEqualTo(status);
        }
        for (int status : new int[] {137, 143, 130, 42, 255}) {
            assertThat(new Launcher.Outcome(status, "x").exitStatus()).as("status %d", status).isEqualTo(5);
        }
        var plan = new Launcher.Plan(new JobLayout.Nodes(1, 0, new JobLayout.Address("127.0.0.1", 1), "flags"), 1, "t",
                0, List.of("bash", "-c", "kill -9 $$"), Duration.ofSeconds(1));
        Launcher.Outcome killed = Launcher.run(plan, line -> { }, line -> { });
        assertThat(killed.failure()).isEqualTo("node 0 (process 0 of 1) exited with status 137 (killed by signal 9)");
        assertThat(killed.exitStatus()).isEqualTo(5);
    }

    /**
     * A process started by a launcher gets the launcher's pid, by which it ends when the launcher dies (see
     * FaultsTest for a launcher killed with SIGKILL).
     */
    @Test
    void aChildIsToldItsLaunchersPid() {
        var plan = new Launcher.Plan(new JobLayout.Nodes(1, 0, null, "single"), 1, "t", 0, List.of("java"),
                Duration.ofSeconds(1));
        assertThat(Launcher.childEnv(plan, new JobLayout.Address("127.0.0.1", 1), 0, 0, 0))
                .containsEntry(Launcher.LAUNCHER_PID_ENV, Long.toString(ProcessHandle.current().pid()));
    }

    /** Emulated nodes: every node's processes start here, numbered node by node, each node its own NCCL host. */
    @Test
    void emulatedNodesGetTheirPlacesAndTheirOwnNcclHostId() {
        var plan = new Launcher.Plan(new JobLayout.Nodes(2, 0, null, "emulated"), 2, "t", 0, List.of("java"),
                Duration.ofSeconds(1), true);
        assertThat(plan.localNodes()).containsExactly(0, 1);
        var env = Launcher.childEnv(plan, new JobLayout.Address("127.0.0.1", 1234), 1, 1, 0);
        assertThat(env).containsEntry("RANK", "3").containsEntry("WORLD_SIZE", "4").containsEntry("LOCAL_RANK", "1")
                .containsEntry("LOCAL_WORLD_SIZE", "2").containsEntry("NCCL_HOSTID", "fsdp4j-emulated-node-1")
                .containsKey("NCCL_SOCKET_IFNAME");
        // the child reads it back as process 3 of node 1
        JobLayout layout = JobLayout.resolve(4, 1, 0, null, env);
        assertThat(layout.nodeRank()).isEqualTo(1);
        assertThat(layout.localRanks()).containsExactly(6, 7);
        // real nodes: only this node's processes, and no NCCL host of their own
        var real = new Launcher.Plan(new JobLayout.Nodes(2, 1, new JobLayout.Address("h", 1), "flags"), 2, "t", 0,
                List.of("java"), Duration.ofSeconds(1));
        assertThat(real.localNodes()).containsExactly(1);
        assertThat(Launcher.childEnv(real, real.nodes().rdzv(), 1, 0, 0)).containsEntry("RANK", "2")
                .doesNotContainKey("NCCL_HOSTID");
    }
}
