package io.fsdp4j.data;

import io.fsdp4j.UserError;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.IntStream;

/**
 * The one way in to training and evaluation data ({@code data.train}, {@code data.eval}): a directory of token
 * files written by {@code fsdp4j prepare}, pre-tokenized JSONL, Alpaca or SQuAD JSON tokenized on the fly as
 * {@code prepare} would, or a {@code .txt} read as bytes; and the built-in demo's instructions.
 */
public final class Datasets {
    /** The demo's instruction data (Alpaca JSONL, written by tools/demo-data/MakeInstructions.java). */
    public static final String DEMO_TRAIN = "demo/instructions.jsonl";
    public static final String DEMO_EVAL = "demo/instructions-eval.jsonl";
    /** The demo's prompt format: short, for a byte-level model. */
    public static final InstructionPrompt DEMO_PROMPT = InstructionPrompt.COMPACT;
    /** The prompt format of Alpaca data given directly as data.train or data.eval: that of {@code fsdp4j prepare}. */
    public static final InstructionPrompt DIRECT_PROMPT = Prepare.DEFAULT_PROMPT;

    private Datasets() {}

    /** {@link #load(Path, Path, int, int, boolean, Split)} for a model without a tokenizer (a preset). */
    public static Dataset load(Path path, int vocabSize, int seqLen, boolean pack, Split split) {
        return load(path, null, vocabSize, seqLen, pack, split);
    }

    /**
     * The sequences of {@code split} of the dataset at {@code path}, each exactly {@code seqLen} tokens: one
     * document per sequence (truncated or padded) or, with {@code pack}, documents packed into windows
     * ({@link SequenceWindows}). {@code vocabSize} is the model's: every id must be below it. The format is told
     * from the content ({@link DatasetFormat#detect}): a directory of token files; pre-tokenized JSONL; Alpaca or
     * SQuAD v1.1 JSON, tokenized here exactly as {@code fsdp4j prepare} would with its default prompt
     * ({@link #DIRECT_PROMPT}) and the tokenizer of {@code modelDir} (the model's Hugging Face directory; null
     * for a preset: the byte tokenizer, {@link ByteTokenizer}); a {@code .txt} is cut into consecutive byte windows
     * ({@link TextBytes}) and needs a 256-token vocabulary. A file other than token files is whole in every split.
     */
    public static Dataset load(Path path, Path modelDir, int vocabSize, int seqLen, boolean pack, Split split) {
        return load(path, modelDir, vocabSize, seqLen, pack, split, ReadOptions.DEFAULT);
    }

    /**
     * As {@link #load(Path, Path, int, int, boolean, Split)}, the files read as {@code options} say: a named format
     * ({@code data.format}), a chat template ({@code data.chat_template}) and the tokens of conversations that carry
     * loss ({@code data.train_on}). {@code path} may also be a directory of shards ({@link DatasetFiles}).
     */
    public static Dataset load(Path path, Path modelDir, int vocabSize, int seqLen, boolean pack, Split split,
                               ReadOptions options) {
        if (TokenFiles.isTokenFiles(path) || Files.isDirectory(path) && options.format() == null
                && !hasShards(path)) {
            return tokenFiles(TokenFiles.open(path), vocabSize, seqLen, pack, split, options.dropLong());
        }
        String name = path.getFileName().toString();
        if (options.format() == null && name.endsWith(".txt")) {
            requireByteVocabulary(vocabSize, "plain text " + path);
            String text;
            try {
                text = Files.readString(path);
            } catch (NoSuchFileException e) {
                throw new UserError("data file " + path + " does not exist");
            } catch (IOException e) {
                throw new UserError("cannot read " + path + ": " + e.getMessage());
            }
            List<Sequence> sequences = TextBytes.sequences(text, seqLen);
            if (sequences.isEmpty()) {
                throw new UserError("plain text " + path + " is shorter than one sequence (data.seq_len " + seqLen
                        + " bytes)");
            }
            return new Dataset(path.toString(), sequences, List.of(), 1, 0, 0);
        }
        DatasetFormat format = options.formatOf(path);
        if (format == DatasetFormat.TOKENS && Files.isRegularFile(path)) {
            List<Sequence> documents = JsonlTokens.read(path, vocabSize);
            return inMemory(path.toString(), documents, List.of(), seqLen, pack, options.dropLong());
        }
        try (TextTokenizer tokenizer = directTokenizer(path, format, modelDir, vocabSize)) {
            List<Sequence> documents = new ArrayList<>();
            List<EvalAnswer> answers = new ArrayList<>();
            DatasetReader.read(path, format, tokenizer, DIRECT_PROMPT, options, collect(documents, answers));
            if (documents.isEmpty()) {
                throw new UserError(path + " has no usable example");
            }
            return inMemory(path.toString(), documents, answers, seqLen, pack, options.dropLong());
        }
    }

