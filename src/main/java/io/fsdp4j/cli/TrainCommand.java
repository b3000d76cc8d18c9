package io.fsdp4j.cli;

import io.fsdp4j.UserError;
import io.fsdp4j.config.DeviceKind;
import io.fsdp4j.config.RunSection;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.cuda.Cuda;
import io.fsdp4j.cuda.NativeLibraries;
import io.fsdp4j.hf.ModelLocation;
import io.fsdp4j.train.Demo;
import io.fsdp4j.train.Training;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/** {@code fsdp4j train [CONFIG.yaml] [--set key=value ...]}. */
@Command(
        name = "train",
        mixinStandardHelpOptions = true,
        versionProvider = VersionProvider.class,
        usageHelpAutoWidth = true,
        description = {
            "Fine-tune (or train) a model with FSDP.",
            "Without a config or data.train: the built-in demo, the tiny model fine-tuned on the shipped instructions"
                    + " on CPU ranks, evaluated on their held-out split before and after, with a checkpoint and a"
                    + " Hugging Face export in runs/demo-<UTC time>/ (its settings: data.seq_len=64,"
                    + " train.batch_size=8, train.steps=200, checkpoint.every=100; --set overrides any of them).",
        })
final class TrainCommand implements Callable<Integer> {
    @ParentCommand
    private Main main;

    @Parameters(index = "0", arity = "0..1", paramLabel = "CONFIG.yaml",
            description = "YAML config of nested sections (keys below); left out: all defaults")
    private Path config;

    @Option(names = "--set", paramLabel = "KEY=VALUE",
            description = "override one config key, e.g. --set train.steps=10; lists comma-separated: "
                    + "--set optim.betas=0.9,0.95; repeatable, later ones win")
    private List<String> sets = new ArrayList<>();

    @Option(names = io.fsdp4j.preflight.Preflight.SKIP_OPTION,
            description = "in a job of several processes, start without comparing their versions, model, data, "
                    + "config and GPU health (logged, and told to the other processes); the same as --set "
                    + "dist.preflight=false")
    private boolean skipPreflight;

    @Option(names = "--exclude-unhealthy",
            description = "in a job of several nodes, start without the nodes whose GPUs fail the preflight's health "
                    + "test or are far slower than the others' (when the layout allows; those nodes' processes exit "
                    + "with status 4); the same as --set dist.exclude_unhealthy=true")
    private boolean excludeUnhealthy;

    @Option(names = "--print-config", description = "print the effective config as one JSON line and exit")
    private boolean printConfig;

    /** Lists the config keys with their defaults under the options; run when picocli builds the command. */
    @Spec
    void describeKeys(CommandSpec spec) {
        spec.usageMessage().footer(configKeysFooter());
    }

    @Override
    public Integer call() {
        List<String> settings = new ArrayList<>(sets);
        if (skipPreflight) {
            settings.add("dist.preflight=false");
        }
        if (excludeUnhealthy) {
            settings.add("dist.exclude_unhealthy=true");
        }
        // a first look, with the run directory's defaults (checkpoint.every needs the checkpoint.dir they give)
        TrainConfig effective = TrainConfig.load(config, settings, 0, Instant.EPOCH);
        RunSection given = TrainConfig.givenRun(config, settings);
        boolean demo = config == null && effective.data().train() == null;
        if (demo) { // the demo: its settings (its own run directory, runs/demo-<UTC time>), then the user's
            List<String> withDemo = new ArrayList<>(Demo.settings(Clock.systemUTC(), System.getenv(), given.dir()));
            withDemo.addAll(settings);
            settings = withDemo;
        }
        boolean runDirGiven = given.dir() != null;
        int gpus = gpusFor(effective);
        Instant start = demo ? null : runStart(given);
        effective = TrainConfig.load(config, settings, gpus, start);
        if (printConfig) {
            ConfigValidation.check(effective, false);
            main.out().println(effective.toJson());
            return 0;
        }
        // the default run directory, claimed: two runs started in the same second (a script, a test) take -2, -3, ...
        for (int tries = 0; !demo && !runDirGiven && effective.run().dir() != null && !claimed(effective.run().dir()); tries++) {
            if (tries == 100) {
                throw new UserError("cannot claim a run directory beside " + effective.run().dir() + "; set run.dir");
            }
            effective = TrainConfig.load(config, settings, gpus, start); // the name now taken: the next one
        }
        if (effective.model().path() != null) { // a Hub id becomes its snapshot in the Hugging Face cache
            Path dir = ModelLocation.resolve(effective.model().path(), "model.path");
            if (!dir.equals(effective.model().path())) {
                effective = effective.with("model.path=" + dir);
            }
        }
        return Training.run(effective, main.out());
    }

