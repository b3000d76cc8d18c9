package io.fsdp4j.checkpoint;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.fsdp4j.UserError;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.config.BaseQuantization;
import io.fsdp4j.config.LoraSection;
import io.fsdp4j.fsdp.FsdpModel;
import io.fsdp4j.hf.HfCheckpoint;
import io.fsdp4j.hf.HfConfig;
import io.fsdp4j.model.CausalLM;
import io.fsdp4j.model.CausalLMs;
import io.fsdp4j.model.LoraSpec;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.Nf4RoundTrip;
import io.fsdp4j.model.ParamSource;
import io.fsdp4j.model.ParamSpec;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.safetensors.StreamingSafetensorsWriter;
import io.fsdp4j.tensor.DType;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Consumer;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * {@code fsdp4j export}: a checkpoint as a Hugging Face model directory that transformers loads, written as
 * transformers' {@code save_pretrained} writes one: the weights in safetensors shards of at most
 * {@link Options#maxShardBytes} bytes each ({@code model-00001-of-00003.safetensors} ...) listed in
 * {@code model.safetensors.index.json}, or a single {@code model.safetensors} and no index when they fit one shard;
 * the config.json (the original model's when the run started from a Hugging Face directory, else one written for the
 * architecture) naming the dtype written, and the original's tokenizer files, generation config and chat template.
 *
 * <p>Streamed: values go from the checkpoint's mapped shard files to the output files {@value #CHUNK} at a time, so
 * the heap holds one chunk whatever the model's size (a 7B model exports in a small heap). Written into a hidden
 * temporary directory beside the target and renamed when complete: a crash mid-export leaves no directory under the
 * target's name, and the next export replaces the leftover.
 */
public final class HfExport {
    /** Files copied from the original model directory when present. */
    private static final List<String> TOKENIZER_FILES = List.of("tokenizer.json", "tokenizer_config.json",
            "special_tokens_map.json", "vocab.json", "merges.txt", "tokenizer.model", "generation_config.json",
            "chat_template.jinja", "chat_template.json", "added_tokens.json");
    /** The single-shard name and the index name transformers uses. */
    public static final String SINGLE_FILE = "model.safetensors", INDEX_FILE = "model.safetensors.index.json";
    /** transformers' default max_shard_size, "5GB". */
    public static final long DEFAULT_MAX_SHARD_BYTES = 5_000_000_000L;
    /** Values moved at a time: the heap the export needs beyond its bookkeeping (4 MiB of floats). */
    static final int CHUNK = 1 << 20;

    private HfExport() {}

    /**
     * How to export.
     *
     * @param dtype         the weights' dtype, or null for the source model's ({@code torch_dtype} / {@code dtype} of
     *                      its config.json; fp32 for a preset, whose master weights are fp32)
     * @param maxShardBytes the most tensor bytes in one shard file (a larger tensor gets a shard of its own)
     * @param progress      told one line per file written (may be a no-op)
     */
    public record Options(DType dtype, long maxShardBytes, Consumer<String> progress, boolean merge) {
        public Options {
            if (maxShardBytes <= 0) {
                throw new UserError("--max-shard-size must be positive, got " + maxShardBytes + " bytes");
            }
        }

        /** Without merging (a LoRA checkpoint exports its adapter). */
        public Options(DType dtype, long maxShardBytes, Consumer<String> progress) {
            this(dtype, maxShardBytes, progress, false);
        }

        public static Options defaults() {
            return new Options(null, DEFAULT_MAX_SHARD_BYTES, line -> { });
        }

        public Options withDtype(DType d) {
            return new Options(d, maxShardBytes, progress, merge);
        }

        /** A LoRA checkpoint: with {@code merge}, the base model with its adapters merged, instead of the adapter. */
        public Options withMerge(boolean m) {
            return new Options(dtype, maxShardBytes, progress, m);
        }
    }

    /** Exports in {@code dtype} with the default shard size. */
    public static Path export(Path checkpointDir, Path outDir, DType dtype) {
        return export(checkpointDir, outDir, Options.defaults().withDtype(dtype));
    }

    public static Path export(Path checkpointDir, Path outDir, Options options) {
        try (SavedCheckpoint checkpoint = SavedCheckpoint.open(checkpointDir)) {
            return export(checkpoint, outDir, options);
        }
    }

    /** Exports a checkpoint already open (its files stay readable even if it is pruned meanwhile). */
    public static Path export(SavedCheckpoint checkpoint, Path outDir, Options options) {
        if (Files.exists(outDir) && !isEmptyDirectory(outDir)) {
            throw new UserError("export directory " + outDir + " already exists and is not empty; choose a new one");
        }
        Path tmp = outDir.toAbsolutePath().resolveSibling("." + outDir.getFileName() + ".tmp");
        boolean complete = false;
        try {
            ModelConfig config = checkpoint.index().model();
            List<UnitLayout> layout = CausalLMs.layout(config);
            Path originalDir = originalDir(checkpoint.index().modelPath());
            LoraSection lora = loraOf(checkpoint.index());
            ParamSource params;
            if (lora != null) {
                LoraSpec spec = LoraSpec.of(lora, config);
                CausalLM model = CausalLMs.create(config, CpuBackend.INSTANCE, spec);
                List<UnitLayout> adapters = FsdpModel.trainableLayouts(model);
                checkpoint.requireLayout(adapters);
                List<float[]> adapterValues = whole(adapters, checkpoint.source(SavedCheckpoint.Kind.PARAMS));
                if (!options.merge()) {
                    deleteTree(tmp);
                    PeftAdapter.write(tmp, adapters, adapterValues, spec, lora.alpha(), lora.rslora(),
                            checkpoint.index().modelPath(), lora.quantized() ? bitsandbytesConfig(checkpoint.index())
                                    : null);
                    options.progress().accept("wrote " + PeftAdapter.WEIGHTS + " and " + PeftAdapter.CONFIG
                            + (lora.quantized() ? " (and " + PeftAdapter.CARD + ": the base was NF4)" : ""));
                    if (Files.exists(outDir)) {
                        Files.delete(outDir); // empty, checked above
                    }
                    Files.move(tmp, outDir, StandardCopyOption.ATOMIC_MOVE);
                    complete = true;
                    return outDir;
                }
                if (originalDir == null) {
                    throw new UserError("checkpoint " + checkpoint + " holds LoRA adapters of a base model that is not"
                            + " a model directory (" + checkpoint.index().modelPath() + "); merging needs its weights");
                }
                params = mergedSource(model, layout, adapters, adapterValues, originalDir, spec, lora.quantized());
            } else {
                checkpoint.requireLayout(layout);
                params = checkpoint.source(SavedCheckpoint.Kind.PARAMS);
            }
            ObjectNode configJson = originalDir != null ? readJson(originalDir.resolve("config.json")) : HfConfig.toJson(config);
            DType dtype = options.dtype() != null ? options.dtype() : sourceDtype(configJson);
            deleteTree(tmp); // left by a crash during an earlier export
            Files.createDirectories(tmp);

            List<Shard> shards = plan(layout, dtype, options.maxShardBytes());
            float[] chunk = new float[CHUNK];
            Map<String, String> weightMap = new TreeMap<>();
            long totalBytes = 0, totalParams = 0;
            for (Shard shard : shards) {
                List<StreamingSafetensorsWriter.Entry> entries = new ArrayList<>();
                for (Placed p : shard.params()) {
                    long[] shape = java.util.Arrays.stream(p.spec().shape()).asLongStream().toArray();
                    entries.add(new StreamingSafetensorsWriter.Entry(p.spec().name(), dtype, shape));
                    weightMap.put(p.spec().name(), shard.file());
                    totalBytes += p.spec().numel() * dtype.bytes();
                    totalParams += p.spec().numel();
                }
                try (var writer = StreamingSafetensorsWriter.create(tmp.resolve(shard.file()), entries,
                        Map.of("format", "pt"))) {
                    for (Placed p : shard.params()) {
                        for (long at = 0; at < p.spec().numel(); at += CHUNK) {
                            int n = (int) Math.min(CHUNK, p.spec().numel() - at);
                            params.read(p.unit(), p.spec().offset() + at, chunk, 0, n);
                            writer.write(chunk, 0, n);
                        }
                    }
                    writer.finish();
                }
                options.progress().accept("wrote " + shard.file() + " (" + shard.params().size() + " tensors, "
                        + shard.bytes() + " bytes)");
            }
            var mapper = new ObjectMapper();
            if (shards.size() > 1) {
                ObjectNode index = mapper.createObjectNode();
                index.putObject("metadata").put("total_parameters", totalParams).put("total_size", totalBytes);
                ObjectNode map = index.putObject("weight_map");
                weightMap.forEach(map::put);
                mapper.writerWithDefaultPrettyPrinter().writeValue(tmp.resolve(INDEX_FILE).toFile(), index);
            }
            setDtype(configJson, dtype);
            if (originalDir == null && config.vocabSize() == io.fsdp4j.data.ByteTokenizer.VOCAB) { // a byte preset
                io.fsdp4j.data.ByteTokenizer.writeHfFiles(tmp, configJson);
            }
            mapper.writerWithDefaultPrettyPrinter().writeValue(tmp.resolve("config.json").toFile(), configJson);
            if (originalDir != null) {
                for (String name : TOKENIZER_FILES) {
                    if (Files.isRegularFile(originalDir.resolve(name))) { // follows the Hub cache's links into blobs/
                        Files.copy(originalDir.resolve(name), tmp.resolve(name));
                    }
                }
            }
            if (Files.exists(outDir)) {
                Files.delete(outDir); // empty, checked above
            }
            Files.move(tmp, outDir, StandardCopyOption.ATOMIC_MOVE);
            complete = true;
            return outDir;
        } catch (IOException e) {
            throw new UserError("cannot write export directory " + outDir + ": " + e.getMessage());
        } finally {
            if (!complete) {
                try {
                    deleteTree(tmp);
                } catch (IOException ignored) {
                    // the failure that led here matters more; the next export removes the leftover
                }
            }
        }
    }

    /** The LoRA settings a checkpoint was saved under (from its run's config), or null: every weight trained. */
    /** The {@code lora.*} a checkpoint's run trained with (its adapters are what it holds), or null without LoRA. */
    public static LoraSection loraOf(CheckpointIndex index) {
        JsonNode lora = index.config() == null ? null : index.config().get("lora");
        if (lora == null || lora.path("rank").asInt(0) == 0) {
            return null;
        }
        BaseQuantization quantize = lora.path("quantize").asText("none").equals("nf4") ? BaseQuantization.NF4
                : BaseQuantization.NONE; // a checkpoint from before lora.quantize: none
        return new LoraSection(lora.path("rank").asInt(), lora.path("alpha").asDouble(), 0,
                List.of(lora.path("target_modules").asText().split(",")), lora.path("rslora").asBoolean(false), null,
                quantize);
    }

    /**
     * What a QLoRA run's base was, as transformers' BitsAndBytesConfig.to_dict names it (bnb_4bit_compute_dtype: the
     * run's fsdp.param_dtype).
     */
    static Map<String, Object> bitsandbytesConfig(CheckpointIndex index) {
        String dtype = index.config().path("fsdp").path("param_dtype").asText("fp32");
        Map<String, Object> m = new java.util.LinkedHashMap<>();
        m.put("quant_method", "bitsandbytes");
        m.put("load_in_8bit", "False");
        m.put("load_in_4bit", "True");
        m.put("bnb_4bit_quant_type", "nf4");
        m.put("bnb_4bit_use_double_quant", "False");
        m.put("bnb_4bit_compute_dtype", switch (dtype) {
            case "bf16" -> "bfloat16";
            case "fp16" -> "float16";
            default -> "float32";
        });
        m.put("bnb_4bit_quant_storage", "uint8");
        return m;
    }

    /** Each unit of {@code layouts} whole from {@code source}. */
    private static List<float[]> whole(List<UnitLayout> layouts, ParamSource source) {
        List<float[]> result = new ArrayList<>();
        for (int u = 0; u < layouts.size(); u++) {
            float[] values = new float[Math.toIntExact(layouts.get(u).numel())];
            source.read(u, 0, values, 0, values.length);
            result.add(values);
        }
        return result;
    }

    /**
     * The base model's units with the adapters merged (PEFT's merge_and_unload): the base from its directory, each
     * block laid out with its adapters, merged, as a source over the base's layout. Held in memory whole. With
     * {@code nf4} (a QLoRA run) the adapters are merged into the base the run trained against: each block linear
     * quantized to NF4 and dequantized (fp32) as the run held it ({@link Nf4RoundTrip}), the rest as it is.
     */
    private static ParamSource mergedSource(CausalLM model, List<UnitLayout> layout, List<UnitLayout> adapters,
                                            List<float[]> adapterValues, Path baseDir, LoraSpec spec, boolean nf4) {
        List<float[]> adapted = new ArrayList<>();
        try (HfCheckpoint base = HfCheckpoint.open(baseDir, layout)) {
            List<float[]> baseValues = whole(layout, nf4 ? new Nf4RoundTrip(base, layout) : base);
            int next = 0;
            for (int u = 0; u < layout.size(); u++) {
                long frozen = model.frozenNumel(u);
                float[] unit = new float[Math.toIntExact(model.units().get(u).numel())];
                System.arraycopy(baseValues.get(u), 0, unit, 0, baseValues.get(u).length);
                if (frozen < unit.length) {
                    float[] a = adapterValues.get(next++);
                    System.arraycopy(a, 0, unit, Math.toIntExact(frozen), a.length);
                }
                adapted.add(unit);
            }
        }
        List<float[]> merged = spec.merge(model.units(), adapted, layout);
        return (unit, start, dst, dstOffset, count) ->
                System.arraycopy(merged.get(unit), Math.toIntExact(start), dst, dstOffset, count);
    }

    /** A parameter and the unit whose flat buffer holds it. */
    record Placed(int unit, ParamSpec spec) {}

    /** One output file and the parameters it holds, in order. */
    record Shard(String file, List<Placed> params, long bytes) {}

    /**
     * Parameters into shards as huggingface_hub's {@code split_torch_state_dict_into_shards} does: in order, a new
     * shard when the next parameter would take the current one past the limit, and a parameter larger than the
     * limit alone in a shard of its own. Files are named {@code model-00001-of-0000N.safetensors}, or
     * {@value #SINGLE_FILE} when there is one.
     */
    static List<Shard> plan(List<UnitLayout> layout, DType dtype, long maxShardBytes) {
        List<List<Placed>> groups = new ArrayList<>();
        List<Long> sizes = new ArrayList<>();
        List<Placed> current = new ArrayList<>();
        long currentBytes = 0;
        for (int u = 0; u < layout.size(); u++) {
            for (ParamSpec p : layout.get(u).params()) {
                long bytes = p.numel() * dtype.bytes();
                if (bytes > maxShardBytes) {
                    groups.add(List.of(new Placed(u, p)));
                    sizes.add(bytes);
                    continue;
                }
                if (currentBytes + bytes > maxShardBytes) {
                    groups.add(current);
                    sizes.add(currentBytes);
                    current = new ArrayList<>();
                    currentBytes = 0;
                }
                current.add(new Placed(u, p));
                currentBytes += bytes;
            }
        }
        if (!current.isEmpty()) {
            groups.add(current);
            sizes.add(currentBytes);
        }
        List<Shard> shards = new ArrayList<>();
        for (int i = 0; i < groups.size(); i++) {
            String file = groups.size() == 1 ? SINGLE_FILE
                    : String.format("model-%05d-of-%05d.safetensors", i + 1, groups.size());
            shards.add(new Shard(file, List.copyOf(groups.get(i)), sizes.get(i)));
        }
        return shards;
    }

    private static final Pattern SIZE = Pattern.compile("(\\d+(?:\\.\\d+)?)\\s*([KMGT]I?B)?", Pattern.CASE_INSENSITIVE);

    /**
     * A shard size as transformers spells one: bytes ({@code 1000000}), or a number with a unit, decimal
     * ({@code KB MB GB TB}: {@code 5GB} is 5 * 10^9) or binary ({@code KiB MiB GiB TiB}).
     */
    public static long parseSize(String text) {
        Matcher m = SIZE.matcher(text.trim());
        if (!m.matches()) {
            throw new UserError("--max-shard-size must be a size such as 5GB, 500MB, 2GiB or a number of bytes, got '"
                    + text + "'");
        }
        double number = Double.parseDouble(m.group(1));
        String unit = m.group(2) == null ? "" : m.group(2).toUpperCase(Locale.ROOT);
        double scale = switch (unit) {
            case "" -> 1;
            case "KB" -> 1e3;
            case "MB" -> 1e6;
            case "GB" -> 1e9;
            case "TB" -> 1e12;
            case "KIB" -> 1L << 10;
            case "MIB" -> 1L << 20;
            case "GIB" -> 1L << 30;
            case "TIB" -> 1L << 40;
            default -> throw new AssertionError(unit);
        };
        long bytes = (long) (number * scale);
        if (bytes <= 0) {
            throw new UserError("--max-shard-size must be positive, got '" + text + "'");
        }
        return bytes;
    }

    /** The checkpoint's source model directory, or null for a preset (or a source no longer on this machine). */
    private static Path originalDir(String modelPath) {
        if (modelPath == null) {
            return null;
        }
        Path dir = Path.of(modelPath);
        return Files.isRegularFile(dir.resolve("config.json")) ? dir : null;
    }

    private static ObjectNode readJson(Path file) {
        try {
            JsonNode node = new ObjectMapper().readTree(file.toFile());
            if (node instanceof ObjectNode object) {
                return object;
            }
            throw new UserError(file + " must hold a JSON object");
        } catch (IOException e) {
            throw new UserError(file + " is not valid JSON: " + e.getMessage().lines().findFirst().orElse(""));
        }
    }

    /** The dtype a config.json names ({@code dtype}, transformers 5, else {@code torch_dtype}); fp32 if none. */
    static DType sourceDtype(JsonNode configJson) {
        JsonNode named = configJson.hasNonNull("dtype") ? configJson.get("dtype") : configJson.get("torch_dtype");
        String name = named == null || !named.isTextual() ? "float32" : named.asText();
        return switch (name) {
            case "bfloat16" -> DType.BF16;
            case "float16" -> DType.F16;
            default -> DType.F32;
        };
    }

    static String torchName(DType dtype) {
        return switch (dtype) {
            case BF16 -> "bfloat16";
            case F16 -> "float16";
            case F32 -> "float32";
            case I32 -> throw new IllegalArgumentException("model weights are floats");
        };
    }

    /** Makes config.json state one dtype, the one written: torch_dtype, and dtype where present. */
    private static void setDtype(ObjectNode configJson, DType dtype) {
        configJson.put("torch_dtype", torchName(dtype));
        if (configJson.has("dtype")) {
            configJson.put("dtype", torchName(dtype));
        }
    }

    private static boolean isEmptyDirectory(Path dir) {
        try (Stream<Path> entries = Files.list(dir)) {
            return entries.findAny().isEmpty();
        } catch (IOException e) {
            return false;
        }
    }

    private static void deleteTree(Path dir) throws IOException {
        if (!Files.exists(dir)) {
            return;
        }
        try (Stream<Path> walk = Files.walk(dir)) {
            for (Path p : walk.sorted(Comparator.reverseOrder()).toList()) {
                Files.delete(p);
            }
        }
    }
}
