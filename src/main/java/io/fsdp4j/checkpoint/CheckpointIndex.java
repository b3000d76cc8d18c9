package io.fsdp4j.checkpoint;

import com.fasterxml.jackson.databind.JsonNode;
import io.fsdp4j.model.ModelConfig;
import java.util.List;

/**
 * The {@code index.json} of a checkpoint directory: what was saved, by whom, and where each element range of
 * every unit lives.
 *
 * @param format always {@value #FORMAT}
 * @param version the layout version, {@value #VERSION}
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
 */
public record CheckpointIndex(String format, int version, int step, ModelConfig model, String modelPath,
                              List<Unit> units, List<Shard> shards, int worldSize, int shardSize, String strategy,
                              JsonNode config, Long optimizerSteps, Boolean finite, Long tokensSeen) {
    public static final String FORMAT = "fsdp4j-checkpoint";
    public static final int VERSION = 1;

    /** An index that does not count tokens (as checkpoints of earlier versions did not). */
    public CheckpointIndex(String format, int version, int step, ModelConfig model, String modelPath, List<Unit> units,
                           List<Shard> shards, int worldSize, int shardSize, String strategy, JsonNode config,
                           Long optimizerSteps, Boolean finite) {
        this(format, version, step, model, modelPath, units, shards, worldSize, shardSize, strategy, config,
                optimizerSteps, finite, null);
    }

    /** AdamW updates made before this checkpoint was saved. */
    public long optimizerStepsTaken() {
        return optimizerSteps != null ? optimizerSteps : step;
    }

    /** Whether the saved state is finite (checkpoints of earlier versions did not say, and are taken as finite). */
    public boolean isFinite() {
        return finite == null || finite;
    }

    /** A unit of the model's layout. */
    public record Unit(String name, long numel) {}

    /** One shard file: for each unit (in order), the first element and the count it holds. */
    public record Shard(String file, List<Range> ranges) {}

    /** Elements [start, start + count) of a unit's flat buffer. */
    public record Range(long start, long count) {}
}
