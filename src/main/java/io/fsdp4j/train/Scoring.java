package io.fsdp4j.train;

import io.fsdp4j.UserError;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.data.DatasetFormat;
import io.fsdp4j.data.Datasets;
import io.fsdp4j.data.ReadOptions;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.data.Split;
import io.fsdp4j.data.TokenFiles;
import io.fsdp4j.eval.EvalModel;
import io.fsdp4j.eval.Evaluation;
import io.fsdp4j.report.MetricsFile;
import io.fsdp4j.safetensors.NamedTensor;
import io.fsdp4j.safetensors.SafetensorsWriter;
import io.fsdp4j.tensor.DType;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * {@code fsdp4j score}: the loss of a model (a Hugging Face directory or an fsdp4j checkpoint) on each sequence of
 * a data file, one JSON line per sequence ({@code {"index":i,"loss":x,"tokens":n}}, loss null where no position
 * carries a label), then the token-weighted mean over the file ({@code {"mean_loss":x,"tokens":n}}). The data is
 * pre-tokenized JSONL, or anything {@code train} reads ({@link Datasets#documents}: token files, Alpaca, SQuAD,
 * conversations, text, through the model's tokenizer), each document a sequence. It runs on the ranks of
 * {@link EvalJob} ({@code --set dist.*}, {@code fsdp.*}), each scoring its share. With a logits file, the logits of
 * every position are also written, as the fp32 safetensors tensor {@code logits} (B, T, V), for checking against
 * another implementation (tools/golden/check_export.py compares them with transformers').
 */
public final class Scoring {
    private Scoring() {}

    /** On one CPU rank, one sequence a forward, no logits file. */
    public static int run(Path modelDir, Path data, PrintStream out) {
        return run(EvalModel.fromHf(modelDir), data, null, null, EvalJob.config(List.of("dist.device=cpu",
                "dist.ranks=1")), 1, out);
    }

    /**
     * @param logitsOut where to write the logits (sequences of one length only), or null
     * @param tokenizer data in text formats: the --tokenizer given (null: the model's; see
     *                  {@link EvalModel#textTokenizerDir})
     * @param job       the ranks and the sharding ({@link EvalJob#config})
     * @param batchSize sequences of one length per forward on each rank
     */
    public static int run(EvalModel model, Path data, Path logitsOut, String tokenizer, TrainConfig job,
                          int batchSize, PrintStream out) {
        boolean tokens = TokenFiles.isTokenFiles(data);
        List<Sequence> sequences = !tokens && ReadOptions.DEFAULT.formatOf(data) == DatasetFormat.TOKENS
                ? Evaluation.readTokens(data, model.config())
                : Datasets.documents(data, tokens ? null : model.textTokenizerDir(tokenizer), model.config().vocabSize(),
                        model.config().maxPositions(), Split.ALL, ReadOptions.DEFAULT).sequences();
        if (logitsOut != null && sequences.stream().mapToInt(Sequence::length).distinct().count() > 1) {
            throw new UserError(data + ": the sequences differ in length; --logits-out needs sequences of one length");
        }
        record Scores(float[] logits, List<Evaluation.SequenceLoss> losses) {}
        Scores scores = EvalJob.run(job, model, batchSize, e -> new Scores(
                logitsOut == null ? null : e.logits(sequences), e.sequenceLosses(sequences)));
        if (scores == null) { // a process without rank 0: it reports nothing
            return 0;
        }
        if (logitsOut != null) {
            long[] shape = {sequences.size(), sequences.getFirst().length(), model.config().vocabSize()};
            SafetensorsWriter.write(logitsOut, List.of(NamedTensor.of("logits", DType.F32, shape, scores.logits())));
        }
        double totalLoss = 0;
        long totalTokens = 0;
        for (int i = 0; i < sequences.size(); i++) {
            Evaluation.SequenceLoss loss = scores.losses().get(i);
            totalLoss += loss.sum();
            totalTokens += loss.tokens();
            Map<String, Object> line = new LinkedHashMap<>();
            line.put("index", i);
            line.put("loss", loss.tokens() == 0 ? null : loss.mean());
            line.put("tokens", loss.tokens());
            out.println(MetricsFile.json(line));
        }
        Map<String, Object> mean = new LinkedHashMap<>();
        mean.put("mean_loss", totalTokens == 0 ? null : totalLoss / totalTokens);
        mean.put("tokens", totalTokens);
        out.println(MetricsFile.json(mean));
        return 0;
    }
}
