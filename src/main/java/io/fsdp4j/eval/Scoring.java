package io.fsdp4j.eval;

import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.UserError;
import io.fsdp4j.model.SingleDeviceModel;
import io.fsdp4j.model.TokenBatch;
import io.fsdp4j.safetensors.NamedTensor;
import io.fsdp4j.safetensors.SafetensorsWriter;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.report.MetricsFile;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * {@code fsdp4j score}: the loss of a Hugging Face model on each sequence of a pre-tokenized JSONL file, one
 * JSON line per sequence ({@code {"index":i,"loss":x,"tokens":n}}, loss null where no position carries a
 * label), then the token-weighted mean over the file ({@code {"mean_loss":x,"tokens":n}}). With a logits file, the
 * fp32 logits of every position are also written, as the safetensors tensor {@code logits} (B, T, V), for checking
 * against another implementation (tools/golden/check_export.py compares them with transformers').
 */
public final class Scoring {
    private Scoring() {}

    public static int run(Path modelDir, Path data, PrintStream out) {
        return run(modelDir, data, null, out);
    }

    /** @param logitsOut where to write the logits (sequences of one length only), or null */
    public static int run(Path modelDir, Path data, Path logitsOut, PrintStream out) {
        EvalModel model = EvalModel.fromHf(modelDir);
        List<Sequence> sequences = Evaluation.readTokens(data, model.config());
        if (logitsOut != null && sequences.stream().mapToInt(Sequence::length).distinct().count() > 1) {
            throw new UserError(data + ": the sequences differ in length; --logits-out needs sequences of one length");
        }
        SingleDeviceModel scorer = model.load();
        if (logitsOut != null) {
            writeLogits(scorer, sequences, logitsOut);
        }
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

    private static void writeLogits(SingleDeviceModel model, List<Sequence> sequences, Path file) {
        CpuBackend cpu = CpuBackend.INSTANCE;
        int[][] ids = sequences.stream().map(Sequence::ids).toArray(int[][]::new);
        TokenBatch batch = TokenBatch.of(cpu, ids, ids);
        float[] logits = cpu.toFloats(model.logits(batch));
        long[] shape = {ids.length, ids[0].length, model.model().config().vocabSize()};
        SafetensorsWriter.write(file, List.of(NamedTensor.of("logits", DType.F32, shape, logits)));
    }
}