    /**
     * The GPUs a run of {@code config} would use, for the defaults that depend on them (a fine-tune's bf16 and one
     * rank per GPU): none with dist.device=cpu or where CUDA cannot be used.
     */
    private static int gpusFor(TrainConfig config) {
        if (config.dist().device() == DeviceKind.CPU || !NativeLibraries.cudaAvailable()) {
            return 0;
        }
        return Cuda.deviceCount();
    }

    /**
     * When the run starts, for its default run directory ({@code runs/<model>-<UTC time>}); null (no default) in
     * a job of several processes ({@code WORLD_SIZE} above 1) that names no run.dir or run.name: each process would
     * read its own clock.
     */
    private static Instant runStart(RunSection given) {
        boolean named = given.dir() != null || given.name() != null;
        return named || System.getenv().getOrDefault("WORLD_SIZE", "1").equals("1") ? Instant.now() : null;
    }

    /** Creates {@code dir} if no one has: false when it exists already (another run took the name first). */
    private static boolean claimed(Path dir) {
        try {
            if (dir.getParent() != null) {
                Files.createDirectories(dir.getParent());
            }
            Files.createDirectory(dir);
            return true;
        } catch (java.nio.file.FileAlreadyExistsException e) {
            return false;
        } catch (java.io.IOException e) {
            throw new UserError("cannot create the run directory " + dir + ": " + e.getMessage() + "; set run.dir");
        }
    }

    private static String[] configKeysFooter() {
        var lines = new ArrayList<String>();
        lines.add("");
        lines.add("Config keys and their defaults (YAML: 'section:' then 'key: value' beneath;");
        lines.add("command line: --set section.key=value):");
        TrainConfig.defaults().toMap().forEach((section, values) -> {
            var line = new StringBuilder("  ").append(section).append(':');
            for (Map.Entry<?, ?> e : ((Map<?, ?>) values).entrySet()) {
                String item = " " + e.getKey() + "=" + shown(e.getValue());
                if (line.length() + item.length() > 79) {
                    lines.add(line.toString());
                    line.setLength(0);
                    line.append(" ".repeat(section.length() + 3));
                }
                line.append(item);
            }
            lines.add(line.toString());
        });
        lines.add("A fine-tune (model.path set) has its own defaults for the keys it leaves out:");
        lines.add("  optim.lr=2e-5, schedule.warmup_ratio=0.03 (warmup_steps=0), data.seq_len=auto;");
        lines.add("  on GPUs fsdp.param_dtype=bf16, one rank per GPU (dist.ranks), and");
        lines.add("  fsdp.activation_checkpointing=auto, fsdp.param_copy=auto: what fsdp4j");
        lines.add("  plan predicts fastest that fits, decided at the start, said in one line.");
        lines.add("Outputs go into run.dir (default runs/<model>-<UTC time>): config.yaml,");
        lines.add("  metrics.jsonl, plots/, checkpoints/ and export/; with log.tensorboard=true,");
        lines.add("  tensorboard/ (tensorboard --logdir runs).");
        lines.add("Ready configs: examples/finetune/.");
        lines.add("");
        lines.add("Examples:");
        lines.add("  fsdp4j train                                  the built-in demo");
        lines.add("  fsdp4j train run.yaml --set train.steps=10    a config, one key overridden");
        lines.add("  fsdp4j train examples/finetune/qwen2.5-7b-alpaca-sft-8gpu.yaml");
        lines.add("  fsdp4j train --print-config --set fsdp.strategy=shard_grad_op");
        return lines.toArray(String[]::new);
    }

    private static String shown(Object value) {
        if (value instanceof List<?> list) {
            return String.join(",", list.stream().map(String::valueOf).toList());
        }
        return String.valueOf(value);
    }
}
