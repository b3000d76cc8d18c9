package io.fsdp4j.eval;

import io.fsdp4j.UserError;
import io.fsdp4j.backend.Backend;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.checkpoint.Checkpoints;
import io.fsdp4j.checkpoint.HfExport;
import io.fsdp4j.checkpoint.PeftAdapter;
import io.fsdp4j.checkpoint.SavedCheckpoint;
import io.fsdp4j.config.BaseQuantization;
import io.fsdp4j.config.LoraSection;
import io.fsdp4j.fsdp.FsdpModel;
import io.fsdp4j.hf.HfCheckpoint;
import io.fsdp4j.hf.HfConfig;
import io.fsdp4j.model.CausalLM;
import io.fsdp4j.model.CausalLMs;
import io.fsdp4j.model.LoraSpec;
import io.fsdp4j.model.Nf4RoundTrip;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.ParamSource;
import io.fsdp4j.model.SingleDeviceModel;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.tensor.Tensor;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.function.BiFunction;

/**
 * A model to evaluate, from a Hugging Face model directory or an fsdp4j checkpoint: its config and where its
 * tokenizer is found by default (the model directory itself, or the Hugging Face directory a checkpoint's run
 * started from) are known at once, so that bad input fails before a large model is read. {@code eval} and
 * {@code score} shard its weights over their ranks ({@link #withParams}, {@link EvalJob}); {@link #load} reads them
 * whole onto the CPU backend, and the static {@code build} methods make a {@link SingleDeviceModel} from any full
 * parameters (a {@link ParamSource}, or per-unit arrays): the whole-model reference of the tests, and the demo's.
 * {@link #withAdapter} puts a PEFT LoRA adapter on it ({@code --adapter DIR}): the base frozen, the adapters applied
 * in each block's forward, unmerged.
 */
public final class EvalModel {
    private final ModelConfig config;
    private final String name;
    private final Path dir; // the model directory, or the checkpoint (step-NNNNNNNN) directory
    private final boolean checkpoint;
    private final Path tokenizer; // a directory holding tokenizer.json, or null
    private final String noTokenizer; // why there is no default tokenizer, when tokenizer is null
    private final Path adapter; // a PEFT adapter directory, or a LoRA checkpoint holding the adapters; or null
    private final LoraSpec lora; // its adapters, or null
    private final boolean nf4; // the adapters of a QLoRA run (lora.quantize: nf4): the base's linears as it held them

    private EvalModel(ModelConfig config, String name, Path dir, boolean checkpoint, Path tokenizer,
                      String noTokenizer) {
        this(config, name, dir, checkpoint, tokenizer, noTokenizer, null, null);
    }

    private EvalModel(ModelConfig config, String name, Path dir, boolean checkpoint, Path tokenizer,
                      String noTokenizer, Path adapter, LoraSpec lora) {
        this(config, name, dir, checkpoint, tokenizer, noTokenizer, adapter, lora, false);
    }

    private EvalModel(ModelConfig config, String name, Path dir, boolean checkpoint, Path tokenizer,
                      String noTokenizer, Path adapter, LoraSpec lora, boolean nf4) {
        this.config = config;
        this.name = name;
        this.dir = dir;
        this.checkpoint = checkpoint;
        this.tokenizer = tokenizer;
        this.noTokenizer = noTokenizer;
        this.adapter = adapter;
        this.lora = lora;
        this.nf4 = nf4;
    }

