package io.fsdp4j.config;

import io.fsdp4j.UserError;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * {@code model.*}: which model to train. Exactly one of the two is set: a Hugging Face model directory, or a named
 * preset architecture with random weights. Giving {@code model.path} drops the default preset.
 *
 * @param path   {@code model.path}: a directory with {@code config.json} and safetensors weights, or null
 * @param preset {@code model.preset}: a preset name such as {@code tiny} or {@code qwen2.5-7b}, or null; the model
 *               package decides which names exist
 * @param layers {@code model.layers}: with a preset, only its first this many decoder blocks (a quicker or smaller
 *               run of the same shapes); 0, the default: all of them
 */
public record ModelSection(Path path, String preset, int layers) {
    public static final String DEFAULT_PRESET = "tiny";

    public ModelSection(Path path, String preset) {
        this(path, preset, 0);
    }

    public ModelSection {
        if (layers < 0) {
            throw new UserError("config key 'model.layers' must be at least 1 (or 0: all of the preset's), got " + layers);
        }
        if (layers > 0 && path != null) {
            throw new UserError("config key 'model.layers' applies to a model.preset only; a model directory is trained"
                    + " whole");
        }
        if (path != null && preset != null) {
            throw new UserError("config keys 'model.path' and 'model.preset' are both set; give only one");
        }
        if (path == null && preset == null) {
            throw new UserError("config key 'model.path' or 'model.preset' must be given");
        }
    }

    public static ModelSection defaults() {
        return new ModelSection(null, DEFAULT_PRESET);
    }

    static ModelSection bind(ConfigSection s) {
        Path path = s.path("path");
        String preset = s.optionalString("preset");
        if (path == null && preset == null) {
            // The default preset only applies when no model directory is given.
            preset = DEFAULT_PRESET;
        }
        int layers = s.integer("layers", 0);
        s.finish();
        return new ModelSection(path, preset, layers);
    }

    Map<String, Object> toMap() {
        var m = new LinkedHashMap<String, Object>();
        m.put("path", TrainConfig.text(path));
        m.put("preset", preset);
        m.put("layers", layers);
        return m;
    }
}
