package io.fsdp4j.data;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.UserError;
import io.fsdp4j.model.TokenBatch;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.stream.Stream;

/**
 * {@code fsdp4j prepare}: tokenizes a dataset once into a directory of token files ({@link TokenFiles}). The
 * directory is written under a temporary name beside {@code out} and renamed when complete, so a crash never
 * leaves token files that look whole.
 */
public final class Prepare {
    private static final ObjectMapper JSON = new ObjectMapper();
    /** The prompt format of Alpaca data when none is chosen ({@code --prompt alpaca}). */
    public static final InstructionPrompt DEFAULT_PROMPT = InstructionPrompt.ALPACA;

    /**
     * @param input        the dataset file
     * @param format       its format
     * @param tokenizer    {@code "bytes"}, a {@code tokenizer.json} or a model directory
     * @param out          the directory to write
     * @param seqLen       when positive: leave out examples with no loss within their first {@code seqLen} tokens
     * @param evalFraction the fraction of documents (SQuAD: of paragraphs) held out for evaluation, in [0, 1]
     * @param seed         draws the held-out documents
     * @param prompt       the prompt format of Alpaca data
     * @param overwrite    replace {@code out} if it holds token files already
     * @param chat         how conversations are rendered and labelled (its format is unused: {@code format} rules)
     */
    public record Options(Path input, DatasetFormat format, String tokenizer, Path out, int seqLen, double evalFraction,
                          long seed, InstructionPrompt prompt, boolean overwrite, ReadOptions chat) {
        /** With the tokenizer's chat template, training on the assistant's turns. */
        public Options(Path input, DatasetFormat format, String tokenizer, Path out, int seqLen, double evalFraction,
                       long seed, InstructionPrompt prompt, boolean overwrite) {
            this(input, format, tokenizer, out, seqLen, evalFraction, seed, prompt, overwrite, ReadOptions.DEFAULT);
        }

        public Options {
            if (!(evalFraction >= 0 && evalFraction <= 1)) {
                throw new UserError("--eval-fraction must lie in [0, 1], got " + evalFraction);
            }
            if (seqLen < 0) {
                throw new UserError("--seq-len must be positive, got " + seqLen);
            }
        }
    }

    private Prepare() {}

    /** Writes the token files and returns their {@code meta.json}. */
    public static TokenFilesMeta run(Options o) {
        return run(o, null);
    }

    /**
     * Writes the token files and returns their {@code meta.json}: the input streams through (a file larger than
     * memory too), tokenized on all cores in file order, with a line of progress on {@code progress} (when not
     * null) every few seconds.
     */
    public static TokenFilesMeta run(Options o, java.io.PrintStream progress) {
        if (!Files.exists(o.input())) {
            throw new UserError("input file " + o.input() + " does not exist");
        }
        Path out = o.out().toAbsolutePath().normalize();
        try {
            List<String> left = removeStale(out);
            if (!left.isEmpty() && progress != null) {
                progress.println("fsdp4j: prepare: removed what an interrupted prepare of " + out + " left: "
                        + String.join(", ", left));
            }
        } catch (IOException e) {
            throw new UserError("cannot clean up beside " + out + ": " + e.getMessage());
        }
        checkOut(out, o.overwrite());
        String sha256 = sha256(o.input());
        Path tmp;
        try {
            Files.createDirectories(out.getParent());
            String name = "." + out.getFileName() + ".tmp-" + host() + "-" + ProcessHandle.current().pid() + "-"
                    + System.nanoTime();
            tmp = Files.createDirectory(out.resolveSibling(name));
        } catch (IOException e) {
            throw new UserError("cannot create " + out + ": " + e.getMessage());
        }
        try (TextTokenizer tokenizer = TextTokenizer.load(o.tokenizer())) {
            TokenFilesMeta meta = write(o, tokenizer, sha256, tmp, progress);
            install(tmp, out, o.overwrite());
            return meta;
        } catch (IOException e) {
            throw new UserError("cannot write token files in " + out.getParent() + ": " + e.getMessage());
        } finally {
            deleteTree(tmp);
        }
    }