    /**
     * A LoRA run's checkpoint ({@code saved}: the adapters) on the model directory its run started from
     * ({@code original}), whose weights are the frozen base and whose tokenizer is the default; a QLoRA run's
     * ({@code nf4}) on that base's NF4 round trip, the weights it trained against ({@link Nf4RoundTrip}).
     */
    private static EvalModel ofLoraCheckpoint(SavedCheckpoint saved, Path source, ModelConfig config, LoraSpec spec,
                                              String original, boolean nf4) {
        String name = "checkpoint " + source;
        Path base = original == null ? null : Path.of(original);
        if (base == null || !Files.isRegularFile(base.resolve("config.json"))) {
            throw new UserError(name + " holds LoRA adapters of a base model that is not a model directory ("
                    + original + "); export it (fsdp4j export) and give the base model with --model and the export"
                    + " with --adapter");
        }
        saved.requireLayout(FsdpModel.trainableLayouts(CausalLMs.create(config, CpuBackend.INSTANCE,
                spec)));
        boolean hasTokenizer = Files.isRegularFile(base.resolve("tokenizer.json"));
        return new EvalModel(config, name + " (" + (nf4 ? "QLoRA" : "LoRA") + " adapters of " + base + ")", base,
                false, hasTokenizer ? base : null, name + "'s base model " + base + " has no tokenizer.json", source,
                spec, nf4);
    }

    /** Whether the adapters are a LoRA checkpoint's (else a PEFT adapter directory's). */
    private boolean adaptersInCheckpoint() {
        return Files.isRegularFile(adapter.resolve(SavedCheckpoint.INDEX));
    }

    /**
     * This model with the LoRA adapters of the PEFT adapter directory {@code adapterDir} ({@code --adapter}:
     * adapter_config.json and adapter_model.safetensors, as PEFT and {@code fsdp4j export} write them) on its linears.
     * The directory is read and checked against this model at once, before any weight is: its rank, its linears
     * (the family's, {@link LoraSpec#linears}), every block's adapters with this model's shapes and nothing else;
     * each failure is a one-line error naming the file.
     */
    public EvalModel withAdapter(Path adapterDir) {
        if (lora != null) {
            throw new UserError("--adapter: " + name + " holds LoRA adapters already; give its base model with "
                    + "--model and the adapter with --adapter, or the checkpoint alone");
        }
        PeftAdapter.Adapter read = PeftAdapter.read(adapterDir, "--adapter");
        List<String> linears = LoraSpec.linears(config.architecture());
        List<String> foreign = read.modules().stream().filter(m -> !linears.contains(m)).toList();
        if (!foreign.isEmpty()) {
            throw new UserError("--adapter: " + adapterDir.resolve(PeftAdapter.WEIGHTS) + " adapts "
                    + String.join(", ", foreign) + ", which " + config.architecture().hfName() + " does not have (its "
                    + "linears: " + String.join(", ", linears) + "); is it an adapter of another base model than "
                    + name + "?");
        }
        LoraSpec spec = new LoraSpec(read.rank(), read.scaling(), linears.stream().filter(read.modules()::contains)
                .toList());
        EvalModel adapted = new EvalModel(config, name + " with the adapter " + adapterDir, dir, checkpoint, tokenizer,
                noTokenizer, adapterDir, spec);
        try (PeftAdapter.Source checked = adapted.openAdapter()) {
            return adapted;
        }
    }

    /** The adapter's tensors over the adapters' layouts, checked against them. */
    private PeftAdapter.Source openAdapter() {
        String hint = "is it an adapter of " + name + " (" + config.architecture().hfName() + ", " + config.layers()
                + " layers, hidden size " + config.hidden() + ")?";
        return PeftAdapter.open(adapter, FsdpModel.trainableLayouts(create(CpuBackend.INSTANCE)),
                "--adapter", hint, hint, true);
    }

    /**
     * How the base's block linears are held: NF4 for a QLoRA run's checkpoint (its sources, {@link #withParams}, give
     * them as the NF4 round trip already, which quantizes to the same codes again), else as they are.
     */
    public BaseQuantization baseQuantization() {
        return nf4 ? BaseQuantization.NF4 : BaseQuantization.NONE;
    }

    /** The model's blocks on {@code backend}: with the adapters' when it has some ({@link #withAdapter}). */
    public CausalLM create(Backend backend) {
        return CausalLMs.create(config, backend, lora);
    }

