package io.fsdp4j;

import java.util.concurrent.Executor;

/**
 * Where tests run work that waits on a process, a socket or another rank: a daemon thread of its own for each task,
 * never the common fork-join pool, which has one thread on a two-core machine, so that one test's stuck task (a
 * timed-out test's launcher, say) cannot hold up every later test's in the same JVM.
 */
public final class TestThreads {
    private TestThreads() {}

    /** Runs each task on a new daemon thread. */
    public static final Executor OWN_THREAD = task -> Thread.ofPlatform().daemon().start(task);
}