    private static TokenFilesMeta write(Options o, TextTokenizer tokenizer, String sha256, Path dir,
                                        java.io.PrintStream progress) throws IOException {
        boolean withAnswers = o.format() == DatasetFormat.ALPACA || o.format() == DatasetFormat.SQUAD;
        var groups = new IntList();
        int[] dropped = {0};
        int threads = Math.max(1, Runtime.getRuntime().availableProcessors());
        long started = System.nanoTime();
        long[] lastReport = {started};
        try (var files = new TokenFileWriter(dir);
             BufferedWriter answers = withAnswers ? Files.newBufferedWriter(dir.resolve(TokenFiles.ANSWERS)) : null;
             var pool = java.util.concurrent.Executors.newFixedThreadPool(threads, r -> {
                 Thread t = new Thread(r, "fsdp4j-prepare");
                 t.setDaemon(true);
                 return t;
             })) {
            DatasetReader.read(o.input(), o.format(), tokenizer, o.prompt(), o.chat(), d -> {
                long now = System.nanoTime();
                if (progress != null && now - lastReport[0] > 5_000_000_000L) {
                    lastReport[0] = now;
                    progress.printf(java.util.Locale.ROOT, "prepare: %,d examples, %,d tokens, %.0f tokens/s%n",
                            files.documents() + dropped[0], files.tokens(), files.tokens() / ((now - started) / 1e9));
                }
                Sequence s = d.tokens();
                if (!hasLoss(s, o.seqLen() > 0 ? o.seqLen() : s.length())) {
                    dropped[0]++;
                    return;
                }
                try {
                    int index = files.append(s);
                    groups.add(d.group());
                    if (answers != null) {
                        Map<String, Object> line = new LinkedHashMap<>();
                        line.put("document", index);
                        line.put("id", d.id());
                        line.put("prompt_tokens", Datasets.promptIds(s).length);
                        line.put("answers", d.answers());
                        answers.write(JSON.writeValueAsString(line));
                        answers.newLine();
                    }
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            }, threads > 1 ? pool : null);
            if (files.documents() == 0) {
                throw new UserError(o.input() + " has no usable example" + (dropped[0] == 0 ? ""
                        : " (" + dropped[0] + " examples carry no loss" + (o.seqLen() > 0 ? " within their first "
                        + o.seqLen() + " tokens" : "") + ")"));
            }
            files.close();
            var meta = new TokenFilesMeta(o.format().key(), promptKey(o), tokenizer.name(), tokenizer.vocabSize(),
                    tokenizer.eosId().orElse(-1), o.input().toAbsolutePath().normalize().toString(), sha256,
                    files.documents(), files.tokens(), files.lossTokens(), dropped[0], o.seqLen(), o.evalFraction(),
                    o.seed(), heldOut(groups.toArray(), o.evalFraction(), o.seed()),
                    withAnswers ? TokenFiles.ANSWERS : null);
            meta.write(dir);
            return meta;
        } catch (UncheckedIOException e) {
            throw e.getCause();
        }
    }

    private static String promptKey(Options o) {
        return switch (o.format()) {
            case ALPACA -> o.prompt().key();
            case SQUAD -> "squad";
            case MESSAGES, SHAREGPT -> o.chat().chatTemplate() == null ? "chat_template"
                    : "chat_template:" + o.chat().chatTemplate().toAbsolutePath().normalize();
            case PROMPT_COMPLETION, TEXT, TOKENS -> null;
        };
    }

    /** True when a label other than -100 lies at a position 1..limit-1 (position 0 is never predicted). */
    static boolean hasLoss(Sequence s, int limit) {
        for (int p = 1; p < Math.min(limit, s.length()); p++) {
            if (s.labels()[p] != TokenBatch.IGNORE) {
                return true;
            }
        }
        return false;
    }

    /**
     * The documents held out for evaluation: the groups (SQuAD: paragraphs; otherwise documents) are shuffled by
     * {@code seed} and the first {@code round(fraction * groups)} held out (for a fraction strictly between 0 and 1:
     * at least one and not all; a single group is not held out). The same data and seed hold out the same documents.
     *
     * @param groups each document's group, in document order
     */
    static int[] heldOut(int[] groups, double fraction, long seed) {
        int[] distinct = Arrays.stream(groups).distinct().toArray();
        int g = distinct.length;
        int k = (int) Math.round(fraction * g);
        if (fraction > 0 && fraction < 1) {
            k = g >= 2 ? Math.clamp(k, 1, g - 1) : 0; // some of each split; a single group is trained on
        }
        int[] order = distinct.clone();
        SplittableRandom random = new SplittableRandom(seed);
        for (int i = g - 1; i > 0; i--) {
            int j = random.nextInt(i + 1);
            int t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        var chosen = new java.util.HashSet<Integer>();
        for (int i = 0; i < k; i++) {
            chosen.add(order[i]);
        }
        var held = new IntList();
        for (int d = 0; d < groups.length; d++) {
            if (chosen.contains(groups[d])) {
                held.add(d);
            }
        }
        return held.toArray();
    }

    private static void checkOut(Path out, boolean overwrite) {
        if (!Files.exists(out) || isEmptyDirectory(out)) {
            return;
        }
        if (!TokenFiles.isTokenFiles(out)) {
            throw new UserError("--out " + out + " exists and does not hold token files; give a new directory");
        }
        if (!overwrite) {
            throw new UserError("--out " + out + " holds token files already; pass --overwrite to replace them");
        }
    }

    /**
     * Removes what a prepare of {@code out} that did not finish (killed, crashed, out of disk) left beside it, and
     * returns what it did, in words. Its temporary directory {@code .NAME.tmp-HOST-PID-N} is removed when PID is a
     * process of this host no longer running (one of another host, or still running, is left alone); a replaced
     * output {@code .NAME.old-*} is removed when {@code out} exists, and put back as {@code out} when the crash came
     * between the two renames that replace it (nothing saved is lost).
     */
    static List<String> removeStale(Path out) throws IOException {
        List<String> done = new ArrayList<>();
        if (!Files.isDirectory(out.getParent())) {
            return done;
        }
        String tmpPrefix = "." + out.getFileName() + ".tmp-", oldPrefix = "." + out.getFileName() + ".old-";
        List<Path> siblings;
        try (Stream<Path> list = Files.list(out.getParent())) {
            siblings = list.filter(p -> p.getFileName().toString().startsWith(tmpPrefix)
                    || p.getFileName().toString().startsWith(oldPrefix)).sorted().toList();
        }
        for (Path p : siblings) {
            String name = p.getFileName().toString();
            if (name.startsWith(tmpPrefix)) {
                String[] parts = name.substring(tmpPrefix.length()).split("-");
                if (parts.length < 2) {
                    continue; // not a name prepare gives
                }
                // HOST-PID-N; PID-N from before the host was named
                String host = parts.length >= 3 ? String.join("-", Arrays.copyOf(parts, parts.length - 2)) : host();
                long pid;
                try {
                    pid = Long.parseLong(parts[parts.length - 2]);
                } catch (NumberFormatException e) {
                    continue;
                }
                boolean running = ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false);
                if (host.equals(host()) && !running) {
                    long bytes = sizeOf(p);
                    deleteTree(p);
                    done.add(String.format(java.util.Locale.ROOT, "%s (%.1f MB, of process %d)", name, bytes / 1e6,
                            pid));
                }
            } else if (Files.exists(out)) {
                deleteTree(p);
                done.add(name + " (the output it replaced)");
            } else if (Files.isDirectory(p.resolve("data"))) {
                Files.move(p.resolve("data"), out, StandardCopyOption.ATOMIC_MOVE);
                deleteTree(p);
                done.add(name + " (the output it was replacing, put back as " + out.getFileName() + ")");
            }
        }
        return done;
    }

    private static long sizeOf(Path dir) {
        try (Stream<Path> walk = Files.walk(dir)) {
            return walk.filter(Files::isRegularFile).mapToLong(f -> f.toFile().length()).sum();
        } catch (IOException | java.io.UncheckedIOException e) {
            return 0;
        }
    }

    /** This host's name, as it goes into a file name. */
    static String host() {
        try {
            return java.net.InetAddress.getLocalHost().getHostName().replaceAll("[^A-Za-z0-9._]", "_");
        } catch (IOException e) {
            return "localhost";
        }
    }

    /** Renames the complete {@code tmp} to {@code out}; replaced token files are deleted only after the rename. */
    private static void install(Path tmp, Path out, boolean overwrite) throws IOException {
        if (Files.exists(out) && isEmptyDirectory(out)) {
            Files.delete(out);
        }
        if (!Files.exists(out)) {
            try {
                Files.move(tmp, out, StandardCopyOption.ATOMIC_MOVE);
                return;
            } catch (FileAlreadyExistsException e) {
                throw new UserError("--out " + out + " was created by someone else while preparing");
            }
        }
        checkOut(out, overwrite);
        Path old = Files.createTempDirectory(out.getParent(), "." + out.getFileName() + ".old-");
        Files.move(out, old.resolve("data"), StandardCopyOption.ATOMIC_MOVE);
        Files.move(tmp, out, StandardCopyOption.ATOMIC_MOVE);
        deleteTree(old);
    }

    private static boolean isEmptyDirectory(Path dir) {
        if (!Files.isDirectory(dir)) {
            return false;
        }
        try (Stream<Path> entries = Files.list(dir)) {
            return entries.findAny().isEmpty();
        } catch (IOException e) {
            return false;
        }
    }

    private static void deleteTree(Path root) {
        if (!Files.exists(root)) {
            return;
        }
        try (Stream<Path> walk = Files.walk(root)) {
            for (Path p : walk.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        } catch (IOException e) {
            // a leftover temporary directory (.NAME.tmp-HOST-PID-N) is removed by the next prepare of NAME
        }
    }

    /** The SHA-256 of the file's bytes; of a directory of shards, of their bytes one after another in name order. */
    static String sha256(Path path) {
        MessageDigest digest;
        try {
            digest = MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
        for (Path file : DatasetFiles.shards(path)) {
            digest(file, digest);
        }
        return HexFormat.of().formatHex(digest.digest());
    }

    private static void digest(Path file, MessageDigest digest) {
        try (InputStream in = Files.newInputStream(file)) {
            byte[] buffer = new byte[1 << 16];
            for (int n = in.read(buffer); n >= 0; n = in.read(buffer)) {
                digest.update(buffer, 0, n);
            }
        } catch (NoSuchFileException e) {
            throw new UserError("input file " + file + " does not exist");
        } catch (IOException e) {
            throw new UserError("cannot read " + file + ": " + e.getMessage());
        }
    }

    /** A growable int array. */
    private static final class IntList {
        private int[] values = new int[1024];
        private int size;

        void add(int v) {
            if (size == values.length) {
                values = Arrays.copyOf(values, size * 2);
            }
            values[size++] = v;
        }

        int[] toArray() {
            return Arrays.copyOf(values, size);
        }
    }

    /** The summary that {@code fsdp4j prepare} prints. */
    public static Map<String, Object> summary(Path out, TokenFilesMeta meta) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("out", out.toString());
        m.put("format", meta.format());
        m.put("documents", meta.documents());
        m.put("eval_documents", meta.evalDocuments().length);
        m.put("tokens", meta.tokens());
        m.put("loss_tokens", meta.lossTokens());
        m.put("dropped", meta.dropped());
        m.put("vocab_size", meta.vocabSize());
        return m;
    }
}
