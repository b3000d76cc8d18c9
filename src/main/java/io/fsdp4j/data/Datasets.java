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
 * files written by {@code fsdp4j prepare}, a pre-tokenized {@code .jsonl}, or a {@code .txt} read as bytes; and
 * the built-in demo's instructions.
 */
public final class Datasets {
    /** The demo's instruction data (Alpaca JSONL, written by tools/demo-data/MakeInstructions.java). */
    public static final String DEMO_TRAIN = "demo/instructions.jsonl";
    public static final String DEMO_EVAL = "demo/instructions-eval.jsonl";
    /** The demo's prompt format: short, for a byte-level model. */
    public static final InstructionPrompt DEMO_PROMPT = InstructionPrompt.COMPACT;

    private Datasets() {}

    /**
     * The sequences of {@code split} of the dataset at {@code path}, each exactly {@code seqLen} tokens: one
     * document per sequence (truncated or padded) or, with {@code pack}, documents packed into windows
     * ({@link SequenceWindows}). {@code vocabSize} is the model's: every id must be below it. A {@code .txt} is
     * cut into consecutive byte windows ({@link TextBytes}) and needs a 256-token vocabulary. A file other than
     * token files is whole in every split.
     */
    public static Dataset load(Path path, int vocabSize, int seqLen, boolean pack, Split split) {
        if (Files.isDirectory(path)) {
            return tokenFiles(TokenFiles.open(path), vocabSize, seqLen, pack, split);
        }
        String name = path.getFileName().toString();
        if (name.endsWith(".jsonl")) {
            List<Sequence> documents = JsonlTokens.read(path, vocabSize);
            return inMemory(path.toString(), documents, List.of(), seqLen, pack);
        }
        if (name.endsWith(".txt")) {
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
        if (!Files.exists(path)) {
            throw new UserError("data file " + path + " does not exist");
        }
        throw new UserError("data file " + path + ": unknown format; give a directory written by 'fsdp4j prepare'"
                + " (Alpaca, SQuAD, text), pre-tokenized .jsonl ({\"input_ids\":[...]} a line) or, for byte-vocabulary"
                + " models, .txt");
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
                DatasetReader.read(resource, in, DatasetFormat.ALPACA, ByteTokenizer.INSTANCE, DEMO_PROMPT, d -> {
                    answers.add(new EvalAnswer(documents.size(), d.id(), promptIds(d.tokens()), d.answers()));
                    documents.add(d.tokens());
                });
            } catch (IOException e) {
                throw new IllegalStateException("cannot read the demo data '" + resource + "'", e);
            }
        }
        return inMemory("built-in demo instructions", documents, answers, seqLen, pack);
    }

    private static Dataset tokenFiles(TokenFiles files, int vocabSize, int seqLen, boolean pack, Split split) {
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
        return cut(files.dir().toString(), files, documents, files.answers(split), seqLen, pack);
    }

    private static Dataset inMemory(String name, List<Sequence> documents, List<EvalAnswer> answers, int seqLen,
                                    boolean pack) {
        int[] all = IntStream.range(0, documents.size()).toArray();
        return cut(name, Documents.of(documents), all, answers, seqLen, pack);
    }

    /** The sequences of {@code documents}; without packing, those with no loss within seq_len are left out. */
    private static Dataset cut(String name, Documents source, int[] documents, List<EvalAnswer> answers, int seqLen,
                               boolean pack) {
        if (pack) {
            return new Dataset(name, SequenceWindows.of(source, documents, seqLen, true), answers, documents.length,
                    0, 0);
        }
        int[] kept = SequenceWindows.withLoss(source, documents, seqLen);
        if (kept.length == 0) {
            throw new UserError(name + ": no document carries a loss within its first " + seqLen + " tokens (the"
                    + " prompts are longer); raise data.seq_len or set data.pack=true");
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
