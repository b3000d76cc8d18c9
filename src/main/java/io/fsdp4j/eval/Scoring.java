package io.fsdp4j.eval;

import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.model.SingleDeviceModel;
import io.fsdp4j.train.MetricsFile;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * {@code fsdp4j score}: the loss of a Hugging Face model on each sequence of a pre-tokenized JSONL file, one
 * JSON line per sequence ({@code {"index":i,"loss":x,"tokens":n}}, loss null where no position carries a
 * label), then the token-weighted mean over the file ({@code {"mean_loss":x,"tokens":n}}).
 */
public final class Scoring {
    private Scoring() {}

    public static int run(Path modelDir, Path data, PrintStream out) {
        EvalModel model = EvalModel.fromHf(modelDir);
        List<Sequence> sequences = Evaluation.readTokens(data, model.config());
        SingleDeviceModel scorer = model.load();
        double totalLoss = 0;
        long totalTokens = 0;
        for (int i = 0; i < sequences.size(); i++) {
            Evaluation.SequenceLoss loss = Evaluation.sequenceLoss(scorer, CpuBackend.INSTANCE, sequences.get(i));
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