    /**
     * The documents of {@code path} whole, for evaluation ({@code fsdp4j eval}, {@code fsdp4j score}): read as
     * {@link #load(Path, Path, int, int, boolean, Split, ReadOptions)} reads them (token files' {@code split},
     * pre-tokenized JSONL, Alpaca, SQuAD, conversations and the other formats tokenized with the tokenizer of
     * {@code modelDir}, or bytes for a model without one), one sequence per document, unpadded; a document longer than
     * {@code maxLength} is cut to it (counted in {@link Dataset#truncated}). Plain text ({@code .txt}) is cut into
     * consecutive windows of {@code maxLength} bytes. Every document is kept, with or without a label.
     */
    public static Dataset documents(Path path, Path modelDir, int vocabSize, int maxLength, Split split,
                                    ReadOptions options) {
        String name = path.toString();
        List<Sequence> documents = new ArrayList<>();
        List<EvalAnswer> answers = new ArrayList<>();
        if (TokenFiles.isTokenFiles(path) || Files.isDirectory(path) && options.format() == null && !hasShards(path)) {
            TokenFiles files = TokenFiles.open(path);
            if (files.meta().vocabSize() > vocabSize) {
                throw new UserError("token files " + files.dir() + " were prepared with the tokenizer "
                        + files.meta().tokenizer() + " of " + files.meta().vocabSize() + " tokens; the model's"
                        + " vocabulary has " + vocabSize);
            }
            for (int d : files.documents(split)) {
                documents.add(files.document(d));
            }
            answers.addAll(files.answers(split));
        } else if (options.format() == null && path.getFileName().toString().endsWith(".txt")) {
            requireByteVocabulary(vocabSize, "plain text " + path);
            try {
                documents.addAll(TextBytes.sequences(Files.readString(path), maxLength));
            } catch (NoSuchFileException e) {
                throw new UserError("data file " + path + " does not exist");
            } catch (IOException e) {
                throw new UserError("cannot read " + path + ": " + e.getMessage());
            }
        } else if (options.formatOf(path) == DatasetFormat.TOKENS && Files.isRegularFile(path)) {
            documents.addAll(JsonlTokens.read(path, vocabSize));
        } else {
            try (TextTokenizer tokenizer = directTokenizer(path, options.formatOf(path), modelDir, vocabSize)) {
                DatasetReader.read(path, options.formatOf(path), tokenizer, DIRECT_PROMPT, options, d -> {
                    answers.add(new EvalAnswer(documents.size(), d.id(), promptIds(d.tokens()), d.answers()));
                    documents.add(d.tokens());
                });
            }
        }
        if (documents.isEmpty()) {
            throw new UserError(path + " holds no documents" + (TokenFiles.isTokenFiles(path) ? " in the "
                    + split.name().toLowerCase(java.util.Locale.ROOT) + " split" : ""));
        }
        int truncated = 0;
        for (int i = 0; i < documents.size(); i++) {
            if (documents.get(i).length() > maxLength) {
                documents.set(i, documents.get(i).fitTo(maxLength));
                truncated++;
            }
        }
        return new Dataset(name, documents, answers, documents.size(), truncated, 0);
    }

    /**
     * The tokenizer of Alpaca or SQuAD data given directly: that of the model directory, or for a model without
     * one (a preset) the byte tokenizer, as {@code fsdp4j prepare --tokenizer bytes}.
     */
    private static TextTokenizer directTokenizer(Path path, DatasetFormat format, Path modelDir, int vocabSize) {
        String what = switch (format) {
            case SQUAD -> "SQuAD data ";
            case ALPACA -> "Alpaca data ";
            case MESSAGES, SHAREGPT -> "conversation data ";
            default -> format.key() + " data ";
        } + path;
        if (modelDir == null) {
            if (vocabSize != ByteTokenizer.VOCAB) {
                throw new UserError(what + " is tokenized with the model's tokenizer, and this model (a preset of "
                        + vocabSize + " tokens) has none: set model.path to a model directory with a tokenizer.json,"
                        + " or give the directory that 'fsdp4j prepare --tokenizer PATH' writes");
            }
            return ByteTokenizer.INSTANCE;
        }
        if (!Files.isRegularFile(modelDir.resolve("tokenizer.json"))) {
            throw new UserError(what + " is tokenized with the model's tokenizer, but model directory " + modelDir
                    + " has no tokenizer.json; tokenize it with 'fsdp4j prepare --tokenizer PATH' and give the"
                    + " directory it writes");
        }
        TextTokenizer tokenizer = TextTokenizer.load(modelDir.toString());
        if (tokenizer.vocabSize() > vocabSize) {
            tokenizer.close();
            throw new UserError("the tokenizer of " + modelDir + " has " + tokenizer.vocabSize() + " tokens; the"
                    + " model's vocabulary has " + vocabSize);
        }
        return tokenizer;
    }

