package io.fsdp4j.eval;

import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.data.JsonlTokens;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.hf.HfCheckpoint;
import io.fsdp4j.hf.HfConfig;
import io.fsdp4j.model.LlamaModel;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.SingleDeviceModel;
import io.fsdp4j.model.TokenBatch;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import io.fsdp4j.train.MetricsFile;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
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
        CpuBackend cpu = CpuBackend.INSTANCE;
        ModelConfig config = HfConfig.read(modelDir);
        LlamaModel model = new LlamaModel(config, cpu);
        List<Sequence> sequences = JsonlTokens.read(data, config.vocabSize());
        for (int i = 0; i < sequences.size(); i++) {
            if (sequences.get(i).length() > config.maxPositions()) {
                throw new io.fsdp4j.UserError(data + ": sequence " + i + " has " + sequences.get(i).length()
                        + " tokens, more than the model's max_position_embeddings of " + config.maxPositions());
            }
        }
        List<Tensor> params = new ArrayList<>();
        try (HfCheckpoint weights = HfCheckpoint.open(modelDir, model.units())) {
            for (int u = 0; u < model.units().size(); u++) {
                float[] values = new float[Math.toIntExact(model.units().get(u).numel())];
                weights.read(u, 0, values, 0, values.length);
                params.add(cpu.upload(values, values.length));
            }
        }
        SingleDeviceModel scorer = new SingleDeviceModel(model, cpu, params);
        double totalLoss = 0;
        long totalTokens = 0;
        for (int i = 0; i < sequences.size(); i++) {
            Sequence s = sequences.get(i);
            TokenBatch batch = TokenBatch.of(cpu, new int[][] {s.ids()}, new int[][] {s.labels()});
            long tokens = TokenBatch.countTargets(new int[][] {s.labels()});
            double loss = scorer.loss(batch, cpu.allocate(DType.F32, batch.rows()));
            totalLoss += loss;
            totalTokens += tokens;
            Map<String, Object> line = new LinkedHashMap<>();
            line.put("index", i);
            line.put("loss", tokens == 0 ? null : loss / tokens);
            line.put("tokens", tokens);
            out.println(MetricsFile.json(line));
        }
        Map<String, Object> mean = new LinkedHashMap<>();
        mean.put("mean_loss", totalTokens == 0 ? null : totalLoss / totalTokens);
        mean.put("tokens", totalTokens);
        out.println(MetricsFile.json(mean));
        return 0;
    }
}
