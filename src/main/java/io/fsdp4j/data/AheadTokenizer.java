package io.fsdp4j.data;

import io.fsdp4j.data.DatasetReader.Document;
import java.util.ArrayDeque;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;
import java.util.function.Consumer;
import java.util.function.Supplier;

/**
 * Documents tokenized on a pool while reading goes on, at most {@link #AHEAD} ahead of the sink, which gets them in
 * the order they were given, on the reading thread. Without a pool, each is tokenized and handed over at once.
 */
final class AheadTokenizer {
    /** Documents tokenized ahead of the sink, per pool. */
    private static final int AHEAD = 256;

    private final String source;
    private final ExecutorService pool; // null: tokenize on the reading thread
    private final Consumer<Document> sink;
    private final ArrayDeque<Future<Document>> pending = new ArrayDeque<>();

    /** Documents of {@code source} (for messages) tokenized on {@code pool} (null: on this thread) for {@code sink}. */
    AheadTokenizer(String source, ExecutorService pool, Consumer<Document> sink) {
        this.source = source;
        this.pool = pool;
        this.sink = sink;
    }

    /** Hands {@code document} (tokenizing when called) to the sink, now or, with a pool, after those given before. */
    void submit(Supplier<Document> document) {
        if (pool == null) {
            sink.accept(document.get());
            return;
        }
        pending.addLast(pool.submit(document::get));
        if (pending.size() >= AHEAD) {
            drainOne();
        }
    }

    /** Waits for every document given and hands it to the sink, in order. */
    void drain() {
        while (!pending.isEmpty()) {
            drainOne();
        }
    }

    private void drainOne() {
        try {
            sink.accept(pending.removeFirst().get());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while tokenizing " + source, e);
        } catch (ExecutionException e) {
            for (Future<Document> f : pending) {
                f.cancel(false);
            }
            pending.clear();
            if (e.getCause() instanceof RuntimeException r) {
                throw r;
            }
            throw new IllegalStateException(e.getCause());
        }
    }
}
