package io.fsdp4j.train;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.fsdp4j.config.DataFormat;
import io.fsdp4j.config.DataSection;
import io.fsdp4j.config.DeviceKind;
import io.fsdp4j.config.TooLong;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.config.TrainOn;
import io.fsdp4j.config.WeightedPath;
import io.fsdp4j.cuda.Cuda;
import io.fsdp4j.cuda.NativeLibraries;
import io.fsdp4j.data.Dataset;
import io.fsdp4j.data.DatasetFormat;
import io.fsdp4j.data.Datasets;
import io.fsdp4j.data.ReadOptions;
import io.fsdp4j.data.Split;
import io.fsdp4j.hf.HfConfig;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.preflight.Fingerprints;
import java.io.PrintStream;
import java.nio.file.Files;
import java.util.List;
import java.util.Locale;

/**
 * What a training config resolves to before any rank starts: the model's config, the training and held-out data
 * (the demo's built-in instructions without {@code data.train}), the rank count fitted to the visible GPUs, and the
 * effective config that checkpoints record.
 */
public final class TrainingInputs {
    private TrainingInputs() {}

    /** The model {@code config} trains: its Hugging Face directory's config.json, or its preset (model.layers of it). */
    public static ModelConfig modelConfig(TrainConfig config) {
        var m = config.model();
        if (m.path() != null) {
            return HfConfig.read(m.path());
        }
        ModelConfig preset = ModelConfig.preset(m.preset());
        return m.layers() > 0 ? preset.withLayers(m.layers()) : preset;
    }

    /** data.train, or the built-in demo's instructions when it is not set. */
    static Dataset trainingData(TrainConfig config, ModelConfig model) {
        var d = config.data();
        int seqLen = DataFit.readLength(config, model); // data.seq_len, or with auto the model's context
        if (d.trainMix() != null) {
            return mix(d.trainMix(), config, model, seqLen, Split.TRAIN);
        }
        return d.train() == null ? Datasets.demo(model.vocabSize(), seqLen, d.pack(), Split.TRAIN)
                : Datasets.load(d.train(), config.model().path(), model.vocabSize(), seqLen, d.pack(), Split.TRAIN,
                        readOptions(d));
    }

    /**
     * What to evaluate on: data.eval (the held-out split of token files); without it, the held-out split of the
     * training token files if they have one, or the demo's held-out instructions; else nothing (null).
     */
    static Dataset evalData(TrainConfig config, ModelConfig model) {
        var d = config.data();
        if (d.evalMix() != null) {
            return mix(d.evalMix(), config, model, d.seqLen(), Split.EVAL);
        }
        if (d.eval() != null) {
            return Datasets.load(d.eval(), config.model().path(), model.vocabSize(), d.seqLen(), d.pack(), Split.EVAL,
                    readOptions(d));
        }
        if (d.train() == null) {
            return Datasets.demo(model.vocabSize(), d.seqLen(), d.pack(), Split.EVAL);
        }
        if (Datasets.hasHeldOut(d.train())) {
            return Datasets.load(d.train(), config.model().path(), model.vocabSize(), d.seqLen(), d.pack(), Split.EVAL,
                    readOptions(d));
        }
        return null;
    }

    /** A weighted mix of datasets (data.train or data.eval as a list of {path, weight}), seeded by train.seed. */
    private static Dataset mix(List<WeightedPath> mix, TrainConfig config, ModelConfig model,
                               int seqLen, Split split) {
        var d = config.data();
        var parts = mix.stream().map(w -> Datasets.load(w.path(), config.model().path(), model.vocabSize(),
                seqLen, d.pack(), split, readOptions(d))).toList();
        return Datasets.mix(parts, mix.stream().mapToDouble(WeightedPath::weight).toArray(),
                config.train().seed());
    }

    /** data.format, data.chat_template and data.train_on, as the data package reads them. */
    private static ReadOptions readOptions(DataSection d) {
        return new ReadOptions(d.format() == DataFormat.AUTO ? null : DatasetFormat.parse(d.format().spelling()),
                d.chatTemplate(), d.trainOn() == TrainOn.ALL, d.tooLong() == TooLong.DROP, d.chatTemplateTimeout());
    }

    /** What became of the documents when cut into sequences, when anything did. */
    static String cutNote(Dataset data) {
        if (data.truncated() == 0 && data.skipped() == 0) {
            return "";
        }
        return String.format(Locale.ROOT, " (%d of %d documents truncated, %d left out: no loss within data.seq_len,"
                        + " or longer with data.too_long=drop)",
                data.truncated(), data.documents(), data.skipped());
    }

    /**
     * With {@code dist.device=auto} on a machine with GPUs, the job runs on them; a rank count above the number
     * of GPUs (such as the demo's default of 2 on a one-GPU machine) is lowered to it, and said so.
     */
    static TrainConfig fitToVisibleGpus(TrainConfig config, PrintStream out) {
        if (config.dist().device() != DeviceKind.AUTO || !NativeLibraries.cudaAvailable() || config.dist().shareGpu()
                || JobSetup.layout(config).multiProcess()) { // every node must count its ranks alike
            return config;
        }
        int gpus = Cuda.deviceCount();
        if (config.dist().ranks() <= gpus) {
            return config;
        }
        out.printf(Locale.ROOT, "fsdp4j: %d GPU(s) visible: running %d rank(s) instead of dist.ranks=%d%n", gpus, gpus,
                config.dist().ranks());
        return config.with("dist.ranks=" + gpus);
    }

    /**
     * The effective config as recorded in checkpoints, with the fingerprint of the training data (its every byte,
     * cached: see {@link Fingerprints}) under {@value ResumeChanges#FINGERPRINTS}, so that a resumed run sees data
     * that changed under the same path.
     */
    static JsonNode effectiveConfigJson(TrainConfig config) {
        var json = (ObjectNode) new ObjectMapper().valueToTree(config.toMap());
        if (config.data().train() != null && Files.exists(config.data().train())) {
            json.putObject(ResumeChanges.FINGERPRINTS).put("data.train", Fingerprints.ofPath(config.data().train()));
        }
        return json;
    }
}
