package io.fsdp4j.job;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.TestThreads;
import io.fsdp4j.UserError;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(30)
class RendezvousStoreTest {
    private static final String TOKEN = "s3cret-token-for-tests";
    private static final Duration SHORT = Duration.ofSeconds(5);

    @Test
    void setGetAddAndWaits() throws Exception {
        try (var server = RendezvousServer.start(0, TOKEN, 0);
             var a = RendezvousClient.connect("127.0.0.1", server.port(), TOKEN, 0, SHORT);
             var b = RendezvousClient.connect("127.0.0.1", server.port(), TOKEN, 0, SHORT)) {
            a.set("k", "v");
            assertThat(b.getString("k", Duration.ZERO)).contains("v");
            assertThat(b.getString("missing", Duration.ofMillis(100))).isEmpty();
            // a get waits for a later set
            var later = CompletableFuture.supplyAsync(() -> b.getString("late", SHORT), TestThreads.OWN_THREAD);
            Thread.sleep(100);
            a.set("late", "here");
            assertThat(later.get(5, TimeUnit.SECONDS)).contains("here");
            assertThat(a.add("n", 2)).isEqualTo(2);
            assertThat(b.add("n", 3)).isEqualTo(5);
            assertThat(a.getString("n", Duration.ZERO)).contains("5");
            assertThat(a.awaitAtLeast("n", 6, Duration.ofMillis(100))).isEqualTo(5);
            a.set("text", "x");
            assertThatThrownBy(() -> a.add("text", 1)).hasMessageContaining("not a counter");
            assertThat(a.add("n", 0)).isEqualTo(5); // the connection still serves after a refused request
        }
    }

    /**
     * A process's watcher polls the store on the same connection that its collective watchdog posts on; the poll
     * must not starve the post (on a busy GPU host a barging monitor kept a post waiting for minutes).
     */
    @Test
    void aClientInALoopOfWaitsLetsItsOtherCallersIn() throws Exception {
        try (var server = RendezvousServer.start(0, TOKEN, 0);
             var shared = RendezvousClient.connect("127.0.0.1", server.port(), TOKEN, 0, SHORT)) {
            var polling = new java.util.concurrent.atomic.AtomicBoolean(true);
            var poller = Thread.ofPlatform().start(() -> {
                while (polling.get()) {
                    shared.getString("never-set", Duration.ofMillis(50));
                }
            });
            try {
                Thread.sleep(100);
                for (int i = 0; i < 20; i++) {
                    long start = System.nanoTime();
                    shared.set("posted", "reason " + i);
                    assertThat(Duration.ofNanos(System.nanoTime() - start))
                            .as("call %d waited behind the poller", i).isLessThan(Duration.ofMillis(500));
                }
            } finally {
                polling.set(false);
                poller.join();
            }
            assertThat(shared.getString("posted", Duration.ZERO)).contains("reason 19");
        }
    }

    @Test
    void barrierByCounterReleasesWhenAllArrive() throws Exception {
        try (var server = RendezvousServer.start(0, TOKEN, 0);
             var a = RendezvousClient.connect("127.0.0.1", server.port(), TOKEN, 0, SHORT);
             var b = RendezvousClient.connect("127.0.0.1", server.port(), TOKEN, 0, SHORT)) {
            var first = CompletableFuture.supplyAsync(() -> a.barrier("ready", 2, SHORT), TestThreads.OWN_THREAD);
            Thread.sleep(100);
            assertThat(first).isNotDone();
            assertThat(b.barrier("ready", 2, SHORT)).isEqualTo(2);
            assertThat(first.get(5, TimeUnit.SECONDS)).isEqualTo(2);
            assertThat(a.barrier("alone", 2, Duration.ofMillis(100))).isEqualTo(1); // ran out: says how many came
        }
    }

    @Test
    void wrongTokenIsRefusedWithOneLine() {
        try (var server = RendezvousServer.start(0, TOKEN, 0)) {
            assertThatThrownBy(() -> RendezvousClient.connect("127.0.0.1", server.port(), "guess", 0, SHORT))
                    .isInstanceOf(UserError.class)
                    .hasMessage("rendezvous at 127.0.0.1:" + server.port()
                            + " refused this process: wrong job token (FSDP4J_JOB_TOKEN); every node of a job must"
                            + " have the same one, and the others were told");
        }
    }