    /**
     * Collects documents and, for each, its prompt and answers, as {@link Prepare} writes them: a document that
     * carries no loss at all is left out (as {@code prepare} drops it).
     */
    private static java.util.function.Consumer<DatasetReader.Document> collect(List<Sequence> documents,
                                                                             List<EvalAnswer> answers) {
        return d -> {
            if (!Prepare.hasLoss(d.tokens(), d.tokens().length())) {
                return;
            }
            answers.add(new EvalAnswer(documents.size(), d.id(), promptIds(d.tokens()), d.answers()));
            documents.add(d.tokens());
        };
    }

    /**
     * A weighted mix of datasets ({@code data.train} as a list of {@code {path, weight}}): of N sequences in all (the
     * parts' total), part i gives {@code round(N * w_i / sum(w))}, at least one, taken from its sequences in an order
     * shuffled by (seed, i) and repeated where it gives more than it has. A pure function of the parts, the weights
     * and the seed, so that with {@link BatchSampler}'s order, itself a function of (seed, step), a resumed run
     * continues the exact order.
     */
    public static Dataset mix(List<Dataset> parts, double[] weights, long seed) {
        if (parts.size() != weights.length || parts.isEmpty()) {
            throw new IllegalArgumentException(parts.size() + " parts, " + weights.length + " weights");
        }
        long total = 0;
        double weightSum = 0;
        for (int i = 0; i < parts.size(); i++) {
            total += parts.get(i).sequences().size();
            weightSum += weights[i];
        }
        int[] counts = new int[parts.size()];
        int[][] orders = new int[parts.size()][];
        for (int i = 0; i < parts.size(); i++) {
            counts[i] = (int) Math.max(1, Math.round(total * weights[i] / weightSum));
            int size = parts.get(i).sequences().size();
            int[] order = IntStream.range(0, size).toArray();
            var random = new java.util.SplittableRandom(seed * 1_000_003L + 7919L * (i + 1));
            for (int k = size - 1; k > 0; k--) {
                int j = random.nextInt(k + 1);
                int t = order[k];
                order[k] = order[j];
                order[j] = t;
            }
            orders[i] = order;
        }
        int[] starts = new int[parts.size() + 1];
        for (int i = 0; i < parts.size(); i++) {
            starts[i + 1] = Math.addExact(starts[i], counts[i]);
        }
        List<Sequence> sequences = new java.util.AbstractList<>() {
            @Override
            public Sequence get(int index) {
                int i = java.util.Arrays.binarySearch(starts, index);
                i = i >= 0 ? i : -i - 2; // the part whose range holds index (every part gives at least one)
                int k = index - starts[i];
                return parts.get(i).sequences().get(orders[i][k % orders[i].length]);
            }

            @Override
            public int size() {
                return starts[parts.size()];
            }
        };
        StringBuilder name = new StringBuilder("mix of ");
        int documents = 0, truncated = 0, skipped = 0;
        for (int i = 0; i < parts.size(); i++) {
            Dataset p = parts.get(i);
            name.append(i == 0 ? "" : ", ").append(p.name()).append(" (").append(counts[i]).append(" sequences)");
            documents += p.documents();
            truncated += p.truncated();
            skipped += p.skipped();
        }
        return new Dataset(name.toString(), sequences, List.of(), documents, truncated, skipped);
    }

    /** True when the directory holds dataset files (shards), as opposed to token files. */
    private static boolean hasShards(Path dir) {
        try (var entries = Files.list(dir)) {
            return entries.anyMatch(p -> DatasetFiles.SHARD_SUFFIXES.stream()
                    .anyMatch(s -> p.getFileName().toString().toLowerCase(java.util.Locale.ROOT).endsWith(s)));
        } catch (IOException e) {
            return false;
        }
    }

    /** True when {@code path} is token files with documents held out for evaluation ({@link Split#EVAL}). */
    public static boolean hasHeldOut(Path path) {
        return TokenFiles.isTokenFiles(path) && TokenFilesMeta.read(path).evalDocuments().length > 0;
    }

