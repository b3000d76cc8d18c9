package io.fsdp4j.plan;

import com.fasterxml.jackson.databind.JsonNode;
import io.fsdp4j.UserError;
import io.fsdp4j.config.ActivationCheckpointing;
import io.fsdp4j.config.FsdpSection;
import io.fsdp4j.config.ParamCopy;
import io.fsdp4j.config.Precision;
import io.fsdp4j.config.ShardingStrategy;
import java.nio.file.Path;
import java.util.Locale;

/**
 * A one-GPU step that {@code fsdp4j bench} measured (its JSON line, in a file as written or as {@code fsdp4j launch}
 * prefixes it), for {@code plan --bench}: on one GPU a step is all compute, so the ratio of the measured step to the
 * modelled one scales every compute stage of the plan to the user's machine (another GPU model or clock, another
 * software stack). The last line of that model measured on one GPU without offload counts; it is modelled with the
 * settings it names (its {@code param_copy} too: per_gather where a line from before that key does not say).
 *
 * @param modelledSeconds the plan's own prediction of the same step, before scaling
 */
public record MeasuredStep(Path file, String model, Workload workload, String device, double stepSeconds,
                           double modelledSeconds) {
    /** What the plan's compute times are multiplied by. */
    public double computeScale() {
        return stepSeconds / modelledSeconds;
    }

    public static MeasuredStep read(Path file, String modelArgument, ModelShape model, GpuSpec gpu,
                                    ComputeModel.Calibration calibration) {
        String name = Path.of(modelArgument).getFileName().toString();
        JsonNode chosen = null;
        for (JsonLines.Line line : JsonLines.read(file, "--bench")) {
            JsonNode n = line.json();
            if (n == null) {
                continue; // not bench's
            }
            String measured = n.path("model").asText("");
            boolean sameModel = measured.equals(modelArgument) || Path.of(measured).getFileName() != null
                    && Path.of(measured).getFileName().toString().equals(name);
            if ("fsdp4j".equals(n.path("impl").asText()) && n.path("world").asInt() == 1 && sameModel
                    && !n.path("cpu_offload").asBoolean(false) && n.has("step_s") && n.has("seq")) {
                chosen = n;
            }
        }
        if (chosen == null) {
            throw new UserError("--bench: " + file + " has no one-GPU fsdp4j bench line of " + modelArgument + "; measure"
                    + " one with 'fsdp4j bench --set model.preset=" + name + " --set dist.device=cuda --set dist.ranks=1'");
        }
        String device = chosen.path("device").asText("");
        if (!device.toUpperCase(Locale.ROOT).contains(gpu.name().toUpperCase(Locale.ROOT))) {
            throw new UserError("--bench: " + file + " measured " + modelArgument + " on '" + device + "', not on an "
                    + gpu.name() + "; give --gpu for the GPU it ran on");
        }
        int seq = chosen.get("seq").asInt();
        double step = chosen.get("step_s").asDouble();
        int batch = (int) Math.round(chosen.path("tok_s_gpu").asDouble(chosen.path("tok_s").asDouble()) * step / seq);
        Workload w = new Workload(seq, Math.max(1, batch), choice(chosen, "ac", ActivationCheckpointing.values()),
                choice(chosen, "param_dtype", Precision.values()), choice(chosen, "reduce_dtype", Precision.values()))
                .withParamCopy(chosen.has("param_copy") ? choice(chosen, "param_copy", ParamCopy.values())
                        : FsdpSection.DEFAULT_PARAM_COPY)
                .withBlocksNotCheckpointed(chosen.path("blocks_not_checkpointed").asInt(0))
                .withBlocksSelective(chosen.path("blocks_selective").asInt(0));
        var modelled = Planner.predict(model, Cluster.of(gpu, 1, 1, 0, 1e9), w, ShardingStrategy.FULL_SHARD,
                new Planner.Options(calibration, false));
        return new MeasuredStep(file, modelArgument, w, device, step, modelled.time().stepSeconds());
    }

    private static <E extends Enum<E>> E choice(JsonNode line, String field, E[] values) {
        String text = line.path(field).asText("");
        for (E e : values) {
            if (e.toString().equalsIgnoreCase(text) || e.name().equalsIgnoreCase(text)) {
                return e;
            }
        }
        throw new UserError("--bench: the bench line's " + field + " '" + text + "' is not one of fsdp4j's");
    }
}
