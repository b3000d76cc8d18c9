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
 */
public record ModelSection(Path path, String preset) {
    public static final String DEFAULT_PRESET = "tiny";

    public ModelSection {
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

    static ModelSection bind(ConfigTree.Section s) {
        Path path = s.path("path");
        String preset = s.optionalString("preset");
        if (path == null && preset == null) {
            // The default preset only applies when no model directory is given.
            preset = DEFAULT_PRESET;
        }
        s.finish();
        return new ModelSection(path, preset);
    }

    Map<String, Object> toMap() {
        var m = new LinkedHashMap<String, Object>();
        m.put("path", TrainConfig.text(path));
        m.put("preset", preset);
        return m;
    }
}
