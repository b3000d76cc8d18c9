package io.fsdp4j.cli;

import io.fsdp4j.UserError;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.train.JobSetup;
import io.fsdp4j.train.TrainingInputs;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The checks {@code train} makes of a config before any work, for {@code train --print-config}: what training
 * would refuse, it refuses too (an unknown preset, a model directory that is not one, a sequence longer than the
 * model's context, a mesh the ranks cannot form, files that are not there).
 */
final class ConfigValidation {
    private ConfigValidation() {}

    /**
     * Checks {@code config} as training would. {@code missingPathsAllowed}: a path that does not exist on this
     * machine (an example's model directory or dataset) is not an error; the checks that would read it are skipped.
     *
     * @throws UserError what training would report first
     */
    static void check(TrainConfig config, boolean missingPathsAllowed) {
        Path modelPath = config.model().path();
        if (modelPath == null || Files.exists(modelPath) || !missingPathsAllowed) {
            ModelConfig model = TrainingInputs.modelConfig(config);
            int seqLen = config.data().seqLen();
            if (seqLen > model.maxPositions()) {
                throw new UserError("data.seq_len " + seqLen + " exceeds the model's context of " + model.maxPositions()
                        + " positions; lower it, or set it to auto");
            }
        }
        if (!missingPathsAllowed) {
            requireExists("data.train", config.data().train());
            requireExists("data.eval", config.data().eval());
            requireExists("checkpoint.resume", config.checkpoint().resumePath());
        }
        JobSetup.mesh(config); // the ranks and the strategy form a mesh
    }

    private static void requireExists(String key, Path path) {
        if (path != null && !Files.exists(path)) {
            throw new UserError(key + " " + path + " does not exist");
        }
    }
}