    /** A Hugging Face model directory (config.json + safetensors); its own tokenizer.json is the default tokenizer. */
    public static EvalModel fromHf(Path dir) {
        if (!Files.isDirectory(dir)) {
            throw new UserError("model directory " + dir + " does not exist");
        }
        ModelConfig config = HfConfig.read(dir);
        boolean hasTokenizer = Files.isRegularFile(dir.resolve("tokenizer.json"));
        return new EvalModel(config, "model directory " + dir, dir, false, hasTokenizer ? dir : null,
                "model directory " + dir + " has no tokenizer.json");
    }

    /**
     * An fsdp4j checkpoint ({@code step-NNNNNNNN}), or a {@code checkpoint.dir} whose newest checkpoint is taken:
     * its model config and fp32 parameters. The default tokenizer is that of the run's original model directory.
     */
    public static EvalModel fromCheckpoint(Path dir) {
        if (!Files.isDirectory(dir)) {
            throw new UserError("checkpoint " + dir + " does not exist");
        }
        Path source = Checkpoints.resolve(dir);
        try (SavedCheckpoint saved = SavedCheckpoint.open(source)) {
            ModelConfig config = saved.index().model();
            String original = saved.index().modelPath();
            String name = "checkpoint " + source;
            LoraSection loraSection = HfExport.loraOf(saved.index());
            if (loraSection != null) { // the adapters of a LoRA run, on the base model it started from
                return ofLoraCheckpoint(saved, source, config, LoraSpec.of(loraSection, config), original,
                        loraSection.quantized());
            }
            saved.requireLayout(CausalLMs.layout(config));
            if (original == null) {
                return new EvalModel(config, name, source, true, null,
                        name + " was trained from a preset and has no tokenizer");
            }
            Path originalDir = Path.of(original);
            if (!Files.isRegularFile(originalDir.resolve("tokenizer.json"))) {
                return new EvalModel(config, name, source, true, null, name + " was trained from " + original
                        + ", which has no tokenizer.json (any more)");
            }
            return new EvalModel(config, name, source, true, originalDir, null);
        }
    }

    /**
     * Runs {@code body} with the model's fp32 parameters as a source (the safetensors of a model directory, the
     * parameter shards of a checkpoint), open while it runs: what {@link EvalJob}'s ranks read their shards from.
     */
    public <T> T withParams(java.util.function.Function<ParamSource, T> body) {
        if (!checkpoint) {
            try (HfCheckpoint weights = HfCheckpoint.open(dir, CausalLMs.layout(config))) {
                return body.apply(weights);
            }
        }
        try (SavedCheckpoint saved = SavedCheckpoint.open(dir)) {
            saved.requireLayout(CausalLMs.layout(config));
            return body.apply(saved.source(SavedCheckpoint.Kind.PARAMS));
        }
    }

    /**
     * Runs {@code body} with the base model's parameters ({@link #withParams}) and the adapters (numbered as
     * {@link FsdpModel#trainableLayouts} of {@link #create}; null without an adapter) as sources, both
     * open while it runs: what {@link FsdpModel#apply} reads (base frozen, adapters trained).
     */
    public <T> T withParams(BiFunction<ParamSource, ParamSource, T> body) {
        if (lora == null) {
            return withParams(base -> body.apply(base, null));
        }
        if (adaptersInCheckpoint()) {
            try (SavedCheckpoint saved = SavedCheckpoint.open(adapter)) {
                ParamSource adapters = saved.source(SavedCheckpoint.Kind.PARAMS);
                return withParams(base -> body.apply(nf4 ? new Nf4RoundTrip(base, CausalLMs.layout(config)) : base,
                        adapters));
            }
        }
        try (PeftAdapter.Source adapters = openAdapter()) {
            return withParams(base -> body.apply(base, adapters));
        }
    }

    /**
     * The directory of the model's tokenizer (its own, or the checkpoint's original model directory), or null when it
     * has none (a preset's checkpoint: data in text formats is then read as bytes, for a byte vocabulary).
     */
    public Path tokenizerDir() {
        return tokenizer;
    }

