package io.fsdp4j.data;

import io.airlift.compress.zstd.ZstdInputStream;
import io.fsdp4j.UserError;
import java.io.BufferedInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.stream.Stream;
import java.util.zip.GZIPInputStream;

/**
 * The files of a dataset as the Hugging Face Hub serves them: one file, or a directory of shards read in name order;
 * {@code .gz} and {@code .zst} files decompressed as they are read (gzip by the JDK, zstd by aircompressor: pure Java,
 * a 255 kB jar without dependencies, where zstd-jni would add 6.7 MB of native libraries; it touches
 * {@code sun.misc.Unsafe}, which {@code bin/fsdp4j} allows quietly), Parquet files by {@link ParquetRows}.
 */
public final class DatasetFiles {
    /** What a directory of shards may hold (a name ending in one of these). */
    public static final List<String> SHARD_SUFFIXES = List.of(".jsonl", ".json", ".jsonl.gz", ".json.gz", ".jsonl.zst",
            ".json.zst", ".parquet", ".txt", ".txt.gz", ".txt.zst");

    private DatasetFiles() {}

    /** {@code path} itself, or the dataset files of the directory {@code path} in name order. */
    public static List<Path> shards(Path path) {
        if (!Files.exists(path)) {
            throw new UserError("data file " + path + " does not exist");
        }
        if (!Files.isDirectory(path)) {
            return List.of(path);
        }
        try (Stream<Path> entries = Files.list(path)) {
            List<Path> shards = entries.filter(Files::isRegularFile)
                    .filter(p -> !p.getFileName().toString().startsWith("."))
                    .filter(p -> SHARD_SUFFIXES.stream().anyMatch(s -> lower(p).endsWith(s)))
                    .sorted().toList();
            if (shards.isEmpty()) {
                throw new UserError("directory " + path + " holds no dataset files (names ending in "
                        + String.join(", ", SHARD_SUFFIXES) + ")");
            }
            return shards;
        } catch (IOException e) {
            throw new UserError("cannot list " + path + ": " + e.getMessage());
        }
    }

    /** True for a Parquet file. */
    public static boolean isParquet(Path file) {
        return lower(file).endsWith(".parquet");
    }

    /** The bytes of {@code file}, decompressed by its name ({@code .gz}, {@code .zst}); close it. */
    public static InputStream open(Path file) {
        try {
            InputStream raw = new BufferedInputStream(Files.newInputStream(file), 1 << 16);
            String name = lower(file);
            if (name.endsWith(".gz")) {
                return new GZIPInputStream(raw, 1 << 16);
            }
            if (name.endsWith(".zst")) {
                return new BufferedInputStream(new ZstdInputStream(raw), 1 << 16);
            }
            return raw;
        } catch (NoSuchFileException e) {
            throw new UserError("data file " + file + " does not exist");
        } catch (IOException e) {
            throw new UserError("cannot read " + file + ": " + e.getMessage());
        }
    }

    private static String lower(Path p) {
        return p.getFileName().toString().toLowerCase(Locale.ROOT);
    }
}
