package io.fsdp4j.checkpoint;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.databind.JsonNode;
import io.fsdp4j.model.ModelConfig;
import java.util.List;
import java.util.Map;

/**
 * The {@code index.json} of a checkpoint directory: what was saved, by whom, and where each element range of
 * every unit lives. Since version 2 the shard files name their tensors by the model's parameter names
 * ({@link ShardFormat}), and the index maps each name to the shards that hold a slice of it ({@link Shard#tensors});
 * version 1 named them {@code units.<u>.params} (and {@code .exp_avg}, {@code .exp_avg_sq}), one tensor a unit, and
 * still loads.
 *
 * @param format always {@value #FORMAT}
 * @param version the layout version: {@value #VERSION} when saved by this fsdp4j, or {@value #VERSION_UNITS}
 * @param step optimizer steps completed when saved (training resumes at step + 1)
 * @param model the model's architecture, enough to rebuild its layout
 * @param modelPath the Hugging Face directory the run started from, or null for a preset
 * @param units each unit's name and element count
 * @param shards the shard files and the range of each unit in them
 * @param worldSize ranks of the run that saved it
 * @param shardSize ranks per shard group of that run
 * @param strategy its sharding strategy
 * @param config the run's effective config
 * @param optimizerSteps AdamW updates made (fewer than {@code step} when steps were skipped for a loss that was not
 *                       finite); null in checkpoints of earlier versions: {@code step}
 * @param finite whether every saved value (parameters and moments) is finite; null in checkpoints of earlier versions,
 *               which are taken as finite
 * @param tokensSeen input tokens of every step up to {@code step}; null in checkpoints of earlier versions
 * @param lossScale the dynamic loss scale for the step after {@code step} and the finite steps in a row behind it
 *                  ({@code fsdp.loss_scale} dynamic); null without dynamic scaling and in earlier versions
 */
public record CheckpointIndex(String format, int version, int step, ModelConfig model, String modelPath,
                              List<Unit> units, List<Shard> shards, int worldSize, int shardSize, String strategy,
                              JsonNode config, Long optimizerSteps, Boolean finite, Long tokensSeen,
                              @JsonInclude(JsonInclude.Include.NON_NULL) LossScale lossScale) {
    public static final String FORMAT = "fsdp4j-checkpoint";
    public static final int VERSION = 2;
    /** The version whose shard files hold one tensor a unit, {@code units.<u>.params}. */
    public static final int VERSION_UNITS = 1;

    /** An index that does not count tokens (as checkpoints of earlier versions did not). */
    public CheckpointIndex(String format, int version, int step, ModelConfig model, String modelPath, List<Unit> units,
                           List<Shard> shards, int worldSize, int shardSize, String strategy, JsonNode config,
                           Long optimizerSteps, Boolean finite) {
        this(format, version, step, model, modelPath, units, shards, worldSize, shardSize, strategy, config,
                optimizerSteps, finite, null, null);
    }

    /** A dynamic loss scale's state: its value and GradScaler's growth tracker. */
    public record LossScale(double scale, int cleanSteps) {}

    /** AdamW updates made before this checkpoint was saved. */
    public long optimizerStepsTaken() {
        return optimizerSteps != null ? optimizerSteps : step;
    }

    /** Whether the saved state is finite (checkpoints of earlier versions did not say, and are taken as finite). */
    public boolean isFinite() {
        return finite == null || finite;
    }

    /** A unit of the model's layout, with its parameters (null in version 1). */
    @JsonInclude(JsonInclude.Include.NON_NULL)
    public record Unit(String name, long numel, List<Param> params) {
        public Unit(String name, long numel) {
            this(name, numel, null);
        }
    }

    /** A parameter of a unit: its name in the model, its first element in the unit's flat buffer, its shape. */
    public record Param(String name, long offset, int[] shape) {
        public long numel() {
            long n = 1;
            for (int d : shape) {
                n *= d;
            }
            return n;
        }
    }

    /**
     * One shard file: for each unit (in order), the first element and the count it holds; since version 2, for each
     * parameter with elements in it, the slice of the parameter it holds (elements of the flattened parameter).
     */
    @JsonInclude(JsonInclude.Include.NON_NULL)
    public record Shard(String file, List<Range> ranges, Map<String, Range> tensors) {
        public Shard(String file, List<Range> ranges) {
            this(file, ranges, null);
        }
    }

    /** Elements [start, start + count) of a unit's flat buffer. */
    public record Range(long start, long count) {}
}