    /**
     * A process refused for a wrong job token: the processes waiting for it (node 0, which serves the store, and
     * another) are told at once, each naming the refused process's address and the reason, instead of waiting out
     * the rendezvous timeout (ten minutes here) and then naming only the missing process.
     */
    @Test
    @org.junit.jupiter.api.Timeout(60)
    void aRefusedProcessIsToldToEveryProcessWaitingForIt() throws Exception {
        var server = RendezvousServer.start(0, TOKEN, 0);
        var settings = new JobSettings(TOKEN, 0, java.time.Duration.ofMinutes(10), java.time.Duration.ofSeconds(10),
                null);
        try (var pool = java.util.concurrent.Executors.newVirtualThreadPerTaskExecutor()) {
            List<java.util.concurrent.Future<Throwable>> waiting = new ArrayList<>();
            for (int p = 0; p < 2; p++) {
                var layout = new JobLayout(3, p, 1, 0, 3, "127.0.0.1", server.port(), "test");
                int process = p;
                waiting.add(pool.submit(() -> {
                    try (var rendezvous = JobRendezvous.join(layout, settings, process == 0 ? server : null)) {
                        rendezvous.publish("job", "ready");
                        rendezvous.awaitAll("job");
                        return null;
                    } catch (RuntimeException e) {
                        return e;
                    }
                }));
            }
            Thread.sleep(200);
            long start = System.nanoTime();
            assertThatThrownBy(() -> RendezvousClient.connect("127.0.0.1", server.port(), "guess", 0, SHORT))
                    .hasMessageContaining("wrong job token");
            for (var f : waiting) {
                Throwable failure = f.get(10, TimeUnit.SECONDS);
                assertThat(failure).isInstanceOf(UserError.class).hasMessage("rendezvous at 127.0.0.1:" + server.port()
                        + " refused a process of this job: the process connecting from 127.0.0.1 had a wrong job token"
                        + " (FSDP4J_JOB_TOKEN); node(s) 2 of 3 (ranks 6-8) will not join: give every node the same FSDP4J_JOB_TOKEN and"
                        + " start the job again");
            }
            assertThat((System.nanoTime() - start) / 1e9).isLessThan(10);
        } finally {
            server.close();
        }
    }

    @Test
    void aStoreOfAnEarlierAttemptIsWaitedOutForAWhileThenJoined() {
        try (var server = RendezvousServer.start(0, TOKEN, 1);
             var older = RendezvousClient.connect("127.0.0.1", server.port(), TOKEN, 0, SHORT)) {
            older.set("k", "v"); // a process of an earlier attempt (restarted by its scheduler) joins at once
            long start = System.nanoTime();
            try (var newer = RendezvousClient.connect("127.0.0.1", server.port(), TOKEN, 2, Duration.ofMillis(800))) {
                assertThat(newer.getString("k", Duration.ZERO)).contains("v");
            }
            assertThat((System.nanoTime() - start) / 1e9).isBetween(0.4, 10.0); // waited half its timeout first
        }
    }

    @Test
    void anAbsentStoreFailsAfterTheTimeoutNamingTheAddress() throws Exception {
        int port;
        try (var s = new ServerSocket(0)) {
            port = s.getLocalPort();
        }
        long start = System.nanoTime();
        int p = port;
        assertThatThrownBy(() -> RendezvousClient.connect("127.0.0.1", p, TOKEN, 0, Duration.ofMillis(600)))
                .isInstanceOf(UserError.class)
                .hasMessageContaining("could not reach the store at 127.0.0.1:" + port + " within 0.6 s")
                .hasMessageContaining("is node 0 running");
        assertThat((System.nanoTime() - start) / 1e9).isBetween(0.5, 10.0);
    }

    @Test
    void aClientStartedBeforeTheStoreJoinsWhenItComesUp() throws Exception {
        int port;
        try (var s = new ServerSocket(0)) {
            port = s.getLocalPort();
        }
        var client = CompletableFuture.supplyAsync(() -> RendezvousClient.connect("127.0.0.1", port, TOKEN, 0, SHORT),
                TestThreads.OWN_THREAD);
        Thread.sleep(300);
        try (var server = RendezvousServer.start(port, TOKEN, 0); var c = client.get(5, TimeUnit.SECONDS)) {
            assertThat(server.port()).isEqualTo(port);
            c.set("up", "yes");
            assertThat(c.getString("up", Duration.ZERO)).contains("yes");
        }
    }

    @Test
    void aClosedStoreFailsItsClientsWithAMessage() {
        var server = RendezvousServer.start(0, TOKEN, 0);
        try (var c = RendezvousClient.connect("127.0.0.1", server.port(), TOKEN, 0, SHORT)) {
            server.close();
            assertThatThrownBy(() -> c.getString("k", SHORT)).isInstanceOf(UserError.class)
                    .hasMessageContaining("lost the store at 127.0.0.1:" + server.port());
        }
    }

    @Test
    void tokensCompareWhole() {
        assertThat(JobToken.matches("abc", "abc")).isTrue();
        assertThat(JobToken.matches("abc", "abd")).isFalse();
        assertThat(JobToken.matches("abc", "abcd")).isFalse();
        assertThat(JobToken.generate()).hasSize(32).isNotEqualTo(JobToken.generate());
        assertThat(JobToken.masked("0123456789abcdef")).isEqualTo("0123************");
        assertThatThrownBy(() -> JobToken.require(java.util.Map.of())).isInstanceOf(UserError.class)
                .hasMessageContaining("FSDP4J_JOB_TOKEN");
    }
}
