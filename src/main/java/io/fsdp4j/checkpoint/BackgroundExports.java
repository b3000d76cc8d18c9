package io.fsdp4j.checkpoint;

import io.fsdp4j.UserError;
import io.fsdp4j.tensor.DType;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.Consumer;

/**
 * {@code checkpoint.export_every}: saved checkpoints exported to Hugging Face directories while training goes on. The
 * ranks stop only to write their checkpoint shards, as for any checkpoint; the export then reads the saved
 * checkpoint on one thread of the process hosting rank 0, one export after another, into
 * {@code checkpoint.dir/hf-step-NNNNNNNN}. The checkpoint is opened when it is handed over, so pruning it later
 * does not take its files away from the export. {@link #close} waits for the exports and reports the first failure.
 */
public final class BackgroundExports implements AutoCloseable {
    private final Path root;
    private final Consumer<String> log;
    private final ExecutorService executor = Executors.newSingleThreadExecutor(r -> new Thread(r, "fsdp4j-export"));
    private final List<Future<Path>> pending = new ArrayList<>();

    /**
     * @param root the checkpoint directory, where exports go beside the checkpoints
     * @param log  told one line per export written
     */
    public BackgroundExports(Path root, Consumer<String> log) {
        this.root = root;
        this.log = log;
    }

    public static Path exportDir(Path root, int step) {
        return root.resolve(String.format("hf-step-%08d", step));
    }

    /** Starts exporting the checkpoint saved at {@code checkpointDir} (step {@code step}); returns at once. */
    public synchronized void submit(Path checkpointDir, int step) {
        submit(checkpointDir, exportDir(root, step), HfExport.Options.defaults(), "exported step " + step + " to ");
    }

    /**
     * Starts exporting the checkpoint saved at {@code checkpointDir} into {@code outDir} in {@code dtype} (the export at
     * the end of a run, which the run reports itself); returns at once.
     */
    public synchronized void submit(Path checkpointDir, Path outDir, DType dtype) {
        submit(checkpointDir, outDir, HfExport.Options.defaults().withDtype(dtype), null);
    }

    /** {@code logged}: what the log line says before the directory written, or null for no line. */
    private void submit(Path checkpointDir, Path outDir, HfExport.Options options, String logged) {
        SavedCheckpoint checkpoint = SavedCheckpoint.open(checkpointDir);
        pending.add(executor.submit(() -> {
            try (checkpoint) {
                Path written = HfExport.export(checkpoint, outDir, options);
                if (logged != null) {
                    log.accept(logged + written);
                }
                return written;
            }
        }));
    }

    /** Waits for every export; throws the first failure. */
    @Override
    public synchronized void close() {
        executor.shutdown();
        RuntimeException first = null;
        for (Future<Path> f : pending) {
            try {
                f.get();
            } catch (ExecutionException e) {
                if (first == null) {
                    first = e.getCause() instanceof RuntimeException r ? r
                            : new UserError("export failed: " + e.getCause());
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                first = new UserError("interrupted while waiting for the exports under " + root);
                break;
            }
        }
        if (first != null) {
            throw first;
        }
    }
}