    /**
     * The built-in demo's instructions ({@link #DEMO_TRAIN}; {@link Split#EVAL}: the held-out {@link #DEMO_EVAL}),
     * as bytes with the {@link #DEMO_PROMPT} prompt; for models of a 256-token vocabulary.
     */
    public static Dataset demo(int vocabSize, int seqLen, boolean pack, Split split) {
        requireByteVocabulary(vocabSize, "the built-in demo instructions");
        List<Sequence> documents = new ArrayList<>();
        List<EvalAnswer> answers = new ArrayList<>();
        List<String> resources = switch (split) {
            case TRAIN -> List.of(DEMO_TRAIN);
            case EVAL -> List.of(DEMO_EVAL);
            case ALL -> List.of(DEMO_TRAIN, DEMO_EVAL);
        };
        for (String resource : resources) {
            try (InputStream in = Datasets.class.getClassLoader().getResourceAsStream(resource)) {
                if (in == null) {
                    throw new IllegalStateException("the demo data '" + resource + "' is missing from the build");
                }
                DatasetReader.read(resource, in, DatasetFormat.ALPACA, ByteTokenizer.INSTANCE, DEMO_PROMPT,
                        collect(documents, answers));
            } catch (IOException e) {
                throw new IllegalStateException("cannot read the demo data '" + resource + "'", e);
            }
        }
        return inMemory("built-in demo instructions", documents, answers, seqLen, pack, false);
    }

    private static Dataset tokenFiles(TokenFiles files, int vocabSize, int seqLen, boolean pack, Split split,
                                      boolean dropLong) {
        TokenFilesMeta meta = files.meta();
        if (meta.vocabSize() > vocabSize) {
            throw new UserError("token files " + files.dir() + " were prepared with the tokenizer " + meta.tokenizer()
                    + " of " + meta.vocabSize() + " tokens; the model's vocabulary has " + vocabSize);
        }
        int[] documents = files.documents(split);
        if (documents.length == 0) {
            throw new UserError("token files " + files.dir() + " hold no " + (split == Split.EVAL
                    ? "held-out documents (prepared with --eval-fraction 0; prepare an evaluation set with"
                            + " --eval-fraction 1)"
                    : "training documents (prepared with --eval-fraction 1, all held out)"));
        }
        return cut(files.dir().toString(), files, documents, files.answers(split), seqLen, pack, dropLong);
    }

    private static Dataset inMemory(String name, List<Sequence> documents, List<EvalAnswer> answers, int seqLen,
                                    boolean pack, boolean dropLong) {
        int[] all = IntStream.range(0, documents.size()).toArray();
        return cut(name, Documents.of(documents), all, answers, seqLen, pack, dropLong);
    }

    /**
     * The sequences of {@code documents}: packed whole ({@link SequenceWindows}), or one per document, those with no
     * loss within seq_len left out. A document longer than seq_len is truncated (counted in
     * {@link Dataset#truncated}) or with {@code dropLong} left out (counted in {@link Dataset#skipped}).
     */
    private static Dataset cut(String name, Documents source, int[] documents, List<EvalAnswer> answers, int seqLen,
                               boolean pack, boolean dropLong) {
        int longer = SequenceWindows.longerThan(source, documents, seqLen);
        if (pack) {
            List<Sequence> windows = SequenceWindows.of(source, documents, seqLen, true, dropLong);
            if (windows.isEmpty()) {
                throw new UserError(name + ": every document is longer than data.seq_len " + seqLen + " and"
                        + " data.too_long is drop; raise data.seq_len or set data.too_long=truncate");
            }
            return new Dataset(name, windows, answers, documents.length, dropLong ? 0 : longer, dropLong ? longer : 0);
        }
        int[] kept = SequenceWindows.withLoss(source, documents, seqLen);
        if (dropLong) {
            kept = java.util.Arrays.stream(kept).filter(d -> source.length(d) <= seqLen).toArray();
        }
        if (kept.length == 0) {
            throw new UserError(name + ": no document carries a loss within its first " + seqLen + " tokens (the"
                    + " prompts are longer" + (dropLong ? ", or the documents longer with data.too_long=drop" : "")
                    + "); raise data.seq_len or set data.pack=true");
        }
        return new Dataset(name, SequenceWindows.of(source, kept, seqLen, false), answers, documents.length,
                SequenceWindows.longerThan(source, kept, seqLen), documents.length - kept.length);
    }

    /** The prompt of a prompt-and-response document: its ids up to the first label with a loss. */
    static int[] promptIds(Sequence document) {
        int n = 0;
        while (n < document.length() && document.labels()[n] == io.fsdp4j.model.TokenBatch.IGNORE) {
            n++;
        }
        return java.util.Arrays.copyOf(document.ids(), n);
    }

    private static void requireByteVocabulary(int vocabSize, String what) {
        if (vocabSize != TextBytes.VOCAB) {
            throw new UserError(what + " is read as bytes, which needs a model with a 256-token vocabulary (the 'tiny'"
                    + " preset); this model has " + vocabSize + "; give token files from 'fsdp4j prepare' or"
                    + " pre-tokenized .jsonl");
        }
    }
}