    /**
     * The directory of the tokenizer that data in text formats is read with: {@code option} (--tokenizer: a model
     * directory, a tokenizer.json, or {@code bytes}, giving null), else the model's; null means the byte tokenizer,
     * which a model of another vocabulary cannot use (a {@link UserError} then says to pass --tokenizer).
     */
    public Path textTokenizerDir(String option) {
        if (option != null) {
            Path path = Path.of(option);
            return option.equals("bytes") ? null : Files.isDirectory(path) ? path : path.toAbsolutePath().getParent();
        }
        if (tokenizer == null && config.vocabSize() != io.fsdp4j.data.ByteTokenizer.VOCAB) {
            defaultTokenizer(); // says why there is none, and what to pass
        }
        return tokenizer;
    }

    /** Reads the weights: every unit whole, fp32, on the CPU backend (the reference that tests compare with). */
    public SingleDeviceModel load() {
        if (lora != null) {
            CausalLM model = create(CpuBackend.INSTANCE);
            return withParams((base, adapters) -> {
                List<Tensor> units = new ArrayList<>();
                int next = 0;
                for (int u = 0; u < model.units().size(); u++) {
                    float[] values = new float[Math.toIntExact(model.units().get(u).numel())];
                    int frozen = Math.toIntExact(model.frozenNumel(u));
                    base.read(u, 0, values, 0, frozen);
                    if (frozen < values.length) {
                        adapters.read(next++, 0, values, frozen, values.length - frozen);
                    }
                    units.add(CpuBackend.INSTANCE.upload(values, values.length));
                }
                return new SingleDeviceModel(model, CpuBackend.INSTANCE, units);
            });
        }
        if (!checkpoint) {
            try (HfCheckpoint weights = HfCheckpoint.open(dir, CausalLMs.layout(config))) {
                return build(config, CpuBackend.INSTANCE, weights);
            }
        }
        try (SavedCheckpoint saved = SavedCheckpoint.open(dir)) {
            saved.requireLayout(CausalLMs.layout(config));
            return build(config, CpuBackend.INSTANCE, saved.source(SavedCheckpoint.Kind.PARAMS));
        }
    }

    /** The model with every unit's full parameters read from {@code params}, on {@code backend}. */
    public static SingleDeviceModel build(ModelConfig config, Backend backend, ParamSource params) {
        CausalLM model = CausalLMs.create(config, backend);
        List<Tensor> units = new ArrayList<>();
        for (int u = 0; u < model.units().size(); u++) {
            float[] values = new float[Math.toIntExact(model.units().get(u).numel())];
            params.read(u, 0, values, 0, values.length);
            units.add(backend.upload(values, values.length));
        }
        return new SingleDeviceModel(model, backend, units);
    }

    /** The model from each unit's full parameters ({@code units.get(u)}: unit u's flat buffer, exactly its numel). */
    public static SingleDeviceModel build(ModelConfig config, Backend backend, List<float[]> units) {
        List<UnitLayout> layout = CausalLMs.layout(config);
        if (units.size() != layout.size()) {
            throw new IllegalArgumentException(units.size() + " units given; the model has " + layout.size());
        }
        for (int u = 0; u < layout.size(); u++) {
            if (units.get(u).length != layout.get(u).numel()) {
                throw new IllegalArgumentException("unit " + layout.get(u).name() + " has " + units.get(u).length
                        + " values; its layout has " + layout.get(u).numel());
            }
        }
        return build(config, backend, (unit, start, dst, dstOffset, count) ->
                System.arraycopy(units.get(unit), Math.toIntExact(start), dst, dstOffset, count));
    }

    public ModelConfig config() {
        return config;
    }

    /** What was loaded, for messages: "model directory DIR" or "checkpoint DIR/step-NNNNNNNN". */
    public String name() {
        return name;
    }

    /**
     * The directory of the default tokenizer (the model's own, or the checkpoint's original model directory);
     * without one, a {@link UserError} that says to pass {@code --tokenizer}.
     */
    public Path defaultTokenizer() {
        if (tokenizer == null) {
            throw new UserError(noTokenizer + "; pass --tokenizer PATH (a tokenizer.json or a model directory), or"
                    + " --tokenizer bytes for a model trained on the byte tokenizer (the tiny preset, the demo)");
        }
        return tokenizer;
    }
}
