package io.fsdp4j.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.dataformat.yaml.YAMLMapper;
import io.fsdp4j.UserError;
import io.fsdp4j.config.TrainConfig;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Every config in {@code examples/} loads and passes the checks {@code train --print-config} makes, as training
 * makes them; only a path that does not exist here (the model or the dataset a user downloads) is let through, and
 * only the checks that would read it are skipped. Other YAML files there (Kubernetes, Prometheus) are named.
 */
class ExamplesTest {
    private static final Path EXAMPLES = Path.of("examples");
    private static final YAMLMapper YAML = new YAMLMapper();
    /** Top-level keys of the YAML files in examples/ that are not fsdp4j configs. */
    private static final Set<String> OTHER_FILES = Set.of("apiVersion", "scrape_configs", "groups", "global");

    private static List<Path> yamlFiles() throws IOException {
        try (Stream<Path> files = Files.walk(EXAMPLES)) {
            return files.filter(f -> f.toString().endsWith(".yaml") || f.toString().endsWith(".yml")).sorted().toList();
        }
    }

    /** Whether a YAML file's top-level keys are config sections (or dotted keys of them). */
    private static boolean isTrainConfig(Path file) throws IOException {
        Set<String> sections = TrainConfig.defaults().toMap().keySet();
        for (JsonNode doc : YAML.readValues(YAML.createParser(file.toFile()), JsonNode.class).readAll()) {
            List<String> keys = new ArrayList<>();
            doc.fieldNames().forEachRemaining(keys::add);
            if (keys.stream().anyMatch(OTHER_FILES::contains)) {
                return false;
            }
        }
        return Files.readString(file).lines().anyMatch(l -> sections.stream().anyMatch(s -> l.startsWith(s + ":")
                || l.startsWith(s + ".")));
    }

    @Test
    void everyExampleConfigLoadsAndValidatesAsTrainingDoes() throws IOException {
        List<Path> configs = new ArrayList<>();
        for (Path file : yamlFiles()) {
            if (isTrainConfig(file)) {
                configs.add(file);
            }
        }
        assertThat(configs).extracting(p -> p.getFileName().toString()).contains(
                "qwen2.5-7b-alpaca-sft-1gpu.yaml", "qwen2.5-7b-alpaca-sft-8gpu.yaml",
                "qwen2.5-7b-alpaca-sft-2nodes.yaml", "mistral-7b-alpaca-json-metrics.yaml", "bloom-560m-squad-em-f1.yaml",
                "qwen3-8b-chat-sft-8gpu.yaml", "qwen2.5-0.5b-chat.yaml", "qwen2.5-7b-alpaca-lora-1gpu.yaml");
        for (Path file : configs) {
            for (int gpus : new int[] {0, 8}) {
                TrainConfig config;
                try {
                    config = TrainConfig.load(file, List.of(), gpus, Instant.now());
                    ConfigValidation.check(config, true);
                } catch (UserError e) {
                    throw new AssertionError(file + " (" + gpus + " GPUs): " + e.getMessage(), e);
                }
                assertThat(config.run().dir()).as("%s", file).isNotNull();
                if (file.getFileName().toString().contains("lora")) { // the adapters are what trains
                    assertThat(config.lora().rank()).as("%s", file).isPositive();
                }
                assertThat(config.checkpoint().dir()).as("%s", file).isNotNull();
                if (config.log().tensorboard() != null) { // true: in the run directory
                    assertThat(config.log().tensorboardDir()).as("%s", file).startsWithRaw(config.run().dir());
                }
            }
        }
    }

    @Test
    void everyOtherYamlFileInExamplesIsAKnownKind() throws IOException {
        for (Path file : yamlFiles()) {
            if (!isTrainConfig(file)) {
                assertThat(Files.readString(file)).as("%s is neither an fsdp4j config nor a Kubernetes or Prometheus"
                        + " file", file).containsAnyOf("apiVersion:", "scrape_configs:", "groups:");
            }
        }
    }

    @Test
    void validationRefusesWhatTrainingRefuses() throws IOException {
        assertThatThrownBy(() -> ConfigValidation.check(TrainConfig.load(null, List.of("model.preset=qwen-9000")), true))
                .isInstanceOf(UserError.class).hasMessageStartingWith("unknown model preset 'qwen-9000'");
        TrainConfig hub = TrainConfig.load(null, List.of("model.path=Nobody/no-such-model-here"));
        assertThatThrownBy(() -> ConfigValidation.check(hub, false)).isInstanceOf(UserError.class)
                .hasMessageContaining("Nobody/no-such-model-here");
        assertThatThrownBy(() -> ConfigValidation.check(TrainConfig.load(null, List.of("data.seq_len=4096")), true))
                .isInstanceOf(UserError.class).hasMessageContaining("exceeds the model's context of 1024");
        assertThatThrownBy(() -> ConfigValidation.check(TrainConfig.load(null, List.of("data.train=nope.jsonl")), false))
                .isInstanceOf(UserError.class).hasMessage("data.train nope.jsonl does not exist");
        // the command line: --print-config exits as train would, with one line
        CommandsEndToEndTest.run("train", "--print-config", "--set", "model.preset=qwen-9000")
                .failsWith("unknown model preset 'qwen-9000'");
        CommandsEndToEndTest.run("train", "--print-config", "--set", "model.path=Nobody/no-such-model-here")
                .failsWith("Nobody/no-such-model-here");
        CommandsEndToEndTest.run("train", "--print-config", "--set", "train.steps", "5")
                .failsWith("--set 'train.steps' has no '='");
    }
}
